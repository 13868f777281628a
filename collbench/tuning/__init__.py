"""Tuning: the tune (pipeline.py tells it), selection of an algorithm per op and size, and the exports
jobs consume. The profile it writes is ``collbench.profile``, a layer below.

Submodules are imported where used (``.pipeline``, ``.selection``), so importing this
package stays light.
"""
