"""Will the sweep fit? Each rank's memory, estimated before any rank starts, against what is there.

Without this, a size that cannot fit was found out by the kernel's OOM killer (``the process died
(exit code -9)``) after the ranks had started, or not at all (``--ranks 64`` on 2 cores took 17.7 GB
for one point). The estimate per rank is the largest point of the sweep (of its largest size, and of
the largest whose output the check copies, ``buffers.keeps_output``):

* its buffers, as ``buffers.make_buffers`` allocates them (input and output; one when in place; one of
  ``2 * count`` for all-to-all and send/recv, input then output; a token for barrier);
* for collbench's own algorithms, the executor's scratch (``schedule_runner.scratch_elems`` of the
  point's schedule: what ``ScheduleRunner`` allocates, found without cutting transfers into segments)
  and reduce-scatter's out-of-place working copy (``worker._make_call``);
* the data check's chunk temporaries (``buffers.CHUNK_ELEMS``: a few 64-bit chunks) and the copy of
  the output it checks after the timing (``buffers.kept_output``: the rank's output, where anything in
  it is defined);
* what a rank process costs before any buffer: ``RANK_BASE_BYTES``, measured with torch 2.13 on CPU
  (277 MiB peak RSS for a 1 KiB sweep on 2 gloo ranks), and what it adds around a large point
  (``LARGE_POINT_BYTES``).

Its cost is closed-form per point: one schedule built per (op, algorithm, mode) at the largest size,
whatever the size or the segment size (one entry per 4 MiB segment of ``-b 2^63`` was 22.5 GB).

On CPU ranks (gloo) all of it is host memory; with NCCL the buffers live on each rank's GPU and are
compared with that GPU's free memory (NVML, where it answers). Host memory available is the smaller
of ``MemAvailable`` (``/proc/meminfo``) and what this process's cgroup and each of its ancestors
still allow (v2 ``memory.max`` minus ``memory.current``, v1 ``memory.limit_in_bytes`` minus
``memory.usage_in_bytes``; page cache the kernel can drop, ``inactive_file``, counts as free). The
cgroup is the process's own, read from ``/proc/self/cgroup``: under Slurm, systemd or a container
the limit is set there, not at the root of the hierarchy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from collbench.errors import ConfigError
from collbench.nccl.variants import is_native
from collbench.runtime.executor.buffers import CHUNK_ELEMS, keeps_output
from collbench.schedules.contracts import contract
from collbench.schedules.ops import DTYPE_SIZES, Op, buffer_elems, op_count

if TYPE_CHECKING:
    from collbench.runtime.sweep.plan import SweepJob

RANK_BASE_BYTES = 280 << 20
"""Host memory of one rank process before its first buffer (torch, gloo, Python): 277 MiB measured."""
LARGE_POINT_BYTES = 16 << 20
"""What a rank holds around a large point beyond its buffers, scratch and check temporaries (gloo's
transport, the allocator): peak RSS measured per rank on 2 gloo ranks, int32 ring all-reduce, was
1586 MiB at 512 MiB and 5423 MiB at 2 GiB, 14 and 11 MiB above the rest of this estimate; with the
data check's copy of the output since, 2037 and 7420 MiB, 47 and 40 MiB below it."""
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
    from collbench.runtime.executor.schedule_runner import scratch_elems
    from collbench.schedules.registry import get_algorithm

    spec = get_algorithm(algo)
    if spec.needs_nodes:
        # Built from the layout's nodes, not known here: its passes are ring passes over the same
        # pieces, whose scratch ring's schedule has.
        spec = get_algorithm("ring")
    segments = spec.segments_for(count * elem, segment_bytes)
    ranks = sorted({0, root, world_size // 2, world_size - 1})[:SCRATCH_RANKS_SAMPLED]
    # Each sampled rank's own build: the whole schedule is O(world x steps) (ir.py).
    sizes = [
        scratch_elems(spec.build(op, world_size, count, root=root, layout=None, segments=segments, rank=r), r)
        for r in ranks
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
    elems = buffer_elems(op, count)  # all-to-all and send/recv: input then output in one; barrier: a token
    # Rank 0's spans (its chunk is the largest: chunk_bounds): the side that is not the schedule's buffer
    # is a buffer of its own out of place (the op's contract; executor.buffers.make_buffers).
    terms = contract(op)
    in_lo, in_hi = terms.input_span(0, world_size, count)
    out_lo, out_hi = terms.output_span(0, world_size, count)
    if not in_place and op.spec.payload and not op.spec.out_of_place:
        elems += min(in_hi - in_lo, out_hi - out_lo)
    if is_native(algo):
        return elems * elem_bytes, elems * elem_bytes
    if not in_place and op.spec.reduces and (out_lo, out_hi) != (0, count):
        elems += count  # the working copy the schedule reduces in (sweep.worker._make_call)
    most, least = _scratch_elems(op, algo, count, world_size, root, segment_bytes or 4 << 20, elem_bytes)
    return (elems + most) * elem_bytes, (elems + least) * elem_bytes


def kept_bytes(op: Op, count: int, *, elem_bytes: int, world_size: int, root: int = 0) -> tuple[int, int]:
    """Bytes of the output copy the data check reads after the timing (``buffers.kept_output``) on the
    fullest rank and on each other: the rank's output where anything in it is defined, else nothing
    (a reduce's or gather's non-roots; barrier); nothing for a point checked before its timing
    (``buffers.keeps_output``)."""
    if not keeps_output(count, elem_bytes):
        return 0, 0
    terms = contract(op)
    sizes = []
    for rank in {0, root, (root + 1) % world_size}:
        lo, hi = terms.output_span(rank, world_size, count)
        defined = op.spec.payload and any(
            max(a, lo) < min(z, hi) for a, z, _, _ in terms.requires(rank, world_size, count, root)
        )
        sizes.append((hi - lo) * elem_bytes if defined else 0)
    return max(sizes), min(sizes)


def _counts(job: SweepJob, op: Op, world_size: int, elem: int) -> list[int]:
    """The element counts of ``op`` whose points may hold the most: the largest size's, and with the data
    check the largest that keeps a copy of its output (``buffers.keeps_output``), which can hold more
    than a larger one that keeps none (64 MiB with its copy is three buffers, 72 MiB two)."""
    counts = sorted({op_count(op, size // elem, world_size) for size in job.sizes})  # whole blocks; 0: barrier
    kept = [c for c in counts if keeps_output(c, elem)] if job.config.check else []
    return sorted({counts[-1], *kept[-1:]})


def largest_point(job: SweepJob, world_size: int, ranks: int) -> PointMemory | None:
    """The point of ``job`` that needs the most memory on ``ranks`` ranks of ``world_size``; None if none."""
    from collbench.units import format_bytes

    if not job.sizes:
        return None
    elem = DTYPE_SIZES[job.dtype]
    check = CHECK_TEMPORARIES * CHUNK_ELEMS * 8 if job.config.check else 0
    best: PointMemory | None = None
    for op, algos in job.algos:
        root = job.config.root if op.spec.rooted else 0
        modes = tuple(m for m in job.config.in_place if not (m and op.spec.out_of_place)) or (False,)
        for algo, count in ((a, c) for c in _counts(job, op, world_size, elem) for a in algos):
            for in_place in modes:
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
                if job.config.check:
                    kept_most, kept_least = kept_bytes(op, count, elem_bytes=elem, world_size=world_size, root=root)
                    most, least = most + kept_most, least + kept_least
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
    return int(text) if text.isdigit() and len(text) <= 20 else None


def _inactive_file(stat: Path, name: str) -> int:
    """Page cache the kernel drops before it kills (``inactive_file`` in memory.stat), 0 if unsaid."""
    try:
        for line in stat.read_text(encoding="ascii").splitlines():
            key, _, value = line.partition(" ")
            if key == name and value.strip().isdigit() and len(value.strip()) <= 20:
                return int(value)
    except (OSError, UnicodeDecodeError):
        pass
    return 0


def own_cgroups(proc: Path) -> tuple[str | None, str | None]:
    """This process's cgroup paths from ``proc/self/cgroup``: (v2 unified, v1 memory controller).

    Lines read ``0::/path`` (v2) and ``4:memory:/path`` (v1, possibly with other controllers
    joined by commas); a path that is not absolute (unreadable, a cgroup namespace's "/..") is None.
    """
    unified: str | None = None
    v1: str | None = None
    try:
        lines = (proc / "self" / "cgroup").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None, None
    for line in lines[:256]:
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[2].startswith("/"):
            continue
        if parts[0] == "0" and parts[1] == "":
            unified = parts[2]
        elif "memory" in parts[1].split(","):
            v1 = parts[2]
    return unified, v1


def _lineage(mount: Path, path: str | None) -> list[Path]:
    """The cgroup directory of ``path`` under ``mount`` and each of its ancestors up to ``mount``.

    Levels that are not there are skipped: mounted from inside a cgroup namespace (most containers)
    the path names none of them, and the mount itself is then the process's own cgroup.
    """
    parts = [p for p in (path or "/").split("/") if p and p not in (".", "..")]
    dirs = [mount.joinpath(*parts[:n]) for n in range(len(parts), -1, -1)]
    return [d for d in dirs if d.is_dir()] or [mount]


def _cgroup_limits(cgroup: Path, unified: str | None, v1: str | None) -> list[HostMemory]:
    """What each limited cgroup on this process's line still allows (v2 and v1 alike)."""
    found: list[HostMemory] = []
    layouts = (
        (cgroup, unified, "memory.max", "memory.current", "inactive_file", "cgroup memory.max"),
        (
            cgroup / "memory",
            v1,
            "memory.limit_in_bytes",
            "memory.usage_in_bytes",
            "total_inactive_file",
            "cgroup memory.limit_in_bytes",
        ),
    )
    for mount, path, limit_name, usage_name, cache_name, label in layouts:
        for where in _lineage(mount, path):
            limit = _read_int(where / limit_name)  # "max" (no limit) reads as None
            # cgroup v1 writes "no limit" as a huge number (PAGE_COUNTER_MAX pages); past 2^60 is none.
            if limit is None or limit >= 1 << 60:
                continue
            usage = (_read_int(where / usage_name) or 0) - _inactive_file(where / "memory.stat", cache_name)
            named = label if where == mount else f"{label} of {where.relative_to(mount)}"
            found.append(HostMemory(max(0, limit - max(0, usage)), named))
    return found


def host_memory(proc: Path = Path("/proc"), cgroup: Path = Path("/sys/fs/cgroup")) -> HostMemory | None:
    """What this process's cgroups and the machine still give; None when neither can be read.

    ``proc`` and ``cgroup`` are where /proc and the cgroup hierarchy are mounted (tests pass fakes).
    """
    found: list[HostMemory] = []
    try:
        for line in (proc / "meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                found.append(HostMemory(int(line.split()[1]) * 1024, "MemAvailable"))
    except (OSError, UnicodeDecodeError, ValueError, IndexError):
        pass
    found.extend(_cgroup_limits(cgroup, *own_cgroups(proc)))
    return min(found, key=lambda m: m.available_bytes) if found else None


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def check_host_memory(job: SweepJob, ranks_here: int, world_size: int, available: HostMemory | None) -> None:
    """Raise ConfigError (one line) when ``ranks_here`` ranks of ``job`` cannot fit in host memory.

    On gloo the buffers are host memory; on NCCL only the rank processes themselves are.
    """
    if available is None:
        return
    if RANK_BASE_BYTES * ranks_here > available.available_bytes:
        # Said before any schedule is built: building one for thousands of ranks is itself slow.
        raise ConfigError(
            f"{ranks_here} ranks need about {_gib(RANK_BASE_BYTES * ranks_here)} of host memory before any buffer; "
            f"{available.source} leaves {_gib(available.available_bytes)}: use fewer ranks"
        )
    point = largest_point(job, world_size, ranks_here) if job.runs_on.places_cpu_ranks else None
    need = RANK_BASE_BYTES * ranks_here
    if point is not None:
        need += point.total_bytes(ranks_here) + LARGE_POINT_BYTES * ranks_here
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
