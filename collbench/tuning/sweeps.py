"""A tune's sweeps: every algorithm in rounds, a second segment size for the pipelined ones, then
extra rounds of the tied (size, algorithm) pairs alone, all on the one placement planned for the tune.

Under a launcher every rank runs this loop, and each sweep is a step all of them must take together:
a rank that skipped a sweep would leave the others waiting in a group it never joins. So every
decision here is the same on every rank: what the fixed rounds run comes from the plan (the depth
and the algorithms), and which points the extra rounds re-measure, which only rank 0's rows can say,
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

from collbench.backends import backend_named
from collbench.nccl.variants import is_native
from collbench.results.row import ResultRow
from collbench.runtime.launch.session import agree, job_step
from collbench.schedules.ops import NCCL_TUNED_OPS, Op
from collbench.schedules.registry import algorithms_for, get_algorithm
from collbench.tuning.candidates import tune_candidates
from collbench.tuning.config import TuneConfig, round_stream, segments_stream
from collbench.tuning.placement import Placement
from collbench.tuning.rounds import Unsettled, settled_fraction, unsettled, within_reach
from collbench.tuning.selection import REACH_FACTOR, PointsByOp, in_round, measured_points

if TYPE_CHECKING:
    from collbench.runtime.sweep.plan import SweepConfig
    from collbench.runtime.sweep.run import SweepProgress

IN_PLACE = (True,)
"""Tune measures in place: that is how jobs call all-reduce (DDP buckets, collbench.torch)."""
OUT_OF_PLACE = (False,)
"""...except the ops that are out of place only (all-to-all, send/recv: ``torch.distributed`` takes
two buffers for them, as ``collbench.torch.all_to_all_single`` does), measured out of place."""

Progress = Callable[["SweepProgress"], None]


def chosen_ops(ops: Sequence[str]) -> list[Op]:
    """The ops ``ops`` names (``all``: every op, the new ones included), in the order given."""
    if any(o.strip().lower() == "all" for o in ops):
        return list(Op)
    return list(dict.fromkeys(Op.parse(o) for o in ops))


def by_mode(ops: Sequence[str]) -> list[tuple[tuple[str, ...], tuple[bool, ...]]]:
    """``ops`` in sweeps of one mode each: in place for those that run so, out of place for the ops
    that are out of place only. One sweep where every op runs in the same mode."""
    chosen = chosen_ops(ops)
    inside = tuple(op.value for op in chosen if not op.spec.out_of_place)
    outside = tuple(op.value for op in chosen if op.spec.out_of_place)
    return [(names, mode) for names, mode in ((inside, IN_PLACE), (outside, OUT_OF_PLACE)) if names]


def algorithm_order(ops: Sequence[str]) -> tuple[str, ...]:
    """Every registered algorithm that does one of ``ops``, and native, in the registry's order."""
    chosen = chosen_ops(ops)
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
    in_place: tuple[bool, ...] = IN_PLACE,
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
        in_place=in_place,
        topology=placement.ranks_topology,
        layout=placement.layout,
        timeout_s=config.timeout_s,
        interleave=True,
        # A point clearly behind its size's fastest, and costly, is timed once (runtime/sweep/timed.py):
        # the bound the later fixed rounds leave algorithms out at.
        cut_behind=REACH_FACTOR,
        stream=stream,
        resume=config.resume and stream.exists(),
    )


def algos_for(names: Sequence[str], ops: Sequence[str]) -> tuple[str, ...]:
    """Those of ``names`` that do one of ``ops``: native always; NCCL's forced variants for the ops NCCL
    tunes; collbench's algorithms for the ops they implement."""
    chosen = [Op.parse(o) for o in ops]
    kept = []
    for name in names:
        if name == "native":
            kept.append(name)
        elif is_native(name):
            if any(op in NCCL_TUNED_OPS for op in chosen):
                kept.append(name)
        elif any(get_algorithm(name).supports(op) for op in chosen):
            kept.append(name)
    return tuple(kept)


def run_by_mode(sweep: SweepConfig, progress: Progress | None, started: set[Path]) -> list[ResultRow]:
    """``sweep`` as one sweep per mode (:func:`by_mode`), all streaming into its stream: the first into
    it in this run resumes only where ``sweep`` does, the later ones continue what it wrote (each sweep
    returns the rows of its own points only). ``started`` holds the streams already written in this run."""
    from collbench.runtime.sweep.run import run_sweep

    rows: list[ResultRow] = []
    for ops, mode in by_mode(sweep.ops):
        algos = algos_for(sweep.algos, ops)
        if not algos:
            continue
        stream = sweep.stream_path
        resume = sweep.resume if stream not in started else True
        started.add(stream)
        part = dataclasses.replace(sweep, ops=ops, algos=algos, in_place=mode, resume=resume)
        rows.extend(run_sweep(part, progress))
    return rows


def fixed_rounds(
    config: TuneConfig, placement: Placement, progress: Progress | None, notes: list[str] | None = None
) -> list[ResultRow]:
    """``depth.rounds`` sweeps of every algorithm (odd rounds in reverse order), each followed, at a
    thorough depth, by the pipelined algorithms at the second segment size.

    Rounds after the first measure only the (size, algorithm) pairs still within reach of each size's
    fastest after the rounds before (``rounds.within_reach``, decided on rank 0: :func:`agreed_reach`);
    ``notes`` gets how many pairs they left out, and why."""
    depth = config.depth
    # On NCCL, NCCL's own algorithm x protocol x channel variants too: the NCCL exports choose among them.
    # On Open MPI, its own algorithms alone: collbench's schedules do not run inside it.
    names = tune_candidates(config, algorithm_order(config.ops))
    if placement.nodes < 2:
        # On one node an algorithm that needs nodes (hierarchical) is a ring, measured already: every
        # sweep would skip it with a note the user never asked about, not for a choice a tune can make.
        names = tuple(a for a in names if is_native(a) or not get_algorithm(a).needs_nodes)
    ops = tuple(op.value for op in chosen_ops(config.ops))
    rows: list[ResultRow] = []
    started: set[Path] = set()
    left_out = 0
    only: frozenset[tuple[str, int, str]] | None = None
    for i in range(depth.rounds):
        order = names if i % 2 == 0 else tuple(reversed(names))
        base = round_sweep(
            config,
            placement,
            round_stream(config, i),
            ops=ops,
            algos=order,
            min_bytes=depth.min_bytes,
            max_bytes=depth.max_bytes,
        )
        with job_step(f"round {i}"):
            rows.extend(in_round(_run(config, dataclasses.replace(base, only=only), progress, started), i))
        if i + 1 < depth.rounds:
            # Decided here, before this round's second segment size, so that every rank takes it at the
            # same place whatever its own plan says next: ranks whose plans differ still meet at their
            # next sweep, whose start names the step each is at. That sweep runs every pipelined
            # algorithm at the second segment size, as before: only the rounds' own sweeps are narrowed.
            kept, dropped = agreed_reach(config, rows, i + 1)
            left_out += dropped
            only = frozenset((item.op, size, algo) for item in kept for size, algo in item.pairs) if dropped else None
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
                rows.extend(in_round(_run(config, second, progress, started), i))
    if left_out and notes is not None:
        later = "round 1" if depth.rounds == 2 else f"rounds 1-{depth.rounds - 1}"
        notes.append(
            f"{later} left out {left_out} (size, algorithm) measurements more than "
            f"{REACH_FACTOR:g}x behind the fastest at their size (every timed iteration slower than "
            f"{REACH_FACTOR:g}x its slowest); their earlier rows stay in the results and the evidence"
        )
    return rows


def agreed_reach(config: TuneConfig, rows: list[ResultRow], index: int) -> tuple[list[Unsettled], int]:
    """What fixed round ``index`` measures (``rounds.within_reach`` of ``rows``), and how many pairs it
    leaves out, decided on rank 0 (the only rank holding rows under a launcher) and handed to every
    rank, as :func:`agreed_ties` does."""

    def decide() -> list[object]:
        kept, dropped = within_reach(measured_points(rows), config.selection)
        return [dropped, [[item.op, [list(pair) for pair in item.pairs]] for item in kept]]

    dropped, decided = agree(f"which points round {index} measures", decide, timeout_s=config.timeout_s)
    kept = [Unsettled(str(op), tuple((int(size), str(algo)) for size, algo in pairs)) for op, pairs in decided]
    return kept, int(dropped)


def _run(config: TuneConfig, sweep: SweepConfig, progress: Progress | None, started: set[Path]) -> list[ResultRow]:
    """One round's sweep: by mode (:func:`run_by_mode`), or as it is under Open MPI, whose harness runs
    every op in both of its modes' calls."""
    named = backend_named(config.backend)
    if named is not None and named.in_place_every_op:
        from collbench.runtime.sweep.run import run_sweep

        return run_sweep(sweep, progress)
    return run_by_mode(sweep, progress, started)


def extra_rounds(
    config: TuneConfig,
    placement: Placement,
    progress: Progress | None,
    rows: list[ResultRow],
    notes: list[str],
) -> tuple[list[ResultRow], PointsByOp]:
    """Rounds after the fixed ones, of the tied (size, algorithm) pairs alone, until none is tied or
    ``depth.max_rounds`` rounds ran in all.

    Returns the rows they measured, and the points of ``rows`` and those together (folded once per
    round, and handed on so that selection does not fold them again). Adds a note of how many sizes
    are settled when any round ran or any size stayed tied.
    """
    depth = config.depth
    extra: list[ResultRow] = []
    points = measured_points(rows)
    ran = 0
    started: set[Path] = set()
    for i in range(depth.rounds, depth.max_rounds):
        todo = agreed_ties(config, points, i)
        if not todo:
            break
        algos = tuple(dict.fromkeys(a for item in todo for a in item.algos))
        # Over the depth's sizes, as the fixed rounds swept them (an op of whole blocks rounds a size
        # to its blocks: the rows' sizes come from those), narrowed to the tied points by ``only``.
        sweep = round_sweep(
            config,
            placement,
            round_stream(config, i),
            ops=tuple(item.op for item in todo),
            algos=algos if i % 2 == 0 else tuple(reversed(algos)),
            min_bytes=depth.min_bytes,
            max_bytes=depth.max_bytes,
        )
        sweep = dataclasses.replace(
            sweep, only=frozenset((item.op, size, algo) for item in todo for size, algo in item.pairs)
        )
        with job_step(f"round {i}, re-measuring ties"):
            extra.extend(in_round(_run(config, sweep, progress, started), i))
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
        return [[item.op, [list(pair) for pair in item.pairs]] for item in unsettled(points, config.selection)]

    decided = agree(f"which points round {index} re-measures", decide, timeout_s=config.timeout_s)
    return [Unsettled(str(op), tuple((int(size), str(algo)) for size, algo in pairs)) for op, pairs in decided]
