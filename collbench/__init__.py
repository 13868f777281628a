"""collbench: how collective communication behaves on a machine, and how to tune it."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("collbench")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
