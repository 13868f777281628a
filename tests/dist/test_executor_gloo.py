"""Every algorithm x op on 2, 3 and 4 gloo processes, against the exact expectation and torch's own collective.

One launch per world size (a module fixture); inside it, every (algorithm, op) pair runs every dtype
and every reduction (avg on floats only), in place and out of place, on small counts that include
counts below the world size and counts that do not divide by it, with pipelined segments on some.
The block ops (all-to-all, scatter, gather) run on whole blocks, as a sweep rounds them
(``ops.op_count``); all-to-all and send/recv out of place only; barrier once (it moves no data: it
must complete, nothing is compared). Hand-written schedules of the newer ops (tests/hand_schedules.py)
run too, and deliberately wrong all-to-all and gather schedules must be caught by the data check.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch
import torch.distributed as dist
from hand_schedules import HAND_OPS, corrupted_schedule, hand_schedule

from collbench.layouts.model import Layout
from collbench.runtime.executor.buffers import PointBuffers, check_buffers, fill, make_buffers, torch_dtype
from collbench.runtime.executor.schedule_runner import ScheduleRunner, run_schedule
from collbench.runtime.launch.ranks import RankContext, launch
from collbench.schedules.ir import Recv, Schedule, Send, Step
from collbench.schedules.ops import DTYPE_SIZES, FLOAT_DTYPES, REDOPS, SWEEP_DTYPES, Op, block_bounds, chunk_bounds, op_count
from collbench.schedules.registry import algorithm_names, get_algorithm

pytestmark = pytest.mark.dist

WORLD_SIZES = (2, 3, 4)
DTYPES = SWEEP_DTYPES
TORCH_OPS = {
    "sum": dist.ReduceOp.SUM,
    "prod": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
    "avg": dist.ReduceOp.AVG,
}


def _combos(op: Op) -> list[tuple[str, str]]:
    if not op.spec.payload:
        return [("float32", "sum")]  # a token: dtype and reduction do not matter
    if not op.spec.reduces:
        return [(dtype, "sum") for dtype in DTYPES]
    # avg has no prefix form: sweep refuses it for scan and exscan.
    return [
        (d, r)
        for d in DTYPES
        for r in REDOPS
        if (r != "avg" or d in FLOAT_DTYPES) and not (op.spec.ordered and r == "avg")
    ]


def _prefix_reference(op: Op, inp: torch.Tensor, redop: str, rank: int, n: int) -> torch.Tensor | None:
    """Scan and exscan from every rank's input, gathered by torch (torch.distributed has no scan);
    None for exscan's rank 0, which has no prefix."""
    parts = [torch.zeros_like(inp) for _ in range(n)]
    dist.all_gather(parts, inp.contiguous())
    upto = rank + 1 if op is Op.SCAN else rank
    if upto == 0:
        return None
    acc = parts[0].clone()
    for x in parts[1:upto]:
        acc = {"sum": acc + x, "prod": acc * x, "min": torch.minimum(acc, x), "max": torch.maximum(acc, x)}[redop]
    return acc


def _torch_reference(
    op: Op, inp: torch.Tensor, count: int, redop: str, rank: int, n: int, root: int
) -> torch.Tensor | None:
    """What torch.distributed's own collective makes of the same input (None where it defines nothing)."""
    reduce_op = TORCH_OPS[redop]
    if op.spec.ordered:
        return _prefix_reference(op, inp, redop, rank, n)
    if op in (Op.ALL_TO_ALL, Op.SCATTER, Op.GATHER, Op.SENDRECV, Op.BARRIER):
        return _torch_new_op(op, inp, count, rank, n, root)
    if op is Op.ALL_REDUCE:
        out = inp.clone()
        dist.all_reduce(out, op=reduce_op)
        return out
    if op is Op.REDUCE:
        out = inp.clone()
        dist.reduce(out, dst=root, op=reduce_op)
        return out if rank == root else None
    if op is Op.BROADCAST:
        out = inp.clone()
        dist.broadcast(out, src=root)
        return out
    bounds = chunk_bounds(count, n)
    width = max(b - a for a, b in bounds)
    if op is Op.REDUCE_SCATTER:
        # torch's tensor reduce-scatter wants equal chunks: pad each to the widest (padding is discarded).
        padded = torch.zeros(width * n, dtype=inp.dtype)
        for r, (a, b) in enumerate(bounds):
            padded[r * width : r * width + b - a] = inp[a:b]
        out = torch.zeros(width, dtype=inp.dtype)
        dist.reduce_scatter_tensor(out, padded, op=reduce_op)
        lo, hi = bounds[rank]
        return out[: hi - lo]
    lo, hi = bounds[rank]
    mine = torch.zeros(width, dtype=inp.dtype)
    mine[: hi - lo] = inp
    gathered = torch.zeros(width * n, dtype=inp.dtype)
    dist.all_gather_into_tensor(gathered, mine)
    return torch.cat([gathered[r * width : r * width + b - a] for r, (a, b) in enumerate(bounds)])


def _torch_new_op(op: Op, inp: torch.Tensor, count: int, rank: int, n: int, root: int) -> torch.Tensor | None:
    """torch.distributed's own all-to-all, scatter, gather or ring shift of the same input (None: barrier,
    a gather's non-roots)."""
    if op is Op.BARRIER:
        dist.barrier()
        return None
    blocks = block_bounds(count, n)
    whole = blocks[-1][1]
    if op is Op.ALL_TO_ALL:
        out = torch.zeros(whole, dtype=inp.dtype)
        dist.all_to_all_single(out, inp[:whole].clone())
        return out
    if op is Op.SCATTER:
        lo, hi = blocks[rank]
        out = torch.zeros(hi - lo, dtype=inp.dtype)
        dist.scatter(out, [inp[a:b].clone() for a, b in blocks] if rank == root else None, src=root)
        return out
    if op is Op.GATHER:
        parts = [torch.zeros(b - a, dtype=inp.dtype) for a, b in blocks] if rank == root else None
        dist.gather(inp.clone(), parts, dst=root)
        return torch.cat(parts) if parts is not None else None
    out = torch.zeros_like(inp)
    if n == 1:
        return inp.clone()
    works = dist.batch_isend_irecv(
        [dist.P2POp(dist.irecv, out, (rank - 1) % n), dist.P2POp(dist.isend, inp.clone(), (rank + 1) % n)]
    )
    for work in works:
        work.wait()
    return out


def _run(runner: ScheduleRunner, bufs: PointBuffers, redop: str) -> None:
    """One call of the schedule on ``bufs``, as the sweep makes it (worker._make_call)."""
    op, n, rank, count = bufs.op, bufs.world_size, bufs.rank, bufs.count
    if op.spec.out_of_place or not op.spec.payload or bufs.in_place:
        runner.run(bufs.whole, redop)
    elif op in (Op.REDUCE_SCATTER, Op.SCATTER):
        lo, hi = (block_bounds if op.spec.blocks else chunk_bounds)(count, n)[rank]
        work = bufs.input.clone()
        runner.run(work, redop)
        bufs.output.copy_(work[lo:hi])
    elif op in (Op.ALL_GATHER, Op.GATHER):
        lo, hi = (block_bounds if op.spec.blocks else chunk_bounds)(count, n)[rank]
        bufs.output[lo:hi].copy_(bufs.input)
        runner.run(bufs.output, redop)
    else:
        bufs.output.copy_(bufs.input)
        runner.run(bufs.output, redop)


def _case_count(op: Op, count: int, n: int) -> int:
    """The count a sweep would run: whole blocks for the block ops (at least one each), 0 for barrier."""
    return op_count(op, max(count, n) if op.spec.blocks else count, n)


def _run_case(
    ctx: RankContext, algo: str, op: Op, dtype_name: str, redop: str, count: int, in_place: bool, seg: int | None
) -> tuple[int, int]:
    n, rank = ctx.world_size, ctx.rank
    count = _case_count(op, count, n)
    in_place = in_place and not op.spec.out_of_place
    root = (count + 1) % n if op.spec.rooted else 0
    if algo == "hand":
        schedule = hand_schedule(op, n, count, root=root)
    elif algo == "corrupted":
        schedule = corrupted_schedule(op, n, count, root=root)
    else:
        spec = get_algorithm(algo)
        # hierarchical takes its nodes from the layout: two of n/2 ranks where n is even, else n of one.
        k = n // 2 if n % 2 == 0 else 1
        nodes = tuple(tuple(range(i, i + k)) for i in range(0, n, k))
        layout = Layout(nodes=nodes) if spec.needs_nodes else None
        schedule = spec.build(op, n, count, root=root, segments=2 if count > 4 else 1, layout=layout)
    dtype = torch_dtype(dtype_name)
    bufs = make_buffers(op, count, dtype=dtype, rank=rank, world_size=n, root=root, in_place=in_place)
    fill(bufs, redop, seed=count)
    original_input = bufs.input.clone()
    runner = ScheduleRunner(schedule, rank=rank, segment_bytes=seg, elem_bytes=DTYPE_SIZES[dtype_name])
    _run(runner, bufs, redop)
    wrong_expected = check_buffers(bufs, redop, seed=count)
    reference = _torch_reference(op, original_input, count, redop, rank, n, root)
    wrong_torch = 0 if reference is None else int(torch.ne(bufs.output[: reference.numel()], reference).sum())
    return wrong_expected, wrong_torch


def _check_worker(ctx: RankContext, payload: Any) -> list[tuple[str, int, int]]:
    """Run every case; return (case, wrong vs expectation, wrong vs torch) per case (rank 0 sums ranks)."""
    n = ctx.world_size
    counts = (1, n - 1 if n > 2 else 2, 2 * n + 1, 37)
    results: list[tuple[str, int, int]] = []
    cycle = itertools.count()
    for algo in algorithm_names():
        spec = get_algorithm(algo)
        if spec.builder is None:
            continue
        for op in Op:
            if not spec.supports(op):
                continue
            for dtype_name, redop in _combos(op):
                k = next(cycle)
                count = counts[k % len(counts)]
                in_place = k % 2 == 0
                seg = DTYPE_SIZES[dtype_name] * 3 if k % 3 == 0 else None
                mode = "in-place" if in_place else "out-of-place"
                case = f"{algo} {op.value} {dtype_name} {redop} count={count} {mode} seg={seg}"
                ctx.doing(case)
                w_exp, w_torch = _run_case(ctx, algo, op, dtype_name, redop, count, in_place, seg)
                totals = torch.tensor([w_exp, w_torch], dtype=torch.int64)
                dist.all_reduce(totals)
                results.append((case, int(totals[0]), int(totals[1])))
    results.extend(_hand_written_cases(ctx))
    results.extend(_hand_written_new_ops(ctx))
    return results


def _hand_written_new_ops(ctx: RankContext) -> list[tuple[str, int, int]]:
    """The newer ops' hand-written schedules (two dtypes, two counts, small segments on one), and the
    corrupted all-to-all and gather, whose cases are named ``corrupted`` (their wrong counts must be > 0)."""
    n = ctx.world_size
    results: list[tuple[str, int, int]] = []
    for algo, ops in (("hand", HAND_OPS), ("corrupted", (Op.ALL_TO_ALL, Op.GATHER))):
        for op in ops:
            for dtype_name, count, seg in (("float32", 2 * n + 1, None), ("bfloat16", 37, 6)):
                if not op.spec.payload and dtype_name != "float32":
                    continue
                case = f"{algo} {op.value} {dtype_name} sum count={count} seg={seg}"
                ctx.doing(case)
                w_exp, w_torch = _run_case(ctx, algo, op, dtype_name, "sum", count, False, seg)
                totals = torch.tensor([w_exp, w_torch], dtype=torch.int64)
                dist.all_reduce(totals)
                results.append((case, int(totals[0]), int(totals[1])))
    return results


def _hand_written_cases(ctx: RankContext) -> list[tuple[str, int, int]]:
    """Schedules written by hand: a step that sends what it overwrites, and a copy that lands in place."""
    n, rank = ctx.world_size, ctx.rank
    count = 10
    # Recursive-doubling-like exchange between ranks 0 and 1 (others idle): both send and reduce the
    # whole buffer in one step, so sends must read the buffer as it was when the step began.
    steps: list[tuple[Step, ...]] = [() for _ in range(n)]
    steps[0] = (Step(sends=(Send(1, 0, count),), recvs=(Recv(1, 0, count, reduce=True),)),)
    steps[1] = (Step(sends=(Send(0, 0, count),), recvs=(Recv(0, 0, count, reduce=True),)),)
    swap = Schedule(Op.ALL_REDUCE, "hand", n, count, tuple(steps))
    buf = torch.arange(count, dtype=torch.float32) + 100 * rank
    before = buf.clone()
    run_schedule(swap, buf, "sum", segment_bytes=8)
    expect = (torch.arange(count, dtype=torch.float32) * 2 + 100) if rank < 2 else before
    wrong = int(torch.ne(buf, expect).sum())
    # A copy from rank 0 into ranks 1..n-1 that lands directly in their buffers, in segments of 3.
    steps = [() for _ in range(n)]
    steps[0] = (Step(sends=tuple(Send(p, 0, count) for p in range(1, n))),)
    for p in range(1, n):
        steps[p] = (Step(recvs=(Recv(0, 0, count, reduce=False),)),)
    bcast = Schedule(Op.BROADCAST, "hand", n, count, tuple(steps))
    buf2 = torch.full((count,), float(rank))
    run_schedule(bcast, buf2, "sum", segment_bytes=12)
    wrong2 = int(torch.ne(buf2, torch.zeros(count)).sum())
    totals = torch.tensor([wrong, wrong2], dtype=torch.int64)
    dist.all_reduce(totals)
    return [("hand-written exchange", int(totals[0]), 0), ("hand-written copy", int(totals[1]), 0)]


@pytest.fixture(scope="module", params=WORLD_SIZES, ids=[f"{n}ranks" for n in WORLD_SIZES])
def outcomes(request: pytest.FixtureRequest) -> list[tuple[str, int, int]]:
    results = launch(request.param, _check_worker, None, backend="gloo", timeout_s=60)
    return results[0]


def _sound(outcomes: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    return [o for o in outcomes if not o[0].startswith("corrupted ")]


def test_every_algorithm_matches_the_exact_expectation(outcomes: list[tuple[str, int, int]]) -> None:
    bad = [(case, wrong) for case, wrong, _ in _sound(outcomes) if wrong]
    assert not bad, bad[:10]


def test_every_algorithm_matches_torchs_own_collective(outcomes: list[tuple[str, int, int]]) -> None:
    bad = [(case, wrong) for case, _, wrong in _sound(outcomes) if wrong]
    assert not bad, bad[:10]


def test_a_wrong_all_to_all_or_gather_is_caught_by_the_data_check(outcomes: list[tuple[str, int, int]]) -> None:
    corrupted = [o for o in outcomes if o[0].startswith("corrupted ")]
    assert {c.split()[1] for c, _, _ in corrupted} == {"all-to-all", "gather"}
    # Caught by the expectation and, independently, by torch's own collective.
    assert all(w_exp > 0 and w_torch > 0 for _, w_exp, w_torch in corrupted), corrupted


def test_the_newer_ops_ran_by_hand(outcomes: list[tuple[str, int, int]]) -> None:
    cases = {case.split(" count=")[0] for case, _, _ in outcomes}
    for op in HAND_OPS:
        assert f"hand {op.value} float32 sum" in cases


def test_every_applicable_pair_was_exercised(outcomes: list[tuple[str, int, int]]) -> None:
    cases = {case.split(" count=")[0] for case, _, _ in outcomes}
    for algo in algorithm_names():
        spec = get_algorithm(algo)
        if spec.builder is None:
            continue
        for op in Op:
            if spec.supports(op):
                for dtype_name, redop in _combos(op):
                    assert f"{algo} {op.value} {dtype_name} {redop}" in cases
