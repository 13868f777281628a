"""``one-shot``: every rank sends what the others need straight to them, in one step.

All-reduce: every rank sends its whole buffer to every other and reduces what arrives locally.
Reduce-scatter: every rank sends chunk r to rank r. All-gather: every rank sends its chunk to all.
Broadcast and reduce: the root sends to, or receives from, everyone at once. One step (the least
latency), and each rank sends n-1 times what it owns (the most traffic).
"""

from __future__ import annotations

from collbench.layouts.model import Layout
from collbench.schedules.algorithms._common import RoundBuilder, check_count_and_segments, layout_name
from collbench.schedules.cost import CostFormulas, CostTerms, star_broadcast, star_reduce
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import CLASSIC_OPS, Op, chunk_bounds
from collbench.schedules.spec import AlgorithmSpec


def build_one_shot(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
    rank: int | None = None,
) -> Schedule:
    """One step of direct transfers between every pair that needs one; any op, any world size."""
    check_count_and_segments(count, segments)
    n = world_size
    b = RoundBuilder(n, rank)
    chunks = chunk_bounds(count, n)
    # Every pair that touches a kept rank: 2n - 1 of them in a one-rank build, never n^2.
    for src, dst in b.pairs(n):
        if src == dst:
            continue
        if op is Op.ALL_REDUCE:
            b.transfer(0, src, dst, 0, count, reduce=True, label="everyone to everyone")
        elif op is Op.REDUCE_SCATTER:
            b.transfer(0, src, dst, *chunks[dst], reduce=True, label="each chunk to its owner")
        elif op is Op.ALL_GATHER:
            b.transfer(0, src, dst, *chunks[src], reduce=False, label="own chunk to everyone")
        elif op is Op.BROADCAST and src == root:
            b.transfer(0, src, dst, 0, count, reduce=False, label="root to everyone")
        elif op is Op.REDUCE and dst == root:
            b.transfer(0, src, dst, 0, count, reduce=True, label="everyone to the root")
    return b.build(op, "one-shot", count, root=root, layout=layout_name(layout))


# -- closed-form costs (p ranks, n bytes, k segments) ----------------------------------------------


# Every rank's port sends p-1 messages and takes in p-1 in its one step.


def _all_reduce_cost(p: int, n: float, k: int) -> CostTerms:
    return CostTerms(1.0, (p - 1) * n, (p - 1) * n, float(p - 1))


def _reduce_scatter_cost(p: int, n: float, k: int) -> CostTerms:
    f = (p - 1) / p
    return CostTerms(1.0, f * n, f * n, float(p - 1))


def _all_gather_cost(p: int, n: float, k: int) -> CostTerms:
    return CostTerms(1.0, (p - 1) / p * n, 0.0, float(p - 1))


ONE_SHOT = AlgorithmSpec(
    name="one-shot",
    ops=CLASSIC_OPS,
    builder=build_one_shot,
    summary="every rank sends straight to every rank that needs its data: 1 step, the most traffic",
    costs=CostFormulas(
        all_reduce=_all_reduce_cost,
        reduce_scatter=_reduce_scatter_cost,
        all_gather=_all_gather_cost,
        broadcast=star_broadcast,
        reduce=star_reduce,
    ),
)

SPECS: tuple[AlgorithmSpec, ...] = (ONE_SHOT,)
