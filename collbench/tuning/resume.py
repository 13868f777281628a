"""What ``tune`` keeps when it is interrupted or fails, and how ``tune --resume`` continues it.

Tune streams every sweep round into a partial JSONL file beside its results file (see
``config.partial_paths``), and keeps its planned topology there too, never in /tmp: a tune
killed outright (SIGKILL, the OOM killer) then leaves nothing behind in /tmp, and what it measured
is where the next ``tune --resume`` looks. A plain re-run refuses to empty those files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from collbench.errors import CollbenchError, ConfigError, InputFileError, RankError
from collbench.topology.model import Topology


def partial_topology_path(rows_path: Path) -> Path:
    """The topology a tune plans its layout on, kept beside its partial rows."""
    return rows_path.with_name(f"{rows_path.stem}.partial-topology.yaml")


def keep_topology(topology: Topology, rows_path: Path) -> None:
    """Write ``topology`` beside the partial rows (``partial_topology_path``), once per tune."""
    from collbench.topology.io import save_topology

    save_topology(topology, partial_topology_path(rows_path))


def check_partials(partials: Sequence[Path], resume: bool) -> None:
    """Refuse to start over rows an interrupted tune left, or to resume from nothing.

    Raises ConfigError naming the files.
    """
    kept = [p for p in partials if p.is_file() and p.stat().st_size > 0]
    if kept and not resume:
        raise ConfigError(
            f"an interrupted tune left its measured rows in {_names(kept)}; "
            "add --resume to continue it, or remove them to start over"
        )
    if resume and not kept:
        names = _names(list(partials[:1]))
        raise ConfigError(f"--resume: no rows of an interrupted tune to continue (looked for {names} and the like)")


def kept_rows_hint(partials: Sequence[Path]) -> str:
    """``; the rows measured so far are in A, B; tune --resume continues from them`` ("" if none)."""
    kept = [p for p in partials if p.is_file() and p.stat().st_size > 0]
    if not kept:
        return ""
    return f"; the rows measured so far are in {_names(kept)}; the same tune with --resume continues from them"


def with_hint(exc: CollbenchError, hint: str) -> CollbenchError:
    """``exc`` with ``hint`` added to its message, keeping its class (and so its exit code)."""
    if not hint or hint in str(exc):
        return exc
    if isinstance(exc, RankError):
        return RankError(exc.rank, exc.host, exc.doing, exc.problem + hint)
    if isinstance(exc, InputFileError):
        return InputFileError(exc.path, exc.problem + hint, line=exc.line)
    exc.args = (f"{exc}{hint}",)
    return exc


def _names(paths: list[Path]) -> str:
    return ", ".join(str(p) for p in paths)
