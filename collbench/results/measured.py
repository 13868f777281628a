"""The one builder of a measured row, whichever backend measured it: the resume key, algbw and busbw,
the stall summary, the root a rootless op records.

collbench's ranks (``runtime/sweep/worker.py``) and a library's own harness (``runtime/mpi/measure.py``)
both build their rows here (through ``runtime/sweep/points.point_row``), so that a row means the same
whatever ran it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

from collbench.results.noise import detect_stalls, quantile
from collbench.results.row import KEY_FIELDS, ResultRow
from collbench.schedules.ops import Op
from collbench.units import gbps


class TimeStats(Protocol):
    """p50, mean, min and max of a point's per-iteration times (``runtime.executor.timing.summarize``)."""

    @property
    def time_us(self) -> float: ...
    @property
    def time_us_mean(self) -> float: ...
    @property
    def time_us_min(self) -> float: ...
    @property
    def time_us_max(self) -> float: ...


def row_root(op: Op, root: int) -> int:
    """The root a row records: the sweep's for a rooted op, 0 for the others (so that their keys agree)."""
    return root if op.spec.rooted else 0


def point_key(*, op: Op, root: int, **identity: Any) -> tuple[Any, ...]:
    """``ResultRow.key`` of the row a point will have (what ``--resume`` looks for): ``op``, ``root`` and
    the other :data:`~collbench.results.row.KEY_FIELDS` in ``identity``, as :func:`measured_row` takes
    them. Raises KeyError naming a field of the key not given."""
    named = {**identity, "op": op.value, "root": row_root(op, root)}
    return tuple(named[name] for name in KEY_FIELDS)


def measured_row(
    *,
    op: Op,
    algo: str,
    backend: str,
    world_size: int,
    dtype: str,
    redop: str,
    in_place: bool,
    size_bytes: int,
    count: int,
    samples_us: Sequence[float],
    stats: TimeStats,
    iters: int,
    wrong: int,
    nodes: int,
    root: int,
    layout: str,
    segment_bytes: int | None,
    **measured: Any,
) -> ResultRow:
    """A measured point's row from its slowest-rank samples (microseconds, one per sample) and ``stats``.

    ``iters``: the iterations timed (a sample covers several under CUDA events; ``timed_samples`` says how
    many samples there were where they differ). ``measured``: the other ``ResultRow`` fields the backend
    knows (host, versions, device, NCCL's choice, reduce path, fingerprint).
    """
    stalls = detect_stalls(list(samples_us))
    # Barrier moves nothing: its time only, no bandwidth (0, as nccl-tests' busbw factor 0 makes it).
    moved = size_bytes if op.spec.payload else 0
    algbw = gbps(moved, stats.time_us)
    return ResultRow(
        op=op.value,
        algo=algo,
        backend=backend,
        world_size=world_size,
        dtype=dtype,
        redop=redop,
        in_place=in_place,
        size_bytes=size_bytes,
        count=count,
        iters=iters,
        timed_samples=len(samples_us) if len(samples_us) != iters else None,
        time_us=stats.time_us,
        time_us_mean=stats.time_us_mean,
        time_us_min=stats.time_us_min,
        time_us_max=stats.time_us_max,
        algbw_gbps=algbw,
        busbw_gbps=algbw * op.spec.busbw_factor(world_size),
        wrong=wrong,
        nodes=nodes,
        root=row_root(op, root),
        layout=layout,
        segment_bytes=segment_bytes,
        timestamp=time.time(),
        stall_fraction=round(stalls.fraction, 4),
        bimodal=stalls.bimodal,
        time_us_p25=quantile(list(samples_us), 0.25),
        **measured,
    )
