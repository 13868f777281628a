"""What ``tune`` keeps when it is interrupted or fails, and how ``tune --resume`` continues it.

Tune streams every sweep round into a partial JSONL file beside its results file (see
``config.partial_paths``), and keeps its planned topology there too, never in /tmp: a tune
killed outright (SIGKILL, the OOM killer) then leaves nothing behind in /tmp, and what it measured
is where the next ``tune --resume`` looks. A plain re-run refuses to empty those files, and so
does a ``--resume`` that asks for another tune (other ranks, ops, backend, sizes or depth): resumed, its
rows would be set beside rows it never measures, or dropped, and the files removed once it finishes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from collbench.backends import backend_named
from collbench.errors import CollbenchError, ConfigError, InputFileError, RankError, UnknownNameError
from collbench.schedules.ops import DTYPE_SIZES, Op, op_count
from collbench.text import printable
from collbench.topology.model import Topology
from collbench.units import format_bytes


def partial_topology_path(rows_path: Path) -> Path:
    """The topology a tune plans its layout on, kept beside its partial rows."""
    return rows_path.with_name(f"{rows_path.stem}.partial-topology.yaml")


def keep_topology(topology: Topology, rows_path: Path) -> None:
    """Write ``topology`` beside the partial rows (``partial_topology_path``), once per tune."""
    from collbench.topology.io import save_topology

    save_topology(topology, partial_topology_path(rows_path))


def partial_depth_path(rows_path: Path) -> Path:
    """Which depth (``--quick`` or thorough) the partial rows beside it were measured at."""
    return rows_path.with_name(f"{rows_path.stem}.partial-depth.txt")


def keep_depth(depth: str, rows_path: Path, *, resume: bool) -> None:
    """Write the tune's depth beside its partial rows (a resumed tune keeps the one there).

    A quick tune's sizes are all sizes of a thorough one: without this, a thorough ``--resume`` of a
    quick tune's rows would take them as its own (shorter timing, fewer rounds) without a word.
    """
    from collbench.fileio import atomic_write_text

    path = partial_depth_path(rows_path)
    if not (resume and path.is_file()):
        atomic_write_text(path, depth + "\n")


DEPTH_LABELS = ("--quick", "a thorough tune (no --quick)")
"""What the depth file beside the partial rows says (``keep_depth``): the tune's depth as its option says it."""


def _depth_differences(depth: tuple[Path, str] | None) -> list[str]:
    if depth is None or not depth[0].is_file():
        return []
    try:
        kept = depth[0].read_text(encoding="utf-8", errors="replace").strip()[:80]
    except OSError as exc:
        raise InputFileError(
            str(depth[0]), f"cannot read the interrupted tune's depth: {exc.strerror or exc}"
        ) from None
    if kept not in DEPTH_LABELS:
        # An edited or damaged file said 'measured \x00\ufffd, not --quick' (or 'measured , not' when empty).
        raise InputFileError(
            str(depth[0]),
            f"says '{printable(kept)}', no depth of a tune ({' or '.join(repr(d) for d in DEPTH_LABELS)}): write "
            "the one the partial rows beside it were measured at, or move those files aside to start over",
        )
    return [] if kept == depth[1] else [f"{kept}, not {depth[1]}"]


@dataclass(frozen=True, slots=True)
class PartialPlan:
    """What one partial file would hold were this tune to resume it: the sizes it measures there."""

    path: Path
    sizes_bytes: frozenset[int]
    """The sizes this tune sweeps into ``path``; empty when it never writes that file (a round or a
    second segment size its depth does not have)."""
    segment_bytes: int | None = None
    """The segment size every row of ``path`` is measured at; None: any (the executor's own)."""


def check_partials(
    partials: Sequence[Path],
    resume: bool,
    *,
    ranks: int | None = None,
    ops: Sequence[str] = ("all",),
    backend: str = "auto",
    plans: Sequence[PartialPlan] = (),
    sizes_asked: str = "",
    depth: tuple[Path, str] | None = None,
) -> None:
    """Refuse to start over rows an interrupted tune left, to resume from nothing, or to resume them
    as another tune: ``ranks`` (None: any), ``ops`` (``all``: any) or ``backend`` (``auto``: any)
    other than the rows', or rows in a file of ``plans`` at a size (or segment size) that plan does
    not measure, which the resumed sweep would drop (``sizes_asked`` names the options that chose
    the sizes, for the message), or rows of another depth (``depth``: the file that says the rows'
    depth, and this tune's).

    Raises ConfigError naming the files, and what differs.
    """
    kept = [p for p in partials if p.is_file() and p.stat().st_size > 0]
    if kept and not resume:
        raise ConfigError(
            f"an interrupted tune left its measured rows in {_names(kept)}; "
            "add --resume to continue it, or remove them to start over"
        )
    if resume and not kept:
        empty = [p for p in partials if p.is_file()]
        if empty:
            # A tune stopped before its first point leaves its file empty: the message said it looked for
            # that very file, and not what to do.
            raise ConfigError(
                f"--resume: no rows of an interrupted tune to continue ({_names(empty)} "
                f"{'holds' if len(empty) == 1 else 'hold'} none: it stopped before its first point); "
                "run it without --resume"
            )
        names = _names(list(partials[:1]))
        raise ConfigError(f"--resume: no rows of an interrupted tune to continue (looked for {names} and the like)")
    differs = _differences(_measured(kept), ranks, ops, backend) if resume else []
    if resume:
        differs += _depth_differences(depth)
        differs += _size_differences([p for p in plans if p.path in kept], sizes_asked)
    if differs:
        raise ConfigError(
            f"--resume: the interrupted tune in {_names(kept)} measured {'; '.join(differs)}: give its options "
            "to continue it, or move those files aside to start over (they are kept either way)"
        )


@dataclass(slots=True)
class _Measured:
    """What the partial rows were measured as: their world sizes, ops and backends."""

    world_sizes: set[int] = field(default_factory=set)
    ops: set[str] = field(default_factory=set)
    backends: set[str] = field(default_factory=set)


def _measured(paths: Iterable[Path]) -> _Measured:
    """The shapes, ops and backends of the rows in ``paths``; lines that are not rows are skipped here
    (the sweep that resumes them reads them strictly, and a torn last line is set aside there)."""
    seen = _Measured()
    for path in paths:
        for row in _rows(path):
            world_size, op, backend = row.get("world_size"), row.get("op"), row.get("backend")
            if isinstance(world_size, int):
                seen.world_sizes.add(world_size)
            if isinstance(op, str):
                seen.ops.add(op)
            if isinstance(backend, str):
                seen.backends.add(backend)
    return seen


def _rows(path: Path) -> Iterator[dict[str, object]]:
    """The JSON objects of ``path``, one a line; lines that are not are skipped (see ``_measured``)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    yield row
    except OSError as exc:
        raise InputFileError(str(path), f"cannot read the interrupted tune's rows: {exc.strerror or exc}") from None


def _differences(seen: _Measured, ranks: int | None, ops: Sequence[str], backend: str) -> list[str]:
    """One phrase per option the rows were measured with that this tune does not ask for."""
    out: list[str] = []
    if ranks is not None and seen.world_sizes and seen.world_sizes != {ranks}:
        out.append(f"{_listed(seen.world_sizes)} ranks, not --ranks {ranks}")
    asked = _op_names(ops)
    if asked is not None and not seen.ops <= asked:
        out.append(f"--op {_listed(seen.ops)}, not {_listed(asked)}")
    if backend_named(backend) is not None and seen.backends and seen.backends != {backend}:
        out.append(f"--backend {_listed(seen.backends)}, not {backend}")
    return out


def _planned(row: dict[str, object], size: int, sizes: frozenset[int]) -> bool:
    """Whether a row at ``size`` is one of ``sizes`` as the sweep measures it: barrier's one point at 0
    bytes, and a block op's size rounded down to whole blocks (``op_count``), are the sizes asked."""
    if size in sizes:
        return True
    try:
        op = Op.parse(str(row.get("op", "")))
    except UnknownNameError:
        return False
    if not op.spec.payload:
        return size == 0
    world, elem = row.get("world_size"), DTYPE_SIZES.get(str(row.get("dtype", "")), 0)
    if not op.spec.blocks or not isinstance(world, int) or world < 1 or elem == 0:
        return False
    return any(op_count(op, s // elem, world) * elem == size for s in sizes)


def _size_differences(plans: Sequence[PartialPlan], sizes_asked: str) -> list[str]:
    """One phrase when rows of ``plans``' files lie outside the sizes (or segment sizes) planned there."""
    outside: set[int] = set()
    segments: set[int] = set()
    unplanned: list[str] = []
    for plan in plans:
        if not plan.sizes_bytes:
            unplanned.append(plan.path.name)
            continue
        for row in _rows(plan.path):
            size = row.get("size_bytes")
            if isinstance(size, int) and not _planned(row, size, plan.sizes_bytes):
                outside.add(size)
            segment = row.get("segment_bytes")
            if plan.segment_bytes is not None and isinstance(segment, int) and segment != plan.segment_bytes:
                segments.add(segment)
    out: list[str] = []
    if unplanned:
        out.append(f"rounds ({', '.join(unplanned)}) that {sizes_asked or 'this tune'} does not run (another depth)")
    if outside:
        shown = ", ".join(format_bytes(s) for s in sorted(outside)[:6]) + (", ..." if len(outside) > 6 else "")
        count = f"{len(outside)} size{'s' if len(outside) > 1 else ''}"
        out.append(f"rows at {count} ({shown}) that {sizes_asked or 'this tune'} does not measure")
    if segments:
        out.append(f"segment sizes {', '.join(format_bytes(s) for s in sorted(segments))} of another depth")
    return out


def _op_names(ops: Sequence[str]) -> set[str] | None:
    """The op names asked for, canonical; None for ``all`` (or a name the tune will refuse itself)."""
    try:
        return None if any(o.strip().lower() == "all" for o in ops) else {Op.parse(o).value for o in ops}
    except UnknownNameError:
        return None


def _listed(values: Iterable[object]) -> str:
    return ",".join(str(v) for v in sorted(values, key=str))


def kept_rows_hint(partials: Sequence[Path]) -> str:
    """``; the rows measured so far are in A, B; tune --resume continues from them`` ("" if none)."""
    kept = [p for p in partials if p.is_file() and p.stat().st_size > 0]
    if not kept:
        return ""
    return f"{_KEPT_IN}{_names(kept)}{_RESUME}"


_KEPT_IN = "; the rows measured so far are in "
_RESUME = "; the same tune with --resume continues from them"


def with_hint(exc: CollbenchError, hint: str) -> CollbenchError:
    """``exc`` with ``hint`` added to its message, keeping its class (and so its exit code). Where the
    message names those files already (a failed sweep says where its rows are), only the way on is added:
    the error said 'the 3 rows measured so far are in F; the rows measured so far are in F; ...'. Where
    it names one of them (the round that failed), the others are said as the other rounds': a tune
    killed in its second round said 'the 51 rows measured so far are in P-1; the rows measured so far
    are in P-0, P-1; ...'."""
    if not hint or hint in str(exc):
        return exc
    kept_in, resume, _ = hint.partition(_RESUME)
    if resume and kept_in.startswith(_KEPT_IN):
        files = kept_in.removeprefix(_KEPT_IN)
        if files in str(exc):
            hint = _RESUME
        else:
            others = [f for f in files.split(", ") if f"measured so far are in {f}" not in str(exc)]
            if others != files.split(", "):
                hint = (f"; the other rounds' rows are in {', '.join(others)}" if others else "") + _RESUME
    if isinstance(exc, RankError):
        return RankError(exc.rank, exc.host, exc.doing, exc.problem + hint)
    if isinstance(exc, InputFileError):
        return InputFileError(exc.path, exc.problem + hint, line=exc.line)
    exc.args = (f"{exc}{hint}",)
    return exc


def _names(paths: list[Path]) -> str:
    return ", ".join(str(p) for p in paths)
