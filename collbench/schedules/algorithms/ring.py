"""Ring algorithms: every rank talks only to its ring neighbours, so each link carries (n-1)/n of the data.

* reduce-scatter: n-1 steps; in step s the rank at ring position p passes the chunk owned by position
  ``p-s-1`` to ``p+1``, which adds its own contribution; each chunk ends, complete, at its owner.
* all-gather: n-1 steps passing complete chunks on around the ring.
* all-reduce: reduce-scatter then all-gather, 2(n-1) steps, 2(n-1)/n of the buffer over each link.
* broadcast / reduce: a chain along the ring from (or to) the root, pipelined in ``segments`` pieces.
* send/recv: the ring shift nccl-tests' ``sendrecv.cu`` measures, one step: rank r's input to r+1.

A layout with several rings (channels) splits the buffer across them: every ring runs its share in
the same steps, so the links of all rings work at once.
"""

from __future__ import annotations

from collbench.layouts.model import Layout
from collbench.schedules.algorithms._common import (
    RoundBuilder,
    check_count_and_segments,
    layout_name,
    layout_rings,
    segment_ranges,
    split,
)
from collbench.schedules.cost import CostFormulas, CostTerms, tree_phase
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import CLASSIC_OPS, Op, chunk_bounds
from collbench.schedules.spec import AlgorithmSpec

_CHUNKED = (Op.REDUCE_SCATTER, Op.ALL_GATHER)
"""The ops whose chunks the op fixes (rank r's), each cut across the channels."""


def _reduce_scatter(
    b: RoundBuilder, ring: tuple[int, ...], owned: dict[int, tuple[int, int]], first_round: int
) -> None:
    n = len(ring)
    positions = b.ring_positions(ring)
    for s in range(n - 1):
        for p in positions:
            a, z = owned[ring[(p - s - 1) % n]]
            b.transfer(
                first_round + s, ring[p], ring[(p + 1) % n], a, z, reduce=True, label=f"reduce-scatter {s + 1}/{n - 1}"
            )


def _all_gather(b: RoundBuilder, ring: tuple[int, ...], owned: dict[int, tuple[int, int]], first_round: int) -> None:
    n = len(ring)
    positions = b.ring_positions(ring)
    for s in range(n - 1):
        for p in positions:
            a, z = owned[ring[(p - s) % n]]
            b.transfer(
                first_round + s, ring[p], ring[(p + 1) % n], a, z, reduce=False, label=f"all-gather {s + 1}/{n - 1}"
            )


def chain(b: RoundBuilder, ranks: list[int], start: int, stop: int, segments: int, *, reduce: bool) -> None:
    """Pipeline ``[start, stop)`` along ``ranks[0] -> ranks[1] -> ...``: segment j crosses link i in round i+j."""
    what = "chain to the root" if reduce else "chain from the root"
    # The chain's links are ring hops but the last (back to the first rank), which it has not.
    links = [i for i in b.ring_positions(ranks) if i < len(ranks) - 1]
    for j, (a, z) in enumerate(segment_ranges(start, stop, segments)):
        for i in links:
            b.transfer(i + j, ranks[i], ranks[i + 1], a, z, reduce=reduce, label=what)


def _ring_shift(n: int, count: int, root: int, layout: Layout | None, rank: int | None) -> Schedule:
    """Send/recv as nccl-tests' ``sendrecv.cu``: one step, rank r sends its input to r+1 (into the
    output region) and receives r-1's; in rank order whatever the layout, because the op is defined on
    ranks. One rank copies its input to its output."""
    b = RoundBuilder(n, rank)
    for r in b.ring_positions(range(n)):
        b.transfer(0, r, (r + 1) % n, 0, count, reduce=False, label="shift one rank along", dst_start=count)
    return b.build(Op.SENDRECV, "ring", count, root=root, layout=layout_name(layout))


def build_ring(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
    rank: int | None = None,
) -> Schedule:
    """Ring schedule for any op; see the module docstring. Raises ConfigError for a layout of another size."""
    check_count_and_segments(count, segments)
    n = world_size
    if op is Op.SENDRECV:
        return _ring_shift(n, count, root, layout, rank)
    rings = layout_rings(layout, n)
    b = RoundBuilder(n, rank)
    regions = chunk_bounds(count, len(rings))
    # Rank r's chunk cut once into one part per channel (not once per channel: O(n x channels^2)).
    owner_parts = [split(a, z, len(rings)) for a, z in chunk_bounds(count, n)] if op in _CHUNKED else []
    for k, ring in enumerate(rings):
        if op in (Op.ALL_REDUCE,):
            lo, hi = regions[k]
            pieces = split(lo, hi, n)
            owned = {ring[p]: pieces[p] for p in range(n)}
            _reduce_scatter(b, ring, owned, 0)
            _all_gather(b, ring, owned, n - 1)
        elif op in _CHUNKED:
            # Rank r's chunk is fixed by the op; channel k carries the k-th part of every chunk.
            owned = {r: owner_parts[r][k] for r in range(n)}
            if op is Op.REDUCE_SCATTER:
                _reduce_scatter(b, ring, owned, 0)
            else:
                _all_gather(b, ring, owned, 0)
        else:
            pos = ring.index(root)
            lo, hi = regions[k]
            if op is Op.BROADCAST:
                chain(b, [ring[(pos + i) % n] for i in range(n)], lo, hi, segments, reduce=False)
            else:
                chain(b, [ring[(pos + 1 + i) % n] for i in range(n)], lo, hi, segments, reduce=True)
    params: tuple[tuple[str, int], ...] = (("channels", len(rings)),)
    if op in (Op.BROADCAST, Op.REDUCE):
        params += (("segments", segments),)
    return b.build(op, "ring", count, root=root, layout=layout_name(layout), params=params)


# -- closed-form costs (p ranks, n bytes, k segments) ----------------------------------------------


def _all_reduce_cost(p: int, n: float, k: int) -> CostTerms:
    f = (p - 1) / p
    return CostTerms(2.0 * (p - 1), 2 * f * n, f * n)


def _reduce_scatter_cost(p: int, n: float, k: int) -> CostTerms:
    f = (p - 1) / p
    return CostTerms(float(p - 1), f * n, f * n)


def _all_gather_cost(p: int, n: float, k: int) -> CostTerms:
    return CostTerms(float(p - 1), (p - 1) / p * n, 0.0)


def _broadcast_cost(p: int, n: float, k: int) -> CostTerms:
    # A ring used for a rooted op is a chain of p-1 hops, pipelined in k segments.
    return tree_phase(p - 1, 1, n, k, False)


def _reduce_cost(p: int, n: float, k: int) -> CostTerms:
    return tree_phase(p - 1, 1, n, k, True)


def _sendrecv_cost(p: int, n: float, k: int) -> CostTerms:
    # One step: every rank's port sends its whole buffer and takes in its neighbour's.
    return CostTerms(1.0, n, 0.0)


RING = AlgorithmSpec(
    name="ring",
    ops=CLASSIC_OPS | {Op.SENDRECV},
    builder=build_ring,
    summary="neighbours only: 2(n-1) steps, 2(n-1)/n of the buffer per link (bandwidth-optimal, latency-poor); "
    "send/recv: one shift to rank+1",
    costs=CostFormulas(
        all_reduce=_all_reduce_cost,
        reduce_scatter=_reduce_scatter_cost,
        all_gather=_all_gather_cost,
        broadcast=_broadcast_cost,
        reduce=_reduce_cost,
        sendrecv=_sendrecv_cost,
    ),
    segmented=True,
)

SPECS: tuple[AlgorithmSpec, ...] = (RING,)
