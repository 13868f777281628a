"""A sweep's points and their rows, whatever measures them: the plan (every point in order, and what is
skipped), the key of a point's row, the row built from a measured point, the rows in the plan's order
and the topology fingerprint they carry.

collbench's ranks (``worker.py``) and the MPI libraries' harnesses (``runtime/mpi/measure.py``,
``ompi_sweep.py``, ``mpich_sweep.py``) share them, so that a point means the same whatever ran it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from collbench.nccl.variants import is_native
from collbench.results.measured import TimeStats, measured_row
from collbench.results.measured import point_key as row_key
from collbench.results.row import ResultRow
from collbench.runtime.executor.schedule_runner import default_segment_bytes
from collbench.runtime.sweep.plan import SweepJob
from collbench.schedules.contracts import contract
from collbench.schedules.ops import DTYPE_SIZES, Op, op_count
from collbench.schedules.registry import get_algorithm
from collbench.units import counted, format_bytes

EVERY_ALGORITHM = "every algorithm"
"""How a skip note names all of an op's algorithms skipped at the same sizes."""


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One point of a sweep: an op, an algorithm, a size and a mode, on a layout and segment size."""

    op: Op
    algo: str
    size_bytes: int
    count: int
    in_place: bool
    segment_bytes: int | None
    layout: str
    size_index: int = 0
    """Which of the sweep's requested sizes the point is at (0 the smallest): the points of one size
    share it whatever their rounding (native's equal chunks), so a sweep can tell the sizes apart."""

    def describe(self) -> str:
        mode = "in-place" if self.in_place else "out-of-place"
        return f"{self.op.value} {self.algo} {format_bytes(self.size_bytes)} {mode}"


def plan_points(
    job: SweepJob,
    world_size: int,
    device: torch.device,
    layout_name: str,
    *,
    nodes: int = 1,
    job_nodes: int | None = None,
) -> tuple[list[SweepPoint], list[str]]:
    """Every point of the sweep in order, and notes on what is skipped.

    ``nodes``: how many nodes the layout places the ranks on; an algorithm that needs two or more
    (hierarchical) is skipped, saying so, on fewer. ``job_nodes``: how many the job's ranks run on,
    where a launcher's membership says it (None: not known), so that the note says which is short.

    The order is op, algorithm, size, mode; with ``interleave``, op, size, algorithm, mode, so that the
    algorithms compared at a size are measured within a fraction of a second of each other. The
    2-core development VM switches between speeds for a second or more at a time (a 512 B all-reduce
    at 90 us, then at 113 us, then at 90 again, with no stalled iteration): measured one algorithm
    after another, the algorithms measured during a fast spell win at every size. A tune's sweep then
    measures a size's algorithms in another order (``order.py``: the likely fast first); the rows keep
    the plan's order.
    """
    cfg = job.config
    elem = DTYPE_SIZES[job.dtype]
    seg = cfg.segment_bytes or default_segment_bytes(device)
    points: list[SweepPoint] = []
    notes: list[str | tuple[str, ...]] = []  # a note, or the reason of a skip said once for its ops
    # Skips of one reason are said once, naming the ops they cover (a sweep of every op said the same
    # line for hierarchical three times, and 'less than one element per rank' per op, algorithm and size).
    one_node: dict[str, list[Op]] = {}
    out_of_place_only: list[Op] = []
    too_small: dict[str, dict[tuple[Op, str], list[int]]] = {}
    planned: dict[Op, tuple[str, ...]] = {}
    backend = job.runs_on
    if any(is_native(a) for _, algos in job.algos for a in algos):
        notes.extend(backend.native_notes(None, world_size))
    for op, algos in job.algos:
        spec = op.spec
        if nodes < 2 and (flat := [a for a in algos if not is_native(a) and get_algorithm(a).needs_nodes]):
            _hold(notes, ("one node", ", ".join(flat)))
            one_node.setdefault(", ".join(flat), []).append(op)
            algos = tuple(a for a in algos if a not in flat)
        planned[op] = algos
        if not spec.payload and algos:
            notes.append(f"{op.value} moves no data: one point per algorithm at 0 bytes, time only, nothing to check")
            if any(is_native(a) for a in algos):
                notes.extend(backend.native_notes(op, world_size))
        # Barrier moves nothing: one point per algorithm, at 0 bytes (its sizes would all be the same).
        sizes = job.sizes if spec.payload else job.sizes[:1]
        if cfg.interleave:
            pairs = [(algo, index, size) for index, size in enumerate(sizes) for algo in algos]
        else:
            pairs = [(algo, index, size) for algo in algos for index, size in enumerate(sizes)]
        modes = cfg.in_place
        if spec.out_of_place and True in modes and not backend.in_place_every_op:
            # torch.distributed's all_to_all_single and send/recv take two buffers (MPI has MPI_IN_PLACE).
            _hold(notes, ("out of place only",))
            out_of_place_only.append(op)
            modes = tuple(m for m in modes if not m)
        if not spec.payload and not backend.in_place_every_op:
            modes = modes[:1]  # nothing in place or out of it: one point (MPI times both of its calls)
        seen: set[tuple[str, int]] = set()
        rounded_said = False
        for algo, size_index, size in pairs:
            native = is_native(algo)
            # The block ops move whole blocks, one per rank (nccl-tests' *GetCollByteCount): the row's
            # size and count are what was really moved. Barrier's are 0.
            count = op_count(op, size // elem, world_size)
            if spec.blocks and count and count * elem != size and not rounded_said:
                # Said, as the native reduce-scatter's is: 'scatter --ranks 3 -b 1K' printed 1020B in
                # every table without a word on why.
                rounded_said = True
                notes.append(_blocks_note(op, size, count * elem, world_size))
            if native and contract(op).native_equal_chunks and count % world_size:
                # torch's tensor collectives need equal chunks: round as nccl-tests does.
                count -= count % world_size
                if count and not rounded_said:
                    # Said, since the native table's sizes (1020B) then differ from the algorithms' (1K).
                    rounded_said = True
                    notes.append(_rounded_note(op, size, count * elem, world_size))
            if count == 0 and spec.payload:
                what = "less than one element per rank" if spec.blocks else "fewer elements than needed"
                _hold(notes, ("too small", what))
                too_small.setdefault(what, {}).setdefault((op, algo), []).append(size)
                continue
            if (algo, count) in seen:
                continue  # two sizes rounded to the same whole blocks: measured once
            seen.add((algo, count))
            if cfg.only is not None and (op.value, count * elem, algo) not in cfg.only:
                continue
            for in_place in modes:
                points.append(
                    SweepPoint(
                        op=op,
                        algo=algo,
                        size_bytes=count * elem,
                        count=count,
                        in_place=in_place,
                        segment_bytes=None if native else seg,
                        layout="rank-order" if native else layout_name,
                        size_index=size_index,
                    )
                )
    said: dict[tuple[str, ...], str] = {
        ("one node", names): _one_node_note(names, ops, nodes, job_nodes, layout_name)
        for names, ops in one_node.items()
    }
    if out_of_place_only:
        names = ", ".join(op.value for op in out_of_place_only)
        are, their = ("is", "its") if len(out_of_place_only) == 1 else ("are", "their")
        said[("out of place only",)] = (
            f"{names} {are} out of place only (input then output): {their} in-place points are skipped"
        )
    said.update(
        {("too small", what): f"{_small_points(sk, planned)}: {what}, skipped" for what, sk in too_small.items()}
    )
    # Each said where its first op's note stood, so the notes keep the ops' order.
    return points, [said[n] if isinstance(n, tuple) else n for n in notes]


def _hold(notes: list[str | tuple[str, ...]], reason: tuple[str, ...]) -> None:
    """Keep the place of the note for ``reason`` (said once for every op it covers, when all are known)."""
    if reason not in notes:
        notes.append(reason)


def _small_points(skipped: dict[tuple[Op, str], list[int]], planned: dict[Op, tuple[str, ...]]) -> str:
    """The points skipped for one reason, grouped: ``all-to-all, scatter 4 B (every algorithm); gather
    native 4 B, 8 B``. An op's algorithms skipped at the same sizes are named together (``planned``: the
    algorithms each op runs), and ops whose algorithms and sizes read alike share one part."""
    per_op: dict[Op, dict[tuple[int, ...], list[str]]] = {}
    for (op, algo), at_sizes in skipped.items():
        per_op.setdefault(op, {}).setdefault(tuple(at_sizes), []).append(algo)
    parts: dict[tuple[str, tuple[int, ...]], list[str]] = {}
    for op, by_sizes in per_op.items():
        for sizes, names in by_sizes.items():
            every = len(names) > 1 and set(names) >= set(planned[op])
            parts.setdefault((EVERY_ALGORITHM if every else ", ".join(names), sizes), []).append(op.value)
    said = []
    for (algos, sizes), ops in parts.items():
        at = ", ".join(format_bytes(size) for size in sizes)
        said.append(
            f"{', '.join(ops)} {at} ({algos})" if algos == EVERY_ALGORITHM else f"{', '.join(ops)} {algos} {at}"
        )
    return "; ".join(said)


def point_key(job: SweepJob, point: SweepPoint, world_size: int) -> tuple[Any, ...]:
    """``ResultRow.key`` of the point's row (what ``--resume`` finds done)."""
    return row_key(**_identity(job, point, world_size))


def point_row(
    job: SweepJob,
    point: SweepPoint,
    world_size: int,
    samples_us: Sequence[float],
    stats: TimeStats,
    *,
    iters: int,
    wrong: int,
    nodes: int,
    **measured: Any,
) -> ResultRow:
    """The row of ``point`` measured in ``job`` on ``world_size`` ranks (``results.measured.measured_row``
    with what the point and the job say); ``measured``: the fields only the measuring backend knows."""
    return measured_row(
        **_identity(job, point, world_size),
        count=point.count,
        samples_us=samples_us,
        stats=stats,
        iters=iters,
        wrong=wrong,
        nodes=nodes,
        **measured,
    )


def _identity(job: SweepJob, point: SweepPoint, world_size: int) -> dict[str, Any]:
    """What names the point's row, from the point and its job: the fields of its key, which its row
    holds as measured (one list, so that a row is always found again by the key its point makes)."""
    return {
        "op": point.op,
        "algo": point.algo,
        "backend": job.backend,
        "world_size": world_size,
        "dtype": job.dtype,
        "redop": job.redop,
        "in_place": point.in_place,
        "size_bytes": point.size_bytes,
        "root": job.config.root,
        "layout": point.layout,
        "segment_bytes": point.segment_bytes,
    }


def rows_in_plan_order(
    job: SweepJob,
    points: list[SweepPoint],
    world: int,
    measured: dict[tuple[Any, ...], ResultRow],
    done: dict[tuple[Any, ...], ResultRow],
) -> list[ResultRow]:
    """The sweep's rows in the plan's order: each point's row measured now, else the one resumed from
    the stream; a point nothing measured (one an MPI library refused) has neither and no row."""
    rows = []
    for point in points:
        key = point_key(job, point, world)
        if key in measured:
            rows.append(measured[key])
        elif key in done:
            rows.append(done[key])
    return rows


def row_fingerprint(job: SweepJob, world_size: int) -> tuple[str, str]:
    """The topology fingerprint rows carry: the given topology's, else this host's; and a note if none."""
    if job.topology is not None:
        return str(job.topology.fingerprint), ""
    # Imported here only: topology discovery is another area's and talks to NVML on GPU machines.
    from collbench.errors import CollbenchError

    try:
        if not job.runs_on.on_gpu:
            from collbench.topology.host import host_topology

            return str(host_topology(world_size).fingerprint), ""
        from collbench.topology.sources import discover_topology

        return str(discover_topology(ranks=world_size).fingerprint), ""
    except (CollbenchError, ValueError) as exc:
        return "", f"no topology fingerprint in the rows: {exc}"


def _one_node_note(names: str, ops: Sequence[Op], nodes: int, job_nodes: int | None, layout_name: str) -> str:
    """Why ``names`` (hierarchical) are skipped for ``ops``: the layout puts the ranks on ``nodes`` (fewer than 2)."""
    op_names = ", ".join(op.value for op in ops)
    if job_nodes is not None and job_nodes >= 2:
        # The ranks are on several nodes; the layout was planned from one host's description (rank 0's,
        # with no --topology), which knows no other node: a probe across the job's nodes does.
        return (
            f"{names} {op_names}: skipped; the job's ranks run on {counted(job_nodes, 'node')}, but the "
            f"layout ({layout_name}) was made from one host's description: to plan across the nodes, pass "
            "--topology from `collbench discover --probe` run across them"
        )
    return (
        f"{names} {op_names}: needs ranks on two or more nodes, and the layout has "
        f"{nodes} (on one node it is a ring; give --topology of several hosts); skipped"
    )


def _blocks_note(op: Op, size_bytes: int, measured_bytes: int, world_size: int) -> str:
    """The note that a block op's sizes are rounded down to whole blocks, with the first example."""
    return (
        f"{op.value}: a call moves one whole block per rank, so its sizes are rounded down to a multiple "
        f"of {world_size} elements, as nccl-tests rounds them ({format_bytes(size_bytes)} measured as "
        f"{measured_bytes:,} B), for every algorithm"
    )


def _rounded_note(op: Op, size_bytes: int, measured_bytes: int, world_size: int) -> str:
    """The note that a native call's sizes are rounded down to equal chunks, with the first example."""
    return (
        f"{op.value} native: the backend's call takes equal chunks, so its sizes are rounded down to a "
        f"multiple of {world_size} elements, as nccl-tests rounds them ({format_bytes(size_bytes)} measured "
        f"as {measured_bytes:,} B); collbench's own algorithms take each size as asked"
    )
