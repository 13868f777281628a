"""Ring orders from a topology: which order of ranks carries the most data, channel by channel.

Rings are searched on the capacity model of :mod:`collbench.layouts.fabric` (per-direction resources:
directed pairs, ports of shared media, PCIe domain boundaries up to the socket link, NIC ports).

At equal bandwidth the search prefers the ring whose hops are faster on the whole (lowest sum of
1/bandwidth over its hops), which penalises every slow hop: on two PCIe switch trees joined by SYS it
picks the ring that crosses SYS twice, not four times.

Exact search (:func:`best_ring`) up to :data:`EXACT_MAX_RANKS` ranks: a depth-first search over orders
that starts at rank 0 (rotations are the same ring), skips mirror images when the residual capacities
are symmetric, tries widest hops first and prunes any prefix that cannot beat the best ring found
(which starts as the heuristic's). Larger machines use a greedy widest-next-hop construction followed
by 2-opt improvement up to 64 ranks (:func:`heuristic_ring`); several hosts use the node-chain heuristic of
:mod:`collbench.layouts.multinode`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from collbench.layouts.fabric import RingFabric

EXACT_MAX_RANKS = 10
"""Rings over at most this many ranks are searched exactly."""
TWO_OPT_MAX_RANKS = 64
"""The heuristic improves its ring by 2-opt up to this many ranks (each round costs n^3)."""
MAX_CHANNELS = 32
"""NCCL's MAXCHANNELS: the most rings a layout holds."""
MIN_CHANNEL_SHARE = 0.1
"""With no channel count given, a further channel must add at least this share of the first one's
bandwidth to pay off (a thin channel still costs a kernel block and a latency)."""

_EPS = 1e-9
RingSearch = Callable[["RingFabric", list[float], float], tuple[tuple[int, ...], float]]
"""Finds one ring on residual capacities with a bandwidth cap: (order, bandwidth GB/s)."""


@dataclass(frozen=True, slots=True)
class Channel:
    """One ring: the order of ranks and the bandwidth it was given (GB/s per direction)."""

    order: tuple[int, ...]
    bandwidth_gbps: float


# -- evaluating rings ------------------------------------------------------------------------------


def ring_bandwidth(fabric: RingFabric, order: tuple[int, ...] | list[int], residual: list[float]) -> float:
    """The bandwidth a ring gets from the residual capacities: its worst share of any resource."""
    uses: dict[int, int] = {}
    n = len(order)
    for k in range(n):
        for r in fabric.hop(order[k], order[(k + 1) % n]):
            uses[r] = uses.get(r, 0) + 1
    if n < 2:
        return 0.0
    return min(residual[r] / c for r, c in uses.items())


def take(fabric: RingFabric, order: tuple[int, ...], bandwidth_gbps: float, residual: list[float]) -> None:
    """Take a channel's bandwidth off every resource of every hop of ``order`` (in place)."""
    n = len(order)
    for k in range(n):
        for r in fabric.hop(order[k], order[(k + 1) % n]):
            residual[r] = max(0.0, residual[r] - bandwidth_gbps)


def link_loads(fabric: RingFabric, channels: list[Channel] | tuple[Channel, ...]) -> list[float]:
    """Bandwidth the channels draw from every resource (GB/s), indexed like ``capacity_gbps``."""
    load = [0.0] * len(fabric.capacity_gbps)
    for ch in channels:
        n = len(ch.order)
        for k in range(n):
            for r in fabric.hop(ch.order[k], ch.order[(k + 1) % n]):
                load[r] += ch.bandwidth_gbps
    return load


def _inv(bw: float) -> float:
    return 1.0 / bw if bw > 0 else 1e9


RingKey = tuple[float, float, float, float]


def ring_key(fabric: RingFabric, order: tuple[int, ...] | list[int], residual: list[float], cap: float) -> RingKey:
    """How good a ring is, larger is better: (bandwidth capped at ``cap``, bandwidth uncapped,
    -sum of 1/bandwidth over its hops, sum of what its hops have left).

    The uncapped term and the headroom matter for equal-speed packing: among rings that all reach
    the cap, take the one that uses the least loaded links, so later channels still fit.
    """
    n = len(order)
    hops = [(order[k], order[(k + 1) % n]) for k in range(n)]
    inv = sum(_inv(fabric.bandwidth_gbps[i][j]) for i, j in hops)
    room = sum(fabric.hop_bandwidth(residual, i, j) for i, j in hops)
    bw = ring_bandwidth(fabric, order, residual)
    return (min(cap, bw), bw, -inv, room)


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= _EPS * max(1.0, abs(a), abs(b))


def _better(a: RingKey, b: RingKey) -> bool:
    for x, y in zip(a, b, strict=True):
        if not _same(x, y):
            return x > y
    return False


# -- searching one ring ------------------------------------------------------------------------------


def best_ring(
    fabric: RingFabric,
    residual: list[float],
    *,
    ranks: tuple[int, ...] | None = None,
    cap_gbps: float = math.inf,
) -> tuple[tuple[int, ...], float]:
    """The best ring over ``ranks`` (default: all) on the residual capacities: (order, bandwidth GB/s).

    Exact up to :data:`EXACT_MAX_RANKS` ranks, heuristic above. ``cap_gbps`` caps the bandwidth a
    channel may take (for equal-speed packing). The order starts at the smallest rank.
    """
    members = tuple(range(fabric.n)) if ranks is None else tuple(sorted(ranks))
    if len(members) <= 2:
        return members, (min(cap_gbps, ring_bandwidth(fabric, members, residual)) if len(members) == 2 else 0.0)
    seed = heuristic_ring(fabric, residual, members, cap_gbps)
    if len(members) > EXACT_MAX_RANKS:
        return seed, ring_key(fabric, seed, residual, cap_gbps)[0]
    order = _exact_ring(fabric, residual, members, cap_gbps, seed)
    return order, ring_key(fabric, order, residual, cap_gbps)[0]


def _exact_ring(
    fabric: RingFabric, residual: list[float], members: tuple[int, ...], cap: float, seed: tuple[int, ...]
) -> tuple[int, ...]:
    n = len(members)
    hop_res = fabric.hop_resources
    multi = fabric.multi_use
    pairs = [(i, j) for i in members for j in members if i != j]
    # Single-use resources (the pair, ports: a ring leaves and enters every rank once) fold into one
    # number per hop; only domain boundaries and NIC ports can be used twice by one ring, so only
    # they are counted along the path.
    single = {(i, j): min(residual[r] for r in hop_res[i][j] if not multi[r]) for i, j in pairs}
    shared = {(i, j): tuple(r for r in hop_res[i][j] if multi[r]) for i, j in pairs}
    inv = {(i, j): _inv(fabric.bandwidth_gbps[i][j]) for i, j in pairs}
    min_inv = min(inv.values())
    max_room = max(fabric.hop_bandwidth(residual, i, j) for i, j in pairs)
    # A mirror image uses the reverse of every hop; it is the same ring when every resource has as
    # much left as its reverse (and the static bandwidths agree), so only one of the two is searched.
    used = {r for i, j in pairs for r in hop_res[i][j]}
    symmetric = all(abs(residual[r] - residual[fabric.mirror[r]]) <= _EPS for r in used) and all(
        abs(inv[(i, j)] - inv[(j, i)]) < 1e-12 for i, j in pairs
    )
    neighbours = {i: sorted((j for j in members if j != i), key=lambda j: -single[(i, j)]) for i in members}
    start = members[0]
    best_key: list[float] = list(ring_key(fabric, seed, residual, cap))
    best_order = list(seed)
    path = [start]
    visited = {start}
    counts: dict[int, int] = {}

    def worse(cb: float, ub: float) -> bool:
        """Whether a prefix with capped/uncapped bottlenecks cb/ub is already beaten."""
        if not _same(cb, best_key[0]):
            return cb < best_key[0]
        return not _same(ub, best_key[1]) and ub < best_key[1]

    def dfs(ub: float, inv_sum: float, room_sum: float) -> None:
        last = path[-1]
        if len(path) == n:
            if symmetric and path[1] > path[-1]:
                return
            b = min(ub, single[(last, start)])
            for r in shared[(last, start)]:
                b = min(b, residual[r] / (counts.get(r, 0) + 1))
            room = room_sum + fabric.hop_bandwidth(residual, last, start)
            key = (min(cap, b), b, -(inv_sum + inv[(last, start)]), room)
            if _better(key, (best_key[0], best_key[1], best_key[2], best_key[3])):
                best_key[:] = key
                best_order[:] = path
            return
        remaining = n - len(path)
        for j in neighbours[last]:
            if j in visited:
                continue
            b = min(ub, single[(last, j)])
            if min(cap, b) < best_key[0] and not _same(min(cap, b), best_key[0]):
                break  # neighbours are sorted widest first: the rest are no better
            for r in shared[(last, j)]:
                b = min(b, residual[r] / (counts.get(r, 0) + 1))
            if worse(min(cap, b), b):
                continue
            s = inv_sum + inv[(last, j)]
            tie = _same(min(cap, b), best_key[0]) and (_same(b, best_key[1]) or b <= best_key[1])
            if tie:
                bound = s + remaining * min_inv
                if bound > -best_key[2] and not _same(bound, -best_key[2]):
                    continue
                room = room_sum + fabric.hop_bandwidth(residual, last, j)
                if _same(bound, -best_key[2]) and room + remaining * max_room <= best_key[3] * (1 + _EPS):
                    continue
            else:
                room = room_sum + fabric.hop_bandwidth(residual, last, j)
            path.append(j)
            visited.add(j)
            for r in shared[(last, j)]:
                counts[r] = counts.get(r, 0) + 1
            dfs(b, s, room)
            for r in shared[(last, j)]:
                counts[r] -= 1
            visited.discard(j)
            path.pop()

    dfs(math.inf, 0.0, 0.0)
    return tuple(best_order)


def heuristic_ring(
    fabric: RingFabric, residual: list[float], members: tuple[int, ...], cap_gbps: float = math.inf
) -> tuple[int, ...]:
    """A good ring fast: widest-next-hop from a few starts, then 2-opt moves while they improve.

    The construction works on arrays (every hop's bandwidth at once, one vector step per rank), so it
    costs about n vector operations; 2-opt costs n^3 and runs up to :data:`TWO_OPT_MAX_RANKS` ranks.
    """
    n = len(members)
    if n <= 3:
        return tuple(members)
    idx = np.asarray(members)
    width = np.minimum(fabric.hop_bandwidth_matrix(residual)[np.ix_(idx, idx)], cap_gbps)
    static = fabric.bandwidth_table[np.ix_(idx, idx)]
    inv = np.where(static > 0, 1.0 / np.where(static > 0, static, 1.0), 1e9)
    best: tuple[int, ...] = tuple(members)
    best_key = ring_key(fabric, best, residual, cap_gbps)
    for s in range(min(n, 4 if n <= TWO_OPT_MAX_RANKS else 2)):
        order = tuple(members[k] for k in _widest_next_hop(width, inv, s))
        key = ring_key(fabric, order, residual, cap_gbps)
        if _better(key, best_key):
            best, best_key = order, key
    order_list = list(best)
    improved = n <= TWO_OPT_MAX_RANKS
    rounds = 0
    while improved and rounds < 4:
        improved, rounds = False, rounds + 1
        for a in range(1, n - 1):
            for b in range(a + 1, n):
                cand = order_list[:a] + order_list[a : b + 1][::-1] + order_list[b + 1 :]
                key = ring_key(fabric, cand, residual, cap_gbps)
                if _better(key, best_key):
                    order_list, best_key, improved = cand, key, True
    pos = order_list.index(min(order_list))
    return tuple(order_list[pos:] + order_list[:pos])


def _widest_next_hop(width: np.ndarray, inv: np.ndarray, start: int) -> list[int]:
    """Positions of a path from ``start``: each step the widest hop to an unvisited rank, then the
    lowest 1/bandwidth, then the lowest position."""
    n = width.shape[0]
    left = width.copy()
    left[:, start] = -np.inf
    path = [start]
    last = start
    for _ in range(n - 1):
        row = left[last]
        cand = np.flatnonzero(row == row.max())
        if len(cand) > 1:
            iv = inv[last, cand]
            cand = cand[iv == iv.min()]
        last = int(cand[0])
        left[:, last] = -np.inf
        path.append(last)
    return path


# -- several channels ------------------------------------------------------------------------------


def pack_channels(
    fabric: RingFabric,
    *,
    channels: int | None = None,
    ring_search: RingSearch | None = None,
) -> list[Channel]:
    """Rings (channels) maximising their total bandwidth, fastest first.

    Two packings are compared and the larger total wins (fewer channels at a tie, unless ``channels``
    asks for more): greedy (every channel takes the most it can from what earlier ones left) and
    equal-speed (NCCL's: as many channels as fit at a speed ``b1 / m``, b1 the best single ring's).
    ``channels=None`` stops when a channel adds less than :data:`MIN_CHANNEL_SHARE` of the first one.
    Raises ValueError for ``channels < 1``.
    """
    if channels is not None and channels < 1:
        raise ValueError(f"channels must be >= 1, got {channels}")
    search = ring_search or _flat_search
    limit = channels or MAX_CHANNELS
    greedy = _pack(fabric, search, limit, math.inf, channels is None)
    options = [greedy]
    if greedy:
        first = greedy[0].bandwidth_gbps
        for m in range(2, min(limit, 4 if channels is None else limit) + 1):
            options.append(_pack(fabric, search, limit, first / m, False))

    def score(chs: list[Channel]) -> tuple[float, int]:
        total = sum(c.bandwidth_gbps for c in chs)
        count = len(chs) if channels is not None else -len(chs)
        return (round(total, 6), count)

    best = max(options, key=score)
    return sorted(best, key=lambda c: -c.bandwidth_gbps)


def _flat_search(fabric: RingFabric, residual: list[float], cap: float) -> tuple[tuple[int, ...], float]:
    return best_ring(fabric, residual, cap_gbps=cap)


def _pack(fabric: RingFabric, search: RingSearch, limit: int, cap: float, stop_thin: bool) -> list[Channel]:
    residual = list(fabric.capacity_gbps)
    out: list[Channel] = []
    while len(out) < limit:
        order, bw = search(fabric, residual, cap)
        if bw <= _EPS:
            break
        if math.isfinite(cap) and bw < cap * (1 - 1e-6):
            break  # equal-speed packing: a slower channel does not fit
        if stop_thin and out and bw < MIN_CHANNEL_SHARE * out[0].bandwidth_gbps:
            break
        take(fabric, order, bw, residual)
        out.append(Channel(order=tuple(order), bandwidth_gbps=bw))
    return out
