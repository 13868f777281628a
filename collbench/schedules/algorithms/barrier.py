"""``dissemination``: the barrier of Hensgen, Finkel and Manber (1988), as gloo's ``barrier.cc`` and
Open MPI's ``barrier_intra_bruck``: in round k every rank sends a token to ``r + 2^k`` and waits for
one from ``r - 2^k`` (mod n). After round k a rank has heard, directly or through others, from the
2^(k+1) ranks behind it, so ceil(log2 n) rounds reach everyone, at any world size, with no root and
one message in and out per round.

The token is one element that nothing checks (ir.py): a receive with ``reduce`` merges whom the
sender has heard from. The tree barrier (up a tree and back down) is ``tree``'s (``tree.py``).
"""

from __future__ import annotations

from collbench.layouts.model import Layout
from collbench.schedules.algorithms._common import RoundBuilder, check_count_and_segments, layout_name
from collbench.schedules.algorithms.alltoall import BRUCK_COSTS
from collbench.schedules.cost import CostFormulas, CostTerms, ceil_log2
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op
from collbench.schedules.spec import AlgorithmSpec


def build_dissemination(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
    rank: int | None = None,
) -> Schedule:
    """ceil(log2 n) rounds of tokens to ``r + 2^k``; ``count`` is ignored (a barrier moves no data),
    one rank has no step."""
    check_count_and_segments(count, segments)
    n = world_size
    b = RoundBuilder(n, rank)
    rounds = ceil_log2(n)
    for k in range(rounds):
        for r in b.ring_positions(range(n), 1 << k):
            b.transfer(k, r, (r + (1 << k)) % n, 0, 1, reduce=True, label=f"round {k + 1}/{rounds}")
    return b.build(op, "dissemination", 0, root=root, layout=layout_name(layout))


def dissemination_barrier_cost(p: int, n: float, k: int) -> CostTerms:
    """ceil(log2 p) rounds of one message; no bytes."""
    return CostTerms(float(ceil_log2(p)), 0.0, 0.0)


DISSEMINATION = AlgorithmSpec(
    name="dissemination",
    ops=frozenset({Op.BARRIER}),
    builder=build_dissemination,
    summary="dissemination barrier: ceil(log2 n) rounds, each rank to rank+2^k, no root",
    # The five are priced as Bruck's hops, the same pattern carrying data.
    costs=CostFormulas(
        all_reduce=BRUCK_COSTS.all_reduce,
        reduce_scatter=BRUCK_COSTS.reduce_scatter,
        all_gather=BRUCK_COSTS.all_gather,
        broadcast=BRUCK_COSTS.broadcast,
        reduce=BRUCK_COSTS.reduce,
        barrier=dissemination_barrier_cost,
    ),
)

SPECS: tuple[AlgorithmSpec, ...] = (DISSEMINATION,)
