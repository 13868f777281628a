"""``direct``: everything through one rank and back, the parameter-server baseline.

Every rank sends its data to the root (``root``, rank 0 unless given), which combines it and sends the
result back. Two steps at most, so it wins for tiny messages; but the root's link carries (n-1) times
the buffer each way, so it loses badly once bandwidth matters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from collbench.layouts.model import Layout
from collbench.schedules.algorithms._common import RoundBuilder, check_count_and_segments, layout_name
from collbench.schedules.cost import CostFormulas, CostTerms, star_broadcast, star_reduce
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op, chunk_bounds
from collbench.schedules.spec import AlgorithmSpec

Phase = Callable[[RoundBuilder, int, Sequence[int], int, list[tuple[int, int]]], None]
"""One step of an op through the root: (builder, root, the other ranks kept, count, each rank's chunk)."""


def _reduce_at_root(
    b: RoundBuilder, root: int, others: Sequence[int], count: int, chunks: list[tuple[int, int]]
) -> None:
    for r in others:
        b.transfer(0, r, root, 0, count, reduce=True, label="reduce at the root")


def _whole_back(b: RoundBuilder, root: int, others: Sequence[int], count: int, chunks: list[tuple[int, int]]) -> None:
    for r in others:
        b.transfer(1, root, r, 0, count, reduce=False, label="send back")


def _chunk_back(b: RoundBuilder, root: int, others: Sequence[int], count: int, chunks: list[tuple[int, int]]) -> None:
    for r in others:
        b.transfer(1, root, r, *chunks[r], reduce=False, label="send back")


def _gather_at_root(
    b: RoundBuilder, root: int, others: Sequence[int], count: int, chunks: list[tuple[int, int]]
) -> None:
    for r in others:
        b.transfer(0, r, root, *chunks[r], reduce=False, label="gather at the root")


def _rest_back(b: RoundBuilder, root: int, others: Sequence[int], count: int, chunks: list[tuple[int, int]]) -> None:
    for r in others:
        # Rank r already holds its own chunk: send it everything else.
        b.transfer(1, root, r, 0, chunks[r][0], reduce=False, label="send back")
        b.transfer(1, root, r, chunks[r][1], count, reduce=False, label="send back")


def _from_root(b: RoundBuilder, root: int, others: Sequence[int], count: int, chunks: list[tuple[int, int]]) -> None:
    for r in others:
        b.transfer(0, root, r, 0, count, reduce=False, label="send from the root")


_PHASES: dict[Op, tuple[Phase, ...]] = {
    Op.ALL_REDUCE: (_reduce_at_root, _whole_back),
    Op.REDUCE_SCATTER: (_reduce_at_root, _chunk_back),
    Op.REDUCE: (_reduce_at_root,),
    Op.ALL_GATHER: (_gather_at_root, _rest_back),
    Op.BROADCAST: (_from_root,),
}
"""Each op direct does, as its steps through the root: the one place that says so (its ops are these
keys)."""


def build_direct(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
    rank: int | None = None,
) -> Schedule:
    """Gather (or reduce) at ``root``, then scatter (or broadcast) from it; any op, any world size."""
    check_count_and_segments(count, segments)
    b = RoundBuilder(world_size, rank)
    chunks = chunk_bounds(count, world_size)
    # The root's star: every other rank in a whole build or the root's own, the kept rank alone otherwise.
    others = b.spokes(root, [r for r in range(world_size) if r != root])
    for phase in _PHASES[op]:
        phase(b, root, others, count, chunks)
    return b.build(op, "direct", count, root=root, layout=layout_name(layout))


# -- closed-form costs (p ranks, n bytes, k segments) ----------------------------------------------


def _all_reduce_cost(p: int, n: float, k: int) -> CostTerms:
    # The root takes (p-1) whole buffers in, reduces them, and sends p-1 copies back out.
    # The root's port takes p-1 messages in, then sends p-1 out.
    return CostTerms(2.0, 2.0 * (p - 1) * n, (p - 1) * n, 2.0 * (p - 1))


def _reduce_scatter_cost(p: int, n: float, k: int) -> CostTerms:
    return CostTerms(2.0, (p - 1) * n + (p - 1) / p * n, (p - 1) * n, 2.0 * (p - 1))


def _all_gather_cost(p: int, n: float, k: int) -> CostTerms:
    # Gather: the root takes in (p-1) chunks; then it sends every rank the p-1 chunks it lacks.
    return CostTerms(2.0, (p - 1) / p * n + (p - 1) * (p - 1) / p * n, 0.0, 2.0 * (p - 1))


DIRECT = AlgorithmSpec(
    name="direct",
    ops=frozenset(_PHASES),
    builder=build_direct,
    summary="all to one root and back (parameter server): 2 steps, (n-1) x the buffer over the root's link",
    costs=CostFormulas(
        all_reduce=_all_reduce_cost,
        reduce_scatter=_reduce_scatter_cost,
        all_gather=_all_gather_cost,
        broadcast=star_broadcast,
        reduce=star_reduce,
    ),
)

SPECS: tuple[AlgorithmSpec, ...] = (DIRECT,)
