"""collbench: how collective communication behaves on a machine, and how to tune it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collbench.profile.document import Profile

__all__ = ["Profile", "__version__"]


def __getattr__(name: str) -> Any:
    # Lazy, so that `import collbench` stays light (no yaml, no torch) for jobs that only need one part.
    if name == "__version__":
        from collbench.version import collbench_version

        return collbench_version()
    if name == "Profile":
        from collbench.profile.document import Profile

        return Profile
    raise AttributeError(f"module 'collbench' has no attribute {name!r}")
