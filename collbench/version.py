"""collbench's version, read once from the installed package's metadata (what profiles and reports record)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("collbench")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"
