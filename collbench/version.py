"""collbench's version, read once from the installed package's metadata (what profiles and reports record).

Read on first use, not at import: ``importlib.metadata`` costs about 60 ms, which every ``--help``
would otherwise pay (``collbench.__init__`` imports this module's name lazily too).
"""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def collbench_version() -> str:
    """The installed collbench's version, or ``0.0.0+source`` in a source tree never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("collbench")
    except PackageNotFoundError:
        return "0.0.0+source"


def __getattr__(name: str) -> Any:
    # `from collbench.version import __version__` still works (PEP 562), reading the metadata then.
    if name == "__version__":
        return collbench_version()
    raise AttributeError(f"module 'collbench.version' has no attribute {name!r}")
