"""All-to-all in steps: ``pairwise`` exchange (n-1 steps) and ``bruck`` (ceil(log2 n) steps).

Rank r's input block j (``block_bounds``) must end as rank j's output block r; every rank copies its
own block into its output (a local copy, in its first step).

* ``pairwise``: in step k (1..n-1) rank r sends its block for ``r + k`` there and receives from
  ``r - k`` (mod n), as Open MPI's ``alltoall_intra_pairwise`` and MPICH's pairwise exchange: one
  message in and one out per step, every rank busy every step, the bandwidth-friendly order.
* ``bruck`` (Bruck, Ho, Kipnis, Upfal and Weathersby, 1997, as Open MPI's ``alltoall_intra_bruck``
  and MPICH's short-message all-to-all): block ``i`` places ahead (the one for ``r + i``) travels
  ``i`` ranks in hops of the powers of two in ``i``; in step k every rank sends, to ``r + 2^k``, all
  blocks whose distance has bit k set. Blocks wait in the input region, each in the slot its
  receiver would use (the classic algorithm's rotation is only a renaming of slots here, never a
  copy), and the last hop of a block lands straight in its place in the output region. ceil(log2 n)
  steps, but a block crosses as many links as its distance has bits: about log2(n)/2 times the
  bytes of pairwise, so it is for small messages.

A step of ``bruck`` sends several blocks to the same peer: one transfer each, which go out together
(the cost counts one message a step, as a packed send would).
"""

from __future__ import annotations

from collbench.layouts.model import Layout
from collbench.schedules.algorithms._common import RoundBuilder, check_count_and_segments, layout_name
from collbench.schedules.algorithms.binomial import binomial_broadcast_cost, binomial_reduce_cost
from collbench.schedules.algorithms.ring import RING
from collbench.schedules.cost import CostFormulas, CostTerms, ceil_log2
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op, block_bounds
from collbench.schedules.spec import AlgorithmSpec


def _own_block(b: RoundBuilder, n: int, count: int) -> None:
    """Every rank copies its input block r to its output block r, in its first step."""
    blocks = block_bounds(count, n)
    for r in b.kept():
        b.transfer(0, r, r, *blocks[r], reduce=False, label="copy own block", dst_start=count + blocks[r][0])


def build_pairwise(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
    rank: int | None = None,
) -> Schedule:
    """Pairwise exchange all-to-all: step k sends to ``r + k`` and receives from ``r - k``; any world
    size, a count that does not divide leaves its tail out."""
    check_count_and_segments(count, segments)
    n = world_size
    blocks = block_bounds(count, n)
    b = RoundBuilder(n, rank)
    _own_block(b, n, count)
    for k in range(1, n):
        for r in b.ring_positions(range(n), k):
            dst = (r + k) % n
            b.transfer(
                k - 1, r, dst, *blocks[dst], reduce=False, label=f"exchange {k}/{n - 1}", dst_start=count + blocks[r][0]
            )
    return b.build(op, "pairwise", count, root=root, layout=layout_name(layout))


def build_bruck(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
    rank: int | None = None,
) -> Schedule:
    """Bruck's all-to-all: ceil(log2 n) steps, in place in the input region; see the module docstring."""
    check_count_and_segments(count, segments)
    n = world_size
    size = count // n
    b = RoundBuilder(n, rank)
    _own_block(b, n, count)
    steps = ceil_log2(n)
    for k in range(steps):
        hop = 1 << k
        for r in b.ring_positions(range(n), hop):  # r -> r + hop that touch a kept rank
            q = (r + hop) % n
            for i in range(1, n):
                if not i & hop:
                    continue
                # Block i places ahead waits at rank r in the slot (r + i) % n; after this hop it is at q,
                # in q's slot (q + i) % n, or, when this was its last hop, in q's output block for its
                # source, q - i.
                start = (r + i) % n * size
                last = i < hop << 1
                at = count + (q - i) % n * size if last else (q + i) % n * size
                b.transfer(k, r, q, start, start + size, reduce=False, label=f"bruck {k + 1}/{steps}", dst_start=at)
    return b.build(op, "bruck", count, root=root, layout=layout_name(layout))


# -- closed-form costs (p ranks, n bytes, k segments) ----------------------------------------------


def _pairwise_all_to_all_cost(p: int, n: float, k: int) -> CostTerms:
    # p-1 steps of one block (n/p) out and one in.
    return CostTerms(float(p - 1), (p - 1) / p * n, 0.0)


def bits_set_below(p: int) -> int:
    """The number of set bits in all of 0..p-1: the block hops of Bruck's all-to-all. O(log p)."""
    total = 0
    bit = 1
    while bit < p:
        period = bit << 1
        total += p // period * bit + max(0, p % period - bit)
        bit = period
    return total


def _bruck_all_to_all_cost(p: int, n: float, k: int) -> CostTerms:
    # Step j moves the blocks whose distance has bit j set, every rank alike: over all steps, one block
    # (n/p) per set bit of the distances 1..p-1.
    return CostTerms(float(ceil_log2(p)), bits_set_below(p) * n / p, 0.0)


def _bruck_all_gather_cost(p: int, n: float, k: int) -> CostTerms:
    # Bruck's all-gather (the same hops, each rank's chunk spreading): ceil(log2 p) steps, (p-1)/p n.
    return CostTerms(float(ceil_log2(p)), (p - 1) / p * n, 0.0)


def _bruck_reduce_scatter_cost(p: int, n: float, k: int) -> CostTerms:
    # Its mirror: the partial chunks gather along the same hops, reduced on arrival.
    f = (p - 1) / p
    return CostTerms(float(ceil_log2(p)), f * n, f * n)


def _bruck_all_reduce_cost(p: int, n: float, k: int) -> CostTerms:
    return _bruck_reduce_scatter_cost(p, n, k) + _bruck_all_gather_cost(p, n, k)


BRUCK_COSTS = CostFormulas(
    # Bruck does only all-to-all; the five are what its hops would cost: Bruck's all-gather and its
    # mirror, and a binomial tree (powers-of-two hops) for the rooted ones.
    all_reduce=_bruck_all_reduce_cost,
    reduce_scatter=_bruck_reduce_scatter_cost,
    all_gather=_bruck_all_gather_cost,
    broadcast=binomial_broadcast_cost,
    reduce=binomial_reduce_cost,
    all_to_all=_bruck_all_to_all_cost,
)
"""Bruck's table; the dissemination barrier (the same hops) prices the five by it too."""

PAIRWISE = AlgorithmSpec(
    name="pairwise",
    ops=frozenset({Op.ALL_TO_ALL}),
    builder=build_pairwise,
    summary="pairwise exchange: n-1 steps, step k to rank+k and from rank-k, one block each way",
    costs=CostFormulas(
        # The pairwise exchange of reduce-scatter and all-gather moves what a ring moves, in as many
        # steps; the five are priced as ring's.
        all_reduce=RING.costs.all_reduce,
        reduce_scatter=RING.costs.reduce_scatter,
        all_gather=RING.costs.all_gather,
        broadcast=RING.costs.broadcast,
        reduce=RING.costs.reduce,
        all_to_all=_pairwise_all_to_all_cost,
    ),
)
BRUCK = AlgorithmSpec(
    name="bruck",
    ops=frozenset({Op.ALL_TO_ALL}),
    builder=build_bruck,
    summary="Bruck: ceil(log2 n) steps to rank+2^k, about log2(n)/2 x pairwise's bytes (small messages)",
    costs=BRUCK_COSTS,
)

SPECS: tuple[AlgorithmSpec, ...] = (PAIRWISE, BRUCK)
