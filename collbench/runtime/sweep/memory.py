"""Will the sweep fit? Each rank's memory, estimated before any rank starts, against what is there.

Without this, a size that cannot fit was found out by the kernel's OOM killer (``the process died
(exit code -9)``) after the ranks had started, or not at all (``--ranks 64`` on 2 cores took 17.7 GB
for one point). The estimate per rank is the largest point of the sweep:

* its buffers, as ``buffers.make_buffers`` allocates them (input and output; one when in place);
* for collbench's own algorithms, the executor's scratch (``ScheduleRunner.scratch_elems``, compiled
  from the point's schedule) and reduce-scatter's out-of-place working copy (``worker._make_call``);
* the data check's chunk temporaries (``buffers.CHUNK_ELEMS``: a few 64-bit chunks);
* what a rank process costs before any buffer: ``RANK_BASE_BYTES``, measured with torch 2.13 on CPU
  (277 MiB peak RSS for a 1 KiB sweep on 2 gloo ranks).

On CPU ranks (gloo) all of it is host memory; with NCCL the buffers live on each rank's GPU and are
compared with that GPU's free memory (NVML, where it answers). Host memory available is the smaller
of ``MemAvailable`` (``/proc/meminfo``) and what the cgroup still allows (v2 ``memory.max`` minus
``memory.current``, v1 ``memory.limit_in_bytes`` minus ``memory.usage_in_bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from collbench.errors import ConfigError
from collbench.nccl.variants import is_native
from collbench.runtime.executor.buffers import CHUNK_ELEMS
from collbench.schedules.ops import DTYPE_SIZES, Op, chunk_bounds

if TYPE_CHECKING:
    from collbench.runtime.sweep.plan import SweepJob

RANK_BASE_BYTES = 280 << 20
"""Host memory of one rank process before its first buffer (torch, gloo, Python): 277 MiB measured."""
CHECK_TEMPORARIES = 6
"""64-bit chunk-sized temporaries alive at once while a chunk is filled or checked (pattern, sum, compare)."""
SCRATCH_RANKS_SAMPLED = 4
"""Ranks whose scratch is compiled to find the largest (0, the root, the middle, the last)."""


@dataclass(frozen=True, slots=True)
class PointMemory:
    """What one point of a sweep holds on its ranks' devices (host memory for gloo, GPUs for NCCL)."""

    largest_rank_bytes: int
    """The rank holding most (a direct algorithm's root): buffers, working copy, scratch, check."""
    other_rank_bytes: int
    """Each of the other ranks (the least any sampled rank holds)."""
    point: str
    """Which point it is, for the message (``all-reduce ring 256 MiB out-of-place``)."""

    def total_bytes(self, ranks: int) -> int:
        """All of ``ranks`` ranks together."""
        return self.largest_rank_bytes + max(0, ranks - 1) * self.other_rank_bytes


@dataclass(frozen=True, slots=True)
class HostMemory:
    """Host memory still available to this job, and which limit said so."""

    available_bytes: int
    source: str
    """``MemAvailable`` or ``cgroup memory.max`` (v2) / ``cgroup memory.limit_in_bytes`` (v1)."""


def _scratch_elems(
    op: Op, algo: str, count: int, world_size: int, root: int, segment_bytes: int, elem: int
) -> tuple[int, int]:
    """The most and the least scratch (elements) any sampled rank of the point's schedule allocates."""
    # Imported here only: the registry and executor pull in the schedule builders.
    from collbench.runtime.executor.schedule_runner import ScheduleRunner
    from collbench.schedules.registry import get_algorithm

    spec = get_algorithm(algo)
    segments = spec.segments_for(count * elem, segment_bytes)
    schedule = spec.build(op, world_size, count, root=root, layout=None, segments=segments)
    ranks = sorted({0, root, world_size // 2, world_size - 1})[:SCRATCH_RANKS_SAMPLED]
    sizes = [
        ScheduleRunner(schedule, rank=r, segment_bytes=segment_bytes, elem_bytes=elem).scratch_elems for r in ranks
    ]
    return max(sizes), min(sizes)


def point_bytes(
    op: Op,
    algo: str,
    count: int,
    *,
    elem_bytes: int,
    world_size: int,
    in_place: bool,
    root: int = 0,
    segment_bytes: int | None = None,
) -> tuple[int, int]:
    """Bytes the fullest rank and each other rank hold for one point: buffers, working copy, scratch."""
    lo, hi = chunk_bounds(count, world_size)[0]
    share = hi - lo
    elems = count
    if not in_place:
        elems += share if op in (Op.REDUCE_SCATTER, Op.ALL_GATHER) else count
    if is_native(algo):
        return elems * elem_bytes, elems * elem_bytes
    if op is Op.REDUCE_SCATTER and not in_place:
        elems += count  # the working copy the schedule reduces in
    most, least = _scratch_elems(op, algo, count, world_size, root, segment_bytes or 4 << 20, elem_bytes)
    return (elems + most) * elem_bytes, (elems + least) * elem_bytes


def largest_point(job: SweepJob, world_size: int, ranks: int) -> PointMemory | None:
    """The point of ``job`` that needs the most memory on ``ranks`` ranks of ``world_size``; None if none."""
    from collbench.units import format_bytes

    if not job.sizes:
        return None
    elem = DTYPE_SIZES[job.dtype]
    check = CHECK_TEMPORARIES * CHUNK_ELEMS * 8 if job.config.check else 0
    count = max(job.sizes) // elem
    best: PointMemory | None = None
    for op, algos in job.algos:
        root = job.config.root if op.spec.rooted else 0
        for algo in algos:
            for in_place in job.config.in_place:
                most, least = point_bytes(
                    op,
                    algo,
                    count,
                    elem_bytes=elem,
                    world_size=world_size,
                    in_place=in_place,
                    root=root,
                    segment_bytes=job.config.segment_bytes,
                )
                mode = "in-place" if in_place else "out-of-place"
                what = f"{op.value} {algo} {format_bytes(count * elem)} {mode}"
                found = PointMemory(most + check, least + check, what)
                if best is None or found.total_bytes(ranks) > best.total_bytes(ranks):
                    best = found
    return best


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def host_memory(proc: Path = Path("/proc"), cgroup: Path = Path("/sys/fs/cgroup")) -> HostMemory | None:
    """What this process's cgroup and the machine still give; None when neither can be read."""
    found: list[HostMemory] = []
    try:
        for line in (proc / "meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                found.append(HostMemory(int(line.split()[1]) * 1024, "MemAvailable"))
    except (OSError, UnicodeDecodeError, ValueError, IndexError):
        pass
    for limit_name, usage_name, label in (
        ("memory.max", "memory.current", "cgroup memory.max"),
        ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes", "cgroup memory.limit_in_bytes"),
    ):
        limit = _read_int(cgroup / limit_name)  # "max" (no limit) reads as None
        usage = _read_int(cgroup / usage_name)
        # cgroup v1 writes "no limit" as a huge number (PAGE_COUNTER_MAX pages); anything past 2^60 is none.
        if limit is not None and limit < 1 << 60:
            found.append(HostMemory(max(0, limit - (usage or 0)), label))
    return min(found, key=lambda m: m.available_bytes) if found else None


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def check_host_memory(job: SweepJob, ranks_here: int, world_size: int, available: HostMemory | None) -> None:
    """Raise ConfigError (one line) when ``ranks_here`` ranks of ``job`` cannot fit in host memory.

    On gloo the buffers are host memory; on NCCL only the rank processes themselves are.
    """
    if available is None:
        return
    point = largest_point(job, world_size, ranks_here) if job.backend == "gloo" else None
    need = RANK_BASE_BYTES * ranks_here + (point.total_bytes(ranks_here) if point is not None else 0)
    if need <= available.available_bytes:
        return
    what = f" for {point.point}" if point is not None else ""
    raise ConfigError(
        f"{ranks_here} ranks need about {_gib(need)} of host memory{what}; {available.source} leaves "
        f"{_gib(available.available_bytes)}: use fewer ranks or a smaller --max-bytes"
    )


def check_device_memory(job: SweepJob, world_size: int, free_bytes: list[int]) -> None:
    """Raise ConfigError (one line) when one NCCL rank's point exceeds its GPU's free memory.

    ``free_bytes``: free memory of the GPU of each local rank, in local rank order.
    """
    point = largest_point(job, world_size, 1)
    if point is None or not free_bytes:
        return
    tightest = min(free_bytes)
    if point.largest_rank_bytes <= tightest:
        return
    rank = free_bytes.index(tightest)
    raise ConfigError(
        f"{point.point} needs about {_gib(point.largest_rank_bytes)} on a GPU; local rank {rank}'s GPU has "
        f"{_gib(tightest)} free: use a smaller --max-bytes"
    )


def gpu_free_bytes(ranks: int) -> list[int]:
    """Free memory of the GPUs of local ranks 0..ranks-1 (CUDA's order), through NVML; [] if it cannot say.

    A CUDA_VISIBLE_DEVICES that discovery refuses gives [] here: the sweep reports it in one line
    elsewhere, and CUDA's own out-of-memory error still names the point.
    """
    import os

    from collbench.topology.nvml_source import free_memory_bytes

    try:
        return free_memory_bytes(os.environ)[:ranks]
    except ConfigError:
        return []
