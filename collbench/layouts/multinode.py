"""Rings and trees over several hosts: chains inside every node, joined through the NICs.

A ring over many nodes is searched like NCCL builds it: every channel enters each node on a GPU and
leaves it on a GPU, and walks through all the node's GPUs in between (a chain); the chains are joined
node after node into one ring by network hops that leave through the NIC closest to the exit GPU and
arrive through the NIC closest to the entry GPU. Per node and channel, the entry/exit pair is chosen
to get the most bandwidth out of the chain and the two NICs (what earlier channels left), so
successive channels spread over the NICs. Nodes with the same hardware and the same residual
capacities share one search (a cache keyed by those capacities): 64 identical nodes cost one node.

Nodes follow rank order around the ring (on a uniform network every order is the same ring), except
where the network between them is not uniform and they are few (up to :data:`ORDER_MAX_NODES`): then
the order of nodes whose ring gets the most bandwidth, rank order kept among equals. On the namespace
cluster (4 hosts of one rank each, pairs 1-2 and 3-0 at 40 Mbit/s, the others at 300) rank order runs
the ring through both slow pairs: 7x slower than 0-2-3-1 at every size, once the probe named each
host a node of its own.

Trees (:func:`node_aware_trees`): NCCL's double binary tree over nodes (trees.py), and inside each node
a chain of its GPUs hanging off the node's head GPU. The second tree uses every chain reversed, so the
two trees reach a node through different GPUs (and NICs).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from collbench.layouts.fabric import RingFabric
from collbench.layouts.rings import EXACT_MAX_RANKS, ring_bandwidth
from collbench.layouts.trees import double_binary_tree

_EPS = 1e-9
ORDER_MAX_NODES = 8
"""Up to this many nodes, every order of them around the ring is tried ((k-1)! rings, 5,040 at 8);
beyond, rank order (NCCL's too): a machine of that many nodes has a uniform fabric, or one whose
structure (rails, a fat tree) a search over node orders could not see anyway."""


def host_groups(fabric: RingFabric) -> list[tuple[int, ...]]:
    """The ranks of every host, hosts in the order of their first rank."""
    groups: dict[str, list[int]] = {}
    for r, host in enumerate(fabric.hosts):
        groups.setdefault(host, []).append(r)
    return [tuple(g) for g in groups.values()]


def _single(fabric: RingFabric, residual: list[float], i: int, j: int) -> float:
    return min(residual[r] for r in fabric.hop(i, j))


def best_chain(
    fabric: RingFabric, residual: list[float], members: tuple[int, ...], first: int, last: int
) -> tuple[tuple[int, ...], float]:
    """The widest path from ``first`` to ``last`` through all of ``members``: (path, bottleneck GB/s).

    Exact (depth-first, widest hops first, pruned by the best found) up to EXACT_MAX_RANKS members,
    greedy widest-next-hop above. At equal bottleneck, prefer the lower sum of 1/bandwidth.
    """
    if len(members) == 1:
        return (first,), math.inf
    if first == last:
        raise ValueError("a chain through several ranks needs two different ends")
    inner = [m for m in members if m not in (first, last)]
    bw = fabric.bandwidth_gbps
    # The search reads each hop's width many times: take them off the residual capacities once.
    width = {(i, j): _single(fabric, residual, i, j) for i in members for j in members if i != j}

    def inv(i: int, j: int) -> float:
        return 1.0 / bw[i][j] if bw[i][j] > 0 else 1e9

    if len(members) > EXACT_MAX_RANKS:
        path, left = [first], set(inner)
        while left:
            nxt = max(left, key=lambda j: (width[(path[-1], j)], -inv(path[-1], j), -j))
            path.append(nxt)
            left.discard(nxt)
        path.append(last)
        hops = [width[(a, b)] for a, b in itertools.pairwise(path)]
        return tuple(path), min(hops)

    min_inv = min(inv(i, j) for i in members for j in members if i != j)
    best_b, best_c, best_path = -1.0, math.inf, (first, *inner, last)
    path = [first]
    left = set(inner)

    def dfs(bott: float, cost: float) -> None:
        nonlocal best_b, best_c, best_path
        cur = path[-1]
        if not left:
            b = min(bott, width[(cur, last)])
            c = cost + inv(cur, last)
            if b > best_b + _EPS or (abs(b - best_b) <= _EPS and c < best_c - 1e-12):
                best_b, best_c, best_path = b, c, (*path, last)
            return
        for j in sorted(left, key=lambda j: -width[(cur, j)]):
            b = min(bott, width[(cur, j)])
            if b < best_b - _EPS:
                break
            c = cost + inv(cur, j)
            if abs(b - best_b) <= _EPS and c + len(left) * min_inv >= best_c - 1e-12:
                continue
            path.append(j)
            left.discard(j)
            dfs(b, c)
            left.add(j)
            path.pop()

    dfs(math.inf, 0.0)
    return best_path, best_b


def _net_room(fabric: RingFabric, residual: list[float], rank: int, *, leaving: bool) -> float:
    """What the NIC a rank uses to leave (or enter) its node has left, GB/s (inf without NICs)."""
    r = (fabric.nic_out if leaving else fabric.nic_in)[rank]
    return residual[r] if r >= 0 else math.inf


def _node_signature(fabric: RingFabric, residual: list[float], snapshot: np.ndarray, members: tuple[int, ...]) -> bytes:
    """The residual capacities a node's search depends on, in member order (for the cache).

    ``snapshot`` is ``residual`` as an array with +inf appended (what padding in the hop table reads).
    """
    idx = np.asarray(members)
    hops = snapshot[fabric.hop_table[np.ix_(idx, idx)]]
    rooms = [_net_room(fabric, residual, i, leaving=way) for i in members for way in (True, False)]
    return np.round(np.concatenate([hops.ravel(), rooms]), 9).tobytes()


def _node_chain(
    fabric: RingFabric, residual: list[float], members: tuple[int, ...], cap: float
) -> tuple[tuple[int, ...], float]:
    """The best chain through a node for one channel, with its entry and exit chosen (see module)."""
    if len(members) == 1:
        r = members[0]
        room = min(_net_room(fabric, residual, r, leaving=True), _net_room(fabric, residual, r, leaving=False))
        return members, room
    best: tuple[tuple[float, float], tuple[int, ...]] | None = None
    for first in members:
        into = _net_room(fabric, residual, first, leaving=False)
        for last in members:
            if last == first:
                continue
            room = min(cap, into, _net_room(fabric, residual, last, leaving=True))
            if best is not None and room < best[0][0] - _EPS:
                continue
            chain, bott = best_chain(fabric, residual, members, first, last)
            score = (min(room, bott), bott)
            if (
                best is None
                or score[0] > best[0][0] + _EPS
                or (abs(score[0] - best[0][0]) <= _EPS and score[1] > best[0][1] + _EPS)
            ):
                best = (score, chain)
    assert best is not None
    return best[1], best[0][0]


def multinode_ring_search(fabric: RingFabric, residual: list[float], cap: float) -> tuple[tuple[int, ...], float]:
    """One ring over all hosts on the residual capacities: (order, bandwidth GB/s, capped at ``cap``).

    A :data:`collbench.layouts.rings.RingSearch` for :func:`collbench.layouts.rings.pack_channels`.
    """
    cache: dict[tuple[int, bytes], tuple[int, ...]] = {}
    chains: list[tuple[int, ...]] = []
    snapshot = np.append(np.asarray(residual, dtype=float), np.inf)
    for members in host_groups(fabric):
        signature = (len(members), _node_signature(fabric, residual, snapshot, members))
        local = cache.get(signature)
        if local is None:
            chain, _ = _node_chain(fabric, residual, members, cap)
            # Cache positions inside the node, so an identical node reuses them with its own ranks.
            local = tuple(members.index(r) for r in chain)
            cache[signature] = local
        chains.append(tuple(members[p] for p in local))
    ring = _joined(chains)
    best = ring_bandwidth(fabric, ring, residual)
    if 2 < len(chains) <= ORDER_MAX_NODES:
        # The first node stays first (a ring has no start); permutations come in lexicographic order,
        # rank order first, and only a strictly wider ring replaces it.
        for rest in itertools.permutations(chains[1:]):
            other = _joined([chains[0], *rest])
            width = ring_bandwidth(fabric, other, residual)
            if width > best + _EPS:
                ring, best = other, width
    return ring, min(cap, best)


def _joined(chains: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The ring of node chains one after another, started at its smallest rank."""
    order = [r for chain in chains for r in chain]
    start = order.index(min(order))
    return tuple(order[start:] + order[:start])


def node_aware_trees(fabric: RingFabric, ring: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two trees over all ranks: a double binary tree over hosts, a chain inside every host.

    The chain of a host follows ``ring`` (the best channel's order, so chain hops are fast links), and
    so does the order of the hosts the tree over them is laid on; the first tree hangs each chain off
    its first GPU, the second off its last (chain reversed).
    """
    position = {r: k for k, r in enumerate(ring)}
    chains = [tuple(sorted(g, key=lambda r: position[r])) for g in host_groups(fabric)]
    # Nodes in the ring's order, so that tree edges join nodes the ring found close (as one host's
    # trees follow its ring): rank order where the ring keeps it.
    chains.sort(key=lambda chain: position[chain[0]])
    return chain_trees(chains, fabric.n)


def chain_trees(chains: list[tuple[int, ...]], n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """NCCL's double binary tree over the nodes in the order of ``chains`` (one per node, its ranks in
    chain order), each chain hanging off its first rank in the first tree and off its last (reversed)
    in the second: O(n)."""
    node_trees = double_binary_tree(len(chains))
    out: list[tuple[int, ...]] = []
    for t, node_parent in enumerate(node_trees):
        oriented = [c if t == 0 else c[::-1] for c in chains]
        parent = [-1] * n
        for h, chain in enumerate(oriented):
            ph = node_parent[h]
            parent[chain[0]] = -1 if ph == -1 else oriented[ph][0]
            for a, b in itertools.pairwise(chain):
                parent[b] = a
        out.append(tuple(parent))
    return out[0], out[1]


def ring_order_trees(ring: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The double binary tree on one host, over positions along ``ring`` (tree edges join ranks that
    are close on the ring, so they use the fast links the ring found)."""
    n = len(ring)
    out: list[tuple[int, ...]] = []
    for virtual in double_binary_tree(n):
        parent = [-1] * n
        for v, pv in enumerate(virtual):
            parent[ring[v]] = -1 if pv == -1 else ring[pv]
        out.append(tuple(parent))
    return out[0], out[1]
