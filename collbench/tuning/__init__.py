"""Tuning: selection of an algorithm per op and size, the profile that records it, and its exporters.

Submodules are imported where used (``collbench.profile.document``, ``.selection``, ``.pipeline``,
``.exporters``), so importing this package stays light.
"""
