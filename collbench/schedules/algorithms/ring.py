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

from collections.abc import Callable

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
from collbench.schedules.ops import Op, chunk_bounds
from collbench.schedules.spec import AlgorithmSpec

Params = tuple[tuple[str, int], ...]
"""What a schedule records of how it was built (its channels, its segments)."""
Phase = Callable[[RoundBuilder, tuple[int, ...], dict[int, tuple[int, int]], int], None]
"""A ring phase: (builder, ring, each rank's owned range, first round)."""
OpBuild = Callable[[RoundBuilder, Layout | None, int, int, int], Params]
"""One op's build: (builder, layout, count, root, segments) -> the schedule's params."""


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


def _ring_shift(b: RoundBuilder, layout: Layout | None, count: int, root: int, segments: int) -> Params:
    """Send/recv as nccl-tests' ``sendrecv.cu``: one step, rank r sends its input to r+1 (into the
    output region) and receives r-1's; in rank order whatever the layout, because the op is defined on
    ranks. One rank copies its input to its output."""
    n = b.world_size
    for r in b.ring_positions(range(n)):
        b.transfer(0, r, (r + 1) % n, 0, count, reduce=False, label="shift one rank along", dst_start=count)
    return ()


def _all_reduce(b: RoundBuilder, layout: Layout | None, count: int, root: int, segments: int) -> Params:
    """Each ring (channel) reduce-scatters then all-gathers its region of the buffer, cut in n pieces."""
    n = b.world_size
    rings = layout_rings(layout, n)
    for ring, (lo, hi) in zip(rings, chunk_bounds(count, len(rings)), strict=True):
        pieces = split(lo, hi, n)
        owned = {ring[p]: pieces[p] for p in range(n)}
        _reduce_scatter(b, ring, owned, 0)
        _all_gather(b, ring, owned, n - 1)
    return (("channels", len(rings)),)


def _chunked(phase: Phase) -> OpBuild:
    """Reduce-scatter or all-gather: rank r's chunk is fixed by the op; channel k carries the k-th part
    of every chunk."""

    def build(b: RoundBuilder, layout: Layout | None, count: int, root: int, segments: int) -> Params:
        n = b.world_size
        rings = layout_rings(layout, n)
        # Rank r's chunk cut once into one part per channel (not once per channel: O(n x channels^2)).
        owner_parts = [split(a, z, len(rings)) for a, z in chunk_bounds(count, n)]
        for k, ring in enumerate(rings):
            phase(b, ring, {r: owner_parts[r][k] for r in range(n)}, 0)
        return (("channels", len(rings)),)

    return build


def _chained(*, reduce: bool) -> OpBuild:
    """Broadcast (from the root along each ring) or reduce (along each ring to the root), pipelined."""

    def build(b: RoundBuilder, layout: Layout | None, count: int, root: int, segments: int) -> Params:
        n = b.world_size
        rings = layout_rings(layout, n)
        for ring, (lo, hi) in zip(rings, chunk_bounds(count, len(rings)), strict=True):
            # The chain starts at the root (broadcast) or just after it, to end there (reduce).
            pos = ring.index(root) + (1 if reduce else 0)
            chain(b, [ring[(pos + i) % n] for i in range(n)], lo, hi, segments, reduce=reduce)
        return (("channels", len(rings)), ("segments", segments))

    return build


_BUILDS: dict[Op, OpBuild] = {
    Op.ALL_REDUCE: _all_reduce,
    Op.REDUCE_SCATTER: _chunked(_reduce_scatter),
    Op.ALL_GATHER: _chunked(_all_gather),
    Op.BROADCAST: _chained(reduce=False),
    Op.REDUCE: _chained(reduce=True),
    Op.SENDRECV: _ring_shift,
}
"""How ring builds each op it does: the one place that says so (its ops are these keys)."""


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
    b = RoundBuilder(world_size, rank)
    params = _BUILDS[op](b, layout, count, root, segments)
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
    ops=frozenset(_BUILDS),
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
