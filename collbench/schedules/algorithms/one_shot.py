"""``one-shot``: every rank sends what the others need straight to them, in one step.

All-reduce: every rank sends its whole buffer to every other and reduces what arrives locally.
Reduce-scatter: every rank sends chunk r to rank r. All-gather: every rank sends its chunk to all.
Broadcast and reduce: the root sends to, or receives from, everyone at once. One step (the least
latency), and each rank sends n-1 times what it owns (the most traffic).
"""

from __future__ import annotations

from collections.abc import Callable

from collbench.layouts.model import Layout
from collbench.schedules.algorithms._common import RoundBuilder, check_count_and_segments, layout_name
from collbench.schedules.cost import CostFormulas, CostTerms, star_broadcast, star_reduce
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op, chunk_bounds
from collbench.schedules.spec import AlgorithmSpec

Pair = Callable[[RoundBuilder, int, int, int, int, list[tuple[int, int]]], None]
"""What one pair (src, dst) moves for an op: (builder, src, dst, root, count, each rank's chunk)."""


def _all_reduce(b: RoundBuilder, src: int, dst: int, root: int, count: int, chunks: list[tuple[int, int]]) -> None:
    # Every rank sums the n inputs in rank order, x0 + x1 + ... + x(n-1), its own in its place: floating
    # addition does not associate, and rank d adding the others onto its own (xd + x0 + x1 ...) ended
    # with another last bit than rank 0 on 3 ranks and more, so a DDP job's replicas drifted apart (a
    # reduction's result is one value on every rank: torch's own all-reduce gives it, DDP assumes it). A
    # receive is applied in the order listed, src ascending: rank 0's input is copied in first, and a
    # rank's own input comes back to it as a send to itself (a local copy), reduced in at its turn.
    if src == dst == 0:
        return  # rank 0's own input is already where the sum starts
    b.transfer(0, src, dst, 0, count, reduce=src != 0, label="everyone to everyone")


def _reduce_scatter(b: RoundBuilder, src: int, dst: int, root: int, count: int, chunks: list[tuple[int, int]]) -> None:
    if src != dst:
        b.transfer(0, src, dst, *chunks[dst], reduce=True, label="each chunk to its owner")


def _all_gather(b: RoundBuilder, src: int, dst: int, root: int, count: int, chunks: list[tuple[int, int]]) -> None:
    if src != dst:
        b.transfer(0, src, dst, *chunks[src], reduce=False, label="own chunk to everyone")


def _broadcast(b: RoundBuilder, src: int, dst: int, root: int, count: int, chunks: list[tuple[int, int]]) -> None:
    if src == root != dst:
        b.transfer(0, src, dst, 0, count, reduce=False, label="root to everyone")


def _reduce(b: RoundBuilder, src: int, dst: int, root: int, count: int, chunks: list[tuple[int, int]]) -> None:
    if dst == root != src:
        b.transfer(0, src, dst, 0, count, reduce=True, label="everyone to the root")


_PAIRS: dict[Op, Pair] = {
    Op.ALL_REDUCE: _all_reduce,
    Op.REDUCE_SCATTER: _reduce_scatter,
    Op.ALL_GATHER: _all_gather,
    Op.BROADCAST: _broadcast,
    Op.REDUCE: _reduce,
}
"""What each op one-shot does sends between a pair of ranks, a rank and itself included (all-reduce's
local copy): the one place that says so (its ops are these keys)."""


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
    pair = _PAIRS[op]
    # Every pair that touches a kept rank: 2n - 1 of them in a one-rank build, never n^2.
    for src, dst in b.pairs(n):
        pair(b, src, dst, root, count, chunks)
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
    ops=frozenset(_PAIRS),
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
