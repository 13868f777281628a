"""What every rank runs during ``collbench sweep``: the plan, then per point warm up, time and check.

Rank 0 makes the plan (and reads the stream file for ``--resume``) and broadcasts it, so ranks on
other machines need no files. Small control messages (the plan, wrong counts, per-iteration times)
travel on the gloo control group, never inside timed iterations.

Tests inject faults through ``COLLBENCH_FAULT_INJECT=rank=R,point=P,mode=exit|hang|raise``: rank R
dies, hangs or raises when it reaches point P (0-based among the points this run measures, in the
plan's order: a tune's sweep measures a size's points in another order, ``order.py``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from collbench.errors import ConfigError, UserError
from collbench.nccl.tuning_log import choice_for
from collbench.nccl.variants import is_native, parse_native_variant
from collbench.results.io import append_jsonl
from collbench.results.journal import empty_file
from collbench.results.row import ResultRow
from collbench.runtime.cuda.native_groups import GRAPHED_OPS, graph_ops_note
from collbench.runtime.cuda.native_groups import NativeGroups as NativeGroups
from collbench.runtime.cuda.native_groups import graph_policy as graph_policy
from collbench.runtime.executor.buffers import (
    PointBuffers,
    check_buffers,
    checks_data,
    fill,
    keeps_output,
    kept_output,
    make_buffers,
    torch_dtype,
)
from collbench.runtime.executor.plan_cache import PLANS, PlanKey
from collbench.runtime.executor.schedule_runner import ScheduleRunner
from collbench.runtime.executor.timing import AutoIters, IterationTimer, make_timer, summarize
from collbench.runtime.here import HERE
from collbench.runtime.host.environment import RunEnvironment, run_environment
from collbench.runtime.launch.ranks import RankContext
from collbench.runtime.sweep.faults import PLANNING, fault_from_env
from collbench.runtime.sweep.files import resumed_rows
from collbench.runtime.sweep.native_calls import native_call as _native_call
from collbench.runtime.sweep.order import SizeOrder, size_blocks
from collbench.runtime.sweep.plan import SweepJob, layout_nodes_note, load_sweep_topology
from collbench.runtime.sweep.points import (
    SweepPoint,
    plan_points,
    point_key,
    point_row,
    row_fingerprint,
    rows_in_plan_order,
)
from collbench.runtime.sweep.timed import Leader, SizeLeaders, looks_behind, time_point
from collbench.schedules.contracts import contract

if TYPE_CHECKING:
    from collbench.layouts.model import Layout

AUTO_MIN_ITERS = AutoIters().min_iters
"""The iterations every point of ``-n auto`` is timed at least (what a point cut short had been asked)."""
LOG_STAYS_ON = (
    "this NCCL cannot switch its log off while running (no ncclResetDebugInit before 2.24): native "
    "times include NCCL's TUNING line per call (~1 us)"
)


def sweep_worker(ctx: RankContext, job: SweepJob) -> list[ResultRow]:
    """One rank's part of a sweep; rank 0 returns every row (resumed ones included), others []."""
    cfg = job.config
    ws = ctx.world_size
    if job.config.root >= ws:
        raise ValueError(f"--root {cfg.root} is not a rank of a world of {ws}")
    plan: list[Any] = [None]
    fault = fault_from_env()
    # Named in the error if this rank fails now: it joined, and no point is measured yet.
    ctx.doing("planning the sweep" if ctx.rank == 0 else "waiting for rank 0's plan of the sweep")
    if fault is not None:
        fault.strike(ctx.rank, PLANNING)
    whole: Layout | None = None
    try:
        if ctx.rank == 0:
            plan[0], whole = _shared_plan(ctx, job)
    except UserError as exc:
        # Only rank 0 plans: the others, waiting for the plan, would see their collective break and
        # fail as ranks (exit 3) beside its one line. They get the mistake instead, and say it alike.
        plan[0] = str(exc)
        dist.broadcast_object_list(plan, src=0, group=ctx.control)
        raise
    dist.broadcast_object_list(plan, src=0, group=ctx.control)
    if isinstance(plan[0], str):
        raise ConfigError(plan[0])
    points, shared, rounds, notes, done, fingerprint = plan[0]
    # A layout given with the job is each rank's own (a tune's: rank 0's whole, the others' their part,
    # tuning/placement.py), never sent again; one rank 0 planned here travels as its part for each rank.
    layout = cfg.layout if cfg.layout is not None else _own_layout(ctx, shared, rounds, whole)
    ctx.doing("preparing the points")
    seen = ctx.nodes if ctx.nodes is not None else _nodes_seen(ctx)
    if (other := layout_nodes_note(layout, seen)) is not None:
        notes = [*notes, other]
    env = run_environment(job.runs_on.version(HERE), ctx.device)

    for note in notes:
        ctx.report({"kind": "note", "text": note})
    todo = [p for p in points if point_key(job, p, ws) not in done]
    ctx.report({"kind": "plan", "total": len(points), "done": len(points) - len(todo)})
    graphs, graph_note = graph_policy(cfg.cuda_graph, ctx.device, [p.algo for p in todo])
    ops_note = graph_ops_note(cfg.cuda_graph, ctx.device, [p.op for p in todo if is_native(p.algo)])
    for text in (graph_note, ops_note):
        if text:
            ctx.report({"kind": "note", "text": text})
    plain_timer = make_timer(ctx.device)
    graph_timer = make_timer(ctx.device, cuda_graph=True) if graphs else plain_timer
    if ctx.device.type == "cuda" and any(p.algo not in graphs or p.op not in GRAPHED_OPS for p in todo):
        # Imported here only: the CUDA module belongs to the GPU side.
        from collbench.runtime.cuda.timing import ROUNDS_NOTE

        ctx.report({"kind": "note", "text": ROUNDS_NOTE})
    # NCCL's per-call choices (the TUNING lines only rank 0 of a communicator writes), for native rows.
    reader = None
    if job.nccl_log_dir is not None:
        from collbench.runtime.cuda.nccl_log import ChoiceLearner  # the GPU side's, with a log only

        reader = ChoiceLearner.of_log(job.nccl_log_dir, ctx.rank)
    if reader is not None and not reader.switch.switchable:
        ctx.report({"kind": "note", "text": LOG_STAYS_ON})
    measured: dict[tuple[Any, ...], ResultRow] = {}
    finished = len(points) - len(todo)
    # What a point clearly behind is cut short against (timed.py): every rank holds the resumed rows.
    leaders = SizeLeaders(cfg.cut_behind)
    leaders.add_rows(done.values())
    # Within a size, the algorithms fast at the size below first (order.py): from the same times on every rank.
    order = SizeOrder(cfg.cut_behind if cfg.interleave else None)
    for point in points:
        if (resumed := done.get(point_key(job, point, ws))) is not None:
            order.add(point, resumed.time_us, wrong=resumed.wrong)
    # A variant's last graph goes before its communicator (NativeGroups.before_destroy): an algorithm's
    # points keep their plan order within a size, so its last point in the plan is still its last run.
    with NativeGroups([p.algo for p in todo], before_destroy=graph_timer.release) as groups:
        for index, point in (item for block in size_blocks(todo) for item in order.order(block)):
            ctx.doing(f"measuring {point.describe()}")
            ctx.report({"kind": "start", "done": finished, "total": len(points), "text": point.describe()})
            if fault is not None:
                fault.strike(ctx.rank, index)
            graphed = point.algo in graphs and point.op in GRAPHED_OPS
            timer = graph_timer if graphed else plain_timer
            # A test's rank made slow at this point (faults.py): the call itself, every time it runs.
            slow = functools.partial(fault.slowed, ctx.rank, index) if fault is not None else None
            sizes = (leaders, order)
            row = _measure(ctx, job, point, layout, timer, env, fingerprint, seen, groups, sizes, reader, slow)
            groups.done_with(index)
            finished += 1
            if row is None:
                continue
            if ctx.rank == 0:
                append_jsonl(job.stream_path, row)
                measured[point_key(job, point, ws)] = row
                ctx.report({"kind": "row", "done": finished, "total": len(points), "row": row.to_dict()})
    ctx.doing("finishing")
    if reader is not None and reader.leaked:
        ctx.report({"kind": "note", "text": "NCCL kept logging TUNING lines while timing: native times include them"})
    if ctx.rank != 0:
        return []
    return rows_in_plan_order(job, points, ws, measured, done)


def _nodes_seen(ctx: RankContext) -> int:
    """How many nodes the ranks run on, by what identifies each rank's node (``RankContext.node``:
    namespaces and containers share a host name). Under a launcher the job's membership says it once
    (``ctx.nodes``); gathering every rank's node to every rank at every sweep was O(ranks) a rank at
    each round and tie round of a tune."""
    hosts: list[Any] = [None] * ctx.world_size
    dist.all_gather_object(hosts, ctx.node, group=ctx.control)
    return len(set(hosts))


def _shared_plan(ctx: RankContext, job: SweepJob) -> tuple[tuple[Any, ...], Layout | None]:
    """Rank 0's plan as every rank receives it, and the whole layout rank 0 planned here (None: none,
    or the job's own). The layout travels without its all-to-all exchange table (O(ranks^2)): with the
    count of its rounds, or -1 where each rank derives its own (the round-robin ones, or the rule by nodes)."""
    points, layout, notes, done, fingerprint = _plan(ctx, job)
    if layout is None or job.config.layout is not None:
        return (points, None, 0, notes, done, fingerprint), None
    rounds = -1 if layout.exchange_is_derived() else layout.exchange_round_count
    return (points, layout.shared_part(), rounds, notes, done, fingerprint), layout


def _own_layout(ctx: RankContext, shared: Layout | None, rounds: int, whole: Layout | None) -> Layout | None:
    """This rank's layout from rank 0's plan: rank 0 keeps its whole one; the others get the shared part
    and their own exchange partners, derived (``rounds`` -1: ``Layout.derived_partners``) or by one scatter
    from rank 0."""
    if shared is None:
        return None
    partners: tuple[int, ...] = ()
    if rounds == -1:
        partners = shared.derived_partners(ctx.rank)
    elif rounds > 0:
        mine = torch.zeros(rounds, dtype=torch.int32)
        rows = None
        if ctx.rank == 0:
            assert whole is not None
            rows = list(torch.tensor(whole.exchange_rounds, dtype=torch.int32).t().contiguous().unbind(0))
        dist.scatter(mine, rows, src=0, group=ctx.control)
        partners = tuple(int(p) for p in mine.tolist())
    if ctx.rank == 0:
        return whole
    return shared.with_partners(ctx.rank, partners)


def _plan(
    ctx: RankContext, job: SweepJob
) -> tuple[list[SweepPoint], Layout | None, list[str], dict[Any, ResultRow], str]:
    """Rank 0's plan of the sweep, for every rank: its points, layout, notes, resumed rows, fingerprint.

    Raises ConfigError when every point is skipped, and what reading a resumed file raises.
    """
    cfg, ws = job.config, ctx.world_size
    layout = cfg.layout
    loaded: list[str] = []
    if job.topology is None and cfg.topology_path is not None and cfg.layout is None:
        # Under a launcher only rank 0 reads --topology (plan.validate leaves it): a refusal here
        # reaches every rank as this plan's mistake.
        job = replace(job, topology=load_sweep_topology(cfg.topology_path, ws, loaded))
    if layout is None and job.topology is not None:
        # Imported here only: layouts are another area's, needed with --topology alone.
        from collbench.layouts.plan import plan_layout

        layout = plan_layout(job.topology, ws)
    nodes = len(layout.nodes) if layout is not None else 1
    name = layout.name if layout is not None else "rank-order"
    points, notes = plan_points(job, ws, ctx.device, name, nodes=nodes, job_nodes=ctx.nodes)
    notes = [*loaded, *notes]
    if not points and notes:
        # An empty sweep exited 0 and wrote nothing, with no word on it; sweep_worker hands this
        # line to the other ranks, so every rank stops with it.
        why = next((n for n in notes if "element" in n), notes[-1])
        raise ConfigError(f"nothing to measure: every point was skipped ({why}); raise -b/-e or change --algo")
    done: dict[tuple[Any, ...], ResultRow] = {}
    if cfg.resume:
        done = {row.key: row for row in resumed_rows(job.stream_path)}
    else:
        job.stream_path.parent.mkdir(parents=True, exist_ok=True)
        empty_file(job.stream_path)  # never through a symlink planted since the parent checked
    fingerprint, fp_note = row_fingerprint(job, ws)
    if fp_note:
        notes.append(fp_note)
    others = sorted({row.topology_fingerprint for row in done.values()} - {fingerprint, ""}) if fingerprint else []
    if others:
        # A stream copied from another machine (or swept with another --topology) at the same rank count
        # was resumed as this one's: its rows kept, the rest measured here, one file of two machines.
        raise ConfigError(
            f"--resume: {job.stream_path} holds rows of topology {', '.join(others)} and this sweep's is "
            f"{fingerprint} (another machine, or another --topology); resume it where and as it was measured, "
            "or give --stream FILE for this sweep's rows"
        )
    return points, None if cfg.layout is not None else layout, notes, done, fingerprint


def _measure(
    ctx: RankContext,
    job: SweepJob,
    point: SweepPoint,
    layout: Layout | None,
    timer: IterationTimer,
    env: RunEnvironment,
    fingerprint: str,
    nodes: int,
    groups: NativeGroups,
    sizes: tuple[SizeLeaders, SizeOrder],
    reader: Any = None,
    slow: Callable[[Callable[[], None]], Callable[[], None]] | None = None,
) -> ResultRow | None:
    cfg = job.config
    ws = ctx.world_size
    dtype = torch_dtype(job.dtype)
    root = cfg.root if point.op.spec.rooted else 0
    bufs = make_buffers(
        point.op,
        point.count,
        dtype=dtype,
        rank=ctx.rank,
        world_size=ws,
        root=root,
        in_place=point.in_place,
        device=ctx.device,
    )
    native = is_native(point.algo)
    if native and point.algo in groups.refused:
        return None  # NCCL refused this variant at an earlier point (said once, then)
    learning = reader is not None and native
    checked = cfg.check and checks_data(point.op)
    # Small points are checked after the timing, from a copy of their first call's output; large ones
    # right after that call, then warmed up once more (buffers.KEEP_OUTPUT_BYTES says why).
    check_after = checked and keeps_output(point.count, dtype.itemsize)
    failure = ""
    first_ns = 0
    kept = bufs
    try:
        # A forced variant's communicator is made here, inside the handling: NCCL refusing it
        # (ncclInvalidUsage) fails this variant's points, not the run.
        call = _make_call(ctx, job, point, bufs, layout, root, groups)
        if slow is not None:
            call = slow(call)
        fill(bufs, job.redop, cfg.seed)
        if learning:
            reader.before_untimed()  # NCCL's TUNING log on for this one untimed call only
        try:
            first_ns = time.perf_counter_ns()
            call()
            if ctx.device.type == "cuda":
                torch.cuda.synchronize(ctx.device)  # the call's own time, not its launch's
            first_ns = time.perf_counter_ns() - first_ns
        finally:
            if learning:
                reader.after_untimed()
    except (RuntimeError, ValueError, TypeError) as exc:
        # Only the backend's own collective may refuse (a dtype or reduction it lacks, an algorithm
        # NCCL cannot run); an error in collbench's executor is a bug and a dead peer ends the run.
        if not native or (_is_peer_failure(exc) and not _nccl_refused(exc)):
            raise
        failure = f"{type(exc).__name__}: {_first_line(exc)}"
    if check_after and not failure:
        # The data check reads this call's output after the timing, from a copy (nccl-tests checks after
        # its timed loop too, but refills its buffers and makes one more call for it: src/common.cu,
        # BenchTime). Checked here, its CPU work and collectives came between this call and the timed
        # ones, and with no further warm-up the first timed iteration was often slow (benchmarks/README.md,
        # "A quick tune without its warm-up call"): now this call is a warm-up right before the timing,
        # and the copy keeps what the check reads.
        kept = kept_output(bufs)
    # Agreed by the largest over ranks: whether any rank failed, and the slowest rank's first call.
    flags = torch.tensor([1 if failure else 0, 0 if failure else first_ns // 1000], dtype=torch.int64)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=ctx.control)
    if int(flags[0]) > 0:
        # The backend's own collective refused (every rank does, on the same arguments).
        forced = point.algo != "native"
        if forced:
            groups.refused.add(point.algo)
        if ctx.rank == 0:
            what = f"{point.algo} (all its points)" if forced else point.describe()
            text = f"{what}: {job.backend} cannot run it ({failure or 'refused on another rank'}); skipped"
            ctx.report({"kind": "note", "text": text})
        return None
    wrong = -1  # barrier: nothing to check (-1, shown as N/A)
    warmup = cfg.warmup
    checked_before = checked and not check_after
    if checked_before:
        # Checked now: its CPU work and collectives come between this call and the timed ones, so one
        # warm-up call comes after them whatever the depth asks (before the one timed call that decides
        # whether a point looking behind is cut short, too: timed.time_point).
        wrong = _checked(ctx, job, point, bufs)
        warmup = max(warmup, 1)
    leaders, order = sizes
    where = (point.op.value, point.size_bytes, point.in_place)
    bound = leaders.bound(where, point.algo)
    asked = cfg.iters if cfg.iters is not None else AUTO_MIN_ITERS
    behind = None
    if bound is not None and looks_behind(bound, float(flags[1]), asked, cfg.point_budget_s):
        # The point's first call is its warm-up (timed.py); where the check came since, one more call is.
        behind = replace(bound, check_us=float(flags[1]))
    budget = cfg.point_budget_s
    timed = time_point(ctx, call, timer, cfg.iters, budget, behind, warmup=warmup, checked_before=checked_before)
    if check_after:
        wrong = _checked(ctx, job, point, kept)
    samples = timed.samples_us
    stats = summarize(samples)
    leaders.add(where, Leader(point.algo, stats.time_us_max), wrong=wrong, cut=bool(timed.cut_short))
    order.add(point, stats.time_us, wrong=wrong)
    choices = reader.choices() if learning else []
    if ctx.rank != 0:
        return None
    nccl_algo, nccl_proto = _variant_fields(point.algo)
    if learning:
        # What NCCL says it ran beats what was asked for: a forced algorithm a collective cannot run
        # falls back (NCCL before 2.24), and plain native rows have nothing else to say.
        chosen = choice_for(choices, point.op.spec.nccl_name, point.size_bytes, ws)
        if chosen is not None:
            nccl_algo, nccl_proto = chosen
    return point_row(
        job,
        point,
        ws,
        samples,
        stats,
        iters=timed.iters,
        cut_short=timed.cut_short,
        wrong=wrong,
        nodes=nodes,
        host=env.host,
        topology_fingerprint=fingerprint,
        torch_version=env.torch_version,
        backend_version=env.backend_version,
        cuda_version=env.cuda_version,
        driver_version=env.driver_version,
        device_name=env.device_name,
        nccl_algo=nccl_algo,
        nccl_proto=nccl_proto,
        reduce_path=_reduce_path(point, ctx.device, dtype, ws),
    )


def _checked(ctx: RankContext, job: SweepJob, point: SweepPoint, kept: PointBuffers) -> int:
    """Wrong elements over every rank in the output the point's first call left (``kept``), the same on
    every rank: each rank checks its own, in lock step chunk by chunk, and one all-reduce sums them."""
    # A reduce's non-roots, with nothing to check, wait one chunk at a time on the control group,
    # never the whole check (which could outlast its timeout).
    tick = torch.zeros(1, dtype=torch.int64)

    def in_step() -> None:
        dist.all_reduce(tick, group=ctx.control)

    wrong = torch.tensor([_count_wrong(job, point, kept, in_step)], dtype=torch.int64)
    dist.all_reduce(wrong, group=ctx.control)
    return int(wrong[0])


def _count_wrong(job: SweepJob, point: SweepPoint, bufs: PointBuffers, between_chunks: Callable[[], None]) -> int:
    """Wrong elements the point's first call left: exact, except NCCL's own avg (within its rounding)."""
    if job.redop == "avg" and job.runs_on.premultiplied_avg and is_native(point.algo) and point.op.spec.reduces:
        # NCCL premultiplies each input by 1/n rounded and sums: not the correctly rounded S/n.
        from collbench.runtime.cuda.nccl_avg import check_nccl_avg

        return check_nccl_avg(bufs, job.config.seed, between_chunks)
    return check_buffers(bufs, job.redop, job.config.seed, between_chunks)


def _reduce_path(point: SweepPoint, device: torch.device, dtype: torch.dtype, world_size: int) -> str | None:
    """The reduction path the point's own algorithm took (None: native, or nothing reduced).

    Nothing is reduced on one rank: a schedule of one rank has no step, and avg divides by 1 not at all.
    """
    if is_native(point.algo) or not point.op.spec.reduces or world_size == 1:
        return None
    if device.type != "cuda":
        return "torch-ops"
    # Imported here only: the CUDA module belongs to the GPU side.
    from collbench.runtime.cuda.kernels import reduce_path

    return reduce_path(device, dtype)


def _is_peer_failure(exc: BaseException) -> bool:
    backend_error = getattr(dist, "DistBackendError", None)
    return backend_error is not None and isinstance(exc, backend_error)


def _nccl_refused(exc: BaseException) -> bool:
    from collbench.runtime.cuda.nccl import nccl_refused

    return nccl_refused(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else ""


def _variant_fields(algo: str) -> tuple[str, str]:
    if not is_native(algo):
        return "", ""
    variant = parse_native_variant(algo)
    return variant.algo or "", variant.proto or ""


def _make_call(
    ctx: RankContext,
    job: SweepJob,
    point: SweepPoint,
    bufs: PointBuffers,
    layout: Layout | None,
    root: int,
    groups: NativeGroups,
) -> Callable[[], None]:
    """One collective call on ``bufs`` (input to output), as the point's algorithm does it."""
    op = point.op
    rank = ctx.rank
    inp, out = bufs.input, bufs.output
    if is_native(point.algo):
        return _native_call(bufs, job.redop, groups.group(point.algo))
    key = PlanKey.as_measured(
        point.algo,
        op,
        ctx.world_size,
        point.count,
        rank,
        root,
        layout,
        inp.element_size(),
        point.segment_bytes,
        ctx.device,
    )
    # Built for this rank alone (plan_cache.build_schedule); a point met again (another round, a tie
    # round, in place after out of place) reuses its plan: the process's cache.
    plan = PLANS.plan(key)
    runner = ScheduleRunner.of_plan(plan)
    redop = job.redop
    whole = bufs.whole
    if op.spec.out_of_place or not op.spec.payload or point.in_place:
        # The schedule's buffer is the allocation itself: input then output (all-to-all, send/recv),
        # the token (barrier), or the in-place buffer (a gather's or all-gather's output holds the input).
        return lambda: runner.run(whole, redop)
    terms = contract(op)
    n, count = ctx.world_size, point.count
    out_lo, out_hi = terms.output_span(rank, n, count)
    if (out_lo, out_hi) != (0, count):
        # The output is the rank's part (reduce-scatter, scatter): the schedule runs in the input, in a copy
        # of it where it reduces there (every call starts from the filled input), and the part is copied out.
        work = torch.empty_like(inp) if op.spec.reduces else inp

        def part_out() -> None:
            if work is not inp:
                work.copy_(inp)
            runner.run(work, redop)
            out.copy_(work[out_lo:out_hi])

        return part_out
    # The output is the schedule's buffer: the rank's own data is copied into it first (where the input
    # lies in it: a gather's block, an all-gather's chunk; nothing on a broadcast's non-roots).
    held = terms.holds(rank, n, count, root)

    def whole_out() -> None:
        for lo, hi in held:
            out[lo:hi].copy_(inp)
        runner.run(out, redop)

    return whole_out
