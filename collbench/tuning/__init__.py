"""Tuning: selection of an algorithm per op and size, the profile that records it, and its exporters.

Submodules are imported where used (``collbench.tuning.profile``, ``.selection``, ``.pipeline``,
``.exporters``), so importing this package stays light.
"""
