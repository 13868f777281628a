"""A tune's sweeps: every algorithm in rounds, a second segment size for the pipelined ones, then
extra rounds of the tied algorithms at the tied sizes, all on the one placement planned for the tune.

Under a launcher every rank runs this loop, and each sweep is a step all of them must take together:
a rank that skipped a sweep would leave the others waiting in a group it never joins. So every
decision here is the same on every rank: what the fixed rounds run comes from the plan (the depth
and the algorithms), and which sizes the extra rounds re-measure, which only rank 0's rows can say,
is decided on rank 0 and handed to the others (``runtime.launch.session.agree``).

Each round streams into its own partial file beside the results (``config.round_stream``), so an
interrupted tune keeps what it measured for ``tune --resume``: a round resumes only when asked to and
its stream exists, and a round the interrupted run never started is measured afresh.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from collbench.nccl.variants import is_native
from collbench.results.row import ResultRow
from collbench.runtime.launch.session import agree, job_step
from collbench.schedules.ops import Op
from collbench.schedules.registry import algorithms_for, get_algorithm
from collbench.tuning.config import TuneConfig, round_stream, segments_stream
from collbench.tuning.mpi_variants import mpi_variant_names
from collbench.tuning.nccl_variants import nccl_variant_names
from collbench.tuning.placement import Placement
from collbench.tuning.rounds import Unsettled, settled_fraction, unsettled
from collbench.tuning.selection import PointsByOp, in_round, measured_points

if TYPE_CHECKING:
    from collbench.runtime.sweep.plan import SweepConfig
    from collbench.runtime.sweep.run import SweepProgress

IN_PLACE = (True,)
"""Tune measures in place only: that is how jobs call all-reduce (DDP buckets, collbench.torch)."""

Progress = Callable[["SweepProgress"], None]


def algorithm_order(ops: Sequence[str]) -> tuple[str, ...]:
    """Every registered algorithm that does one of ``ops``, and native, in the registry's order."""
    chosen = list(Op) if any(o.strip().lower() == "all" for o in ops) else [Op.parse(o) for o in ops]
    names: list[str] = []
    for op in chosen:
        for spec in algorithms_for(op):
            if spec.name not in names:
                names.append(spec.name)
    if "native" not in names:
        names.append("native")
    return tuple(names)


def round_sweep(
    config: TuneConfig,
    placement: Placement,
    stream: Path,
    *,
    ops: tuple[str, ...],
    algos: tuple[str, ...],
    min_bytes: int,
    max_bytes: int,
) -> SweepConfig:
    """One round's SweepConfig at the tune's depth, on ``placement``, streaming into ``stream``."""
    from collbench.runtime.sweep.plan import SweepConfig

    depth = config.depth
    return SweepConfig(
        world_size=config.ranks,
        backend=config.backend,
        ops=ops,
        algos=algos,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        step_factor=depth.step_factor,
        warmup=depth.warmup,
        point_budget_s=depth.point_budget_s,
        in_place=IN_PLACE,
        topology=placement.ranks_topology,
        layout=placement.layout,
        timeout_s=config.timeout_s,
        interleave=True,
        stream=stream,
        resume=config.resume and stream.exists(),
    )


def fixed_rounds(config: TuneConfig, placement: Placement, progress: Progress | None) -> list[ResultRow]:
    """``depth.rounds`` sweeps of every algorithm (odd rounds in reverse order), each followed, at a
    thorough depth, by the pipelined algorithms at the second segment size."""
    from collbench.runtime.sweep.run import run_sweep

    depth = config.depth
    # On NCCL, NCCL's own algorithm x protocol x channel variants too: the NCCL exports choose among them.
    # On Open MPI, its own algorithms alone: collbench's schedules do not run inside it.
    names = mpi_variant_names(config) or algorithm_order(config.ops) + nccl_variant_names(config)
    rows: list[ResultRow] = []
    for i in range(depth.rounds):
        order = names if i % 2 == 0 else tuple(reversed(names))
        base = round_sweep(
            config,
            placement,
            round_stream(config, i),
            ops=config.ops,
            algos=order,
            min_bytes=depth.min_bytes,
            max_bytes=depth.max_bytes,
        )
        with job_step(f"round {i}"):
            rows.extend(in_round(run_sweep(base, progress), i))
        if depth.extra_segment_bytes is None or depth.extra_from_bytes > depth.max_bytes:
            continue
        # From the plan, never from the rows (only rank 0 holds them under a launcher).
        pipelined = tuple(a for a in order if not is_native(a) and get_algorithm(a).segmented)
        if pipelined:
            stream = segments_stream(config, i)
            second = dataclasses.replace(
                base,
                algos=pipelined,
                min_bytes=max(depth.extra_from_bytes, depth.min_bytes),
                segment_bytes=depth.extra_segment_bytes,
                stream=stream,
                resume=config.resume and stream.exists(),
            )
            with job_step(f"round {i} at the second segment size"):
                rows.extend(in_round(run_sweep(second, progress), i))
    return rows


def extra_rounds(
    config: TuneConfig,
    placement: Placement,
    progress: Progress | None,
    rows: list[ResultRow],
    notes: list[str],
) -> tuple[list[ResultRow], PointsByOp]:
    """Rounds after the fixed ones, of the tied algorithms over the tied sizes, until none is tied.

    Returns the rows they measured, and the points of ``rows`` and those together (folded once per
    round, and handed on so that selection does not fold them again). Adds a note of how many sizes
    are settled when any round ran or any size stayed tied.
    """
    from collbench.runtime.sweep.run import run_sweep

    depth = config.depth
    extra: list[ResultRow] = []
    points = measured_points(rows)
    ran = 0
    for i in range(depth.rounds, depth.max_rounds):
        todo = agreed_ties(config, points, i)
        if not todo:
            break
        algos = tuple(dict.fromkeys(a for item in todo for a in item.algos))
        sweep = round_sweep(
            config,
            placement,
            round_stream(config, i),
            ops=tuple(item.op for item in todo),
            algos=algos if i % 2 == 0 else tuple(reversed(algos)),
            min_bytes=min(min(item.sizes) for item in todo),
            max_bytes=max(max(item.sizes) for item in todo),
        )
        with job_step(f"round {i}, re-measuring ties"):
            extra.extend(in_round(run_sweep(sweep, progress), i))
        points = measured_points(rows + extra)
        ran += 1
    settled, total = settled_fraction(points, config.selection)
    if ran or settled < total:
        notes.append(
            f"{depth.rounds + ran} rounds ({ran} of them re-measuring tied sizes only): the winner is separated "
            f"from the runner-up beyond the measured noise at {settled} of {total} sizes; the others are ties, "
            "which go to the simpler choice (native when it is in the tie, else the algorithm in use below), "
            "written in the rules' tie_with"
        )
    return extra, points


def agreed_ties(config: TuneConfig, points: PointsByOp, index: int) -> list[Unsettled]:
    """What round ``index`` re-measures (``rounds.unsettled`` of ``points``), decided where the rows are.

    Under a launcher only rank 0 holds rows: it decides, and every rank gets its answer, so that all
    of them run the same round or none. Raises RankError when rank 0's answer does not come.
    """

    def decide() -> list[list[object]]:
        return [[item.op, list(item.sizes), list(item.algos)] for item in unsettled(points, config.selection)]

    decided = agree(f"which sizes round {index} re-measures", decide, timeout_s=config.timeout_s)
    return [
        Unsettled(str(op), tuple(int(s) for s in sizes), tuple(str(a) for a in algos)) for op, sizes, algos in decided
    ]
