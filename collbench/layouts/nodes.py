"""Layouts past :data:`~collbench.layouts.fabric.MAX_LAYOUT_RANKS` ranks, planned over nodes.

The capacity model of :mod:`collbench.layouts.fabric` holds n x n hops (about 1 GB at 4,096 ranks) and
the all-to-all's greedy order n(n-1) pairs; neither is made here. The layout is built as NCCL builds
its rings and trees between nodes (NVIDIA/nccl src/graph/connect.cc: ``connectRings`` joins every
channel's intra-node ring, node after node in node order; ``connectTrees`` lays the double binary tree
of src/graph/trees.cc over the nodes and a chain inside each):

* **Inside a node**, the rings of that node alone (the single-host search of :mod:`collbench.layouts.rings`
  on the node's own links): channel c's chain through the node is its c-th ring cut open at the node's
  first rank. Nodes with the same hardware (links within 5% alike: :data:`SAME_NODE_STEP`) share one
  search, the first such node's: a node of 8 GPUs costs one search whatever the node count.
* **Between nodes**, one order of the nodes for every channel, from the links between hosts
  (``Topology.node_links``: a default and the pairs that differ; links between ranks of two hosts,
  where a file lists them, count as their pair of hosts' slowest; else the hosts' NICs): greedy,
  the widest link from the last node placed (lowest node first among equals: on an even network, rank
  order, as NCCL's), then its slowest links exchanged away by reversing a stretch of the order where
  that makes both new links faster (2-opt). O(nodes^2) time, O(nodes) memory: one row of node links
  at a time.
* **Bandwidth.** A channel gets the smaller of its chains' bandwidth and its share of the network:
  the order's slowest link between nodes split among the channels (they leave a node through the
  same NICs). Channels are added while they add bandwidth in all.
* **Trees**: :func:`~collbench.layouts.multinode.chain_trees` over the nodes in the ring's order,
  chains of the first channel.
* **The all-to-all**: the rule of :class:`~collbench.layouts.exchange.NodeExchange` (nodes of one size),
  which each rank applies to itself; nodes of different sizes keep the builder's round-robin order.

Rank 0 plans in O(nodes^2 + ranks) time and holds O(ranks) (plus one node's fabric per kind of node).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from collbench.errors import ConfigError
from collbench.layouts.fabric import MAX_LAYOUT_RANKS, fabric_from_topology, nic_bandwidth_gbps
from collbench.layouts.model import Layout
from collbench.layouts.multinode import chain_trees
from collbench.layouts.rings import Channel, pack_channels
from collbench.topology.model import DEFAULT_BANDWIDTH_GBPS, Device, Link, LinkKind, Topology

_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class NodeLinks:
    """The bandwidth between every pair of nodes, O(nodes + pairs named): a base (the default link
    between hosts, or the slower of the two hosts' NICs) and the pairs that differ."""

    base_gbps: float | None
    """The default link between hosts (GB/s per direction); None: the slower NIC of the two."""
    nic_gbps: np.ndarray
    """Per node, its fastest NIC (GB/s per direction)."""
    named: tuple[dict[int, float], ...]
    """Per node, the nodes whose link to it is given (a node link, or links between their ranks)."""

    def row(self, a: int) -> np.ndarray:
        """GB/s from node ``a`` to every node (its own entry 0)."""
        if self.base_gbps is not None:
            out = np.full(len(self.nic_gbps), self.base_gbps)
        else:
            out = np.minimum(self.nic_gbps, self.nic_gbps[a])
        for b, gbps in self.named[a].items():
            out[b] = gbps
        out[a] = 0.0
        return out

    def between(self, a: int, b: int) -> float:
        got = self.named[a].get(b)
        if got is not None:
            return got
        if self.base_gbps is not None:
            return self.base_gbps
        return float(min(self.nic_gbps[a], self.nic_gbps[b]))


def node_groups(topology: Topology) -> list[tuple[int, ...]]:
    """The ranks of every host, hosts in the order of their first rank (as ``host_groups`` of a fabric)."""
    groups: dict[str, list[int]] = {}
    for r, d in enumerate(topology.rank_devices):
        groups.setdefault(d.host or topology.host, []).append(r)
    return [tuple(g) for g in groups.values()]


def _host_of(topology: Topology) -> dict[str, str]:
    return {d.id: d.host or topology.host for d in topology.devices}


def node_links(topology: Topology, hosts: Sequence[str]) -> NodeLinks:
    """The :class:`NodeLinks` between ``hosts`` (node k is ``hosts[k]``)."""
    index = {h: k for k, h in enumerate(hosts)}
    nic = np.full(len(hosts), -1.0)
    host_of = _host_of(topology)
    for dev in topology.nics:
        k = index.get(host_of[dev.id])
        if k is not None:
            nic[k] = max(nic[k], nic_bandwidth_gbps(dev))
    nic[nic < 0] = DEFAULT_BANDWIDTH_GBPS[LinkKind.NET]
    named: list[dict[int, float]] = [{} for _ in hosts]
    for nl in topology.node_links:
        if nl.a is not None and nl.b is not None and nl.a in index and nl.b in index:
            a, b = index[nl.a], index[nl.b]
            named[a][b] = named[b][a] = nl.bandwidth_gbps
    # Links listed between ranks of two hosts replace their hosts' node link (as in the fabric): the
    # slowest of them stands for the pair of nodes.
    listed: dict[tuple[int, int], float] = {}
    ranks = {d.id for d in topology.rank_devices}
    for link in topology.links:
        if link.a in ranks and link.b in ranks:
            ha, hb = index.get(host_of[link.a]), index.get(host_of[link.b])
            if ha is not None and hb is not None and ha != hb:
                key = (min(ha, hb), max(ha, hb))
                listed[key] = min(listed.get(key, math.inf), link.bandwidth_gbps)
    for (a, b), gbps in listed.items():
        named[a][b] = named[b][a] = gbps
    default = topology.default_node_link
    return NodeLinks(
        base_gbps=default.bandwidth_gbps if default is not None else None, nic_gbps=nic, named=tuple(named)
    )


def node_order(links: NodeLinks) -> list[int]:
    """The order of the nodes around the ring (see the module): node 0 first."""
    m = len(links.nic_gbps)
    order = [0]
    free = np.ones(m, dtype=bool)
    free[0] = False
    for _ in range(m - 1):
        row = np.where(free, links.row(order[-1]), -1.0)
        nxt = int(np.argmax(row))  # the first of the widest: rank order among equals
        order.append(nxt)
        free[nxt] = False
    found = _two_opt(order, links)
    # Rank order (NCCL's) stays where the search finds no better ring: none wider, nor as wide with
    # less time on its links (a greedy can do worse than the order it starts from).
    plain = list(range(m))
    wide, found_wide = _bottleneck(plain, links), _bottleneck(found, links)
    if wide > found_wide + _EPS or (wide >= found_wide - _EPS and _slowness(plain, links) <= _slowness(found, links)):
        return plain
    return found


def _slowness(order: list[int], links: NodeLinks) -> float:
    """The sum of 1/bandwidth over the ring's links between nodes (a tie-break at equal bottleneck)."""
    m = len(order)
    return sum(1.0 / max(links.between(order[k], order[(k + 1) % m]), 1e-9) for k in range(m))


def _bottleneck(order: list[int], links: NodeLinks) -> float:
    m = len(order)
    return min((links.between(order[k], order[(k + 1) % m]) for k in range(m)), default=math.inf)


def _two_opt(order: list[int], links: NodeLinks) -> list[int]:
    """Exchange the ring's slowest links away: for the slowest link (a, b) at positions i, i + 1, the
    position j whose reversal of ``order[i+1..j]`` makes links (a, order[j]) and (b, order[j+1]) both
    faster than (a, b), the wider first; until none does. Each step O(nodes); at most nodes steps."""
    m = len(order)
    if m < 4:
        return order
    ring = np.asarray(order)
    for _ in range(m):
        hops = np.asarray([links.between(int(ring[k]), int(ring[(k + 1) % m])) for k in range(m)])
        i = int(np.argmin(hops))
        worst = hops[i]
        if i == m - 1:  # the closing link: turn the ring so it is inside the order (node 0 moves)
            ring = np.roll(ring, 1)
            i = 0
        a, b = int(ring[i]), int(ring[i + 1])
        after = np.roll(ring, -1)  # after[j] = ring[j + 1]
        gain = np.minimum(links.row(a)[ring], links.row(b)[after])
        gain[: i + 2] = -1.0  # j > i + 1 (j = i + 1 changes nothing)
        j = int(np.argmax(gain))
        if gain[j] <= worst + _EPS:
            break
        ring[i + 1 : j + 1] = ring[i + 1 : j + 1][::-1].copy()
    start = int(np.flatnonzero(ring == 0)[0])
    return [int(x) for x in np.roll(ring, -start)]


def _node_topology(topology: Topology, host: str, devices: list[Device], links: list[Link]) -> Topology:
    return Topology(host=host, devices=tuple(devices), links=tuple(links), source=topology.source)


SAME_NODE_STEP = 1.05
"""Links within nodes whose bandwidths round to the same power of this (5% steps) count as the same
for sharing a node's search: a probe measures every node's links anew, with a few percent of noise,
and 2,048 searches of 0.2 s each are what sharing avoids."""


def _signature(devices: list[Device], links: list[Link]) -> tuple[object, ...]:
    """What a node's search depends on, without names (GPU ids, ``rank 17``): the same for nodes of
    the same hardware, their links' bandwidth in steps of :data:`SAME_NODE_STEP`."""
    local = {d.id: k for k, d in enumerate(devices)}
    kinds = tuple((d.kind, d.numa_node, d.cpus, d.extra) for d in devices)
    step = math.log(SAME_NODE_STEP)
    hops = tuple(
        sorted(
            (
                local[lk.a],
                local[lk.b],
                lk.kind,
                round(math.log(lk.bandwidth_gbps) / step) if lk.bandwidth_gbps > 0 else None,
            )
            for lk in links
        )
    )
    return kinds, hops


def node_channels(
    topology: Topology, nodes: list[tuple[int, ...]], hosts: Sequence[str], channels: int | None
) -> list[list[Channel]]:
    """Per node, the rings of the node alone over its ranks' positions in it (0..p-1), fastest first."""
    host_of = _host_of(topology)
    devices: dict[str, list[Device]] = {h: [] for h in hosts}
    for d in topology.devices:
        devices.setdefault(host_of[d.id], []).append(d)
    links: dict[str, list[Link]] = {h: [] for h in hosts}
    for lk in topology.links:
        ha, hb = host_of[lk.a], host_of[lk.b]
        if ha == hb:
            links.setdefault(ha, []).append(lk)
    cache: dict[tuple[object, ...], list[Channel]] = {}
    out: list[list[Channel]] = []
    for host, members in zip(hosts, nodes, strict=True):
        key = (len(members), _signature(devices[host], links[host]))
        found = cache.get(key)
        if found is None:
            found = _one_node(_node_topology(topology, host, devices[host], links[host]), channels)
            cache[key] = found
        out.append(found)
    return out


def _one_node(node: Topology, channels: int | None) -> list[Channel]:
    p = len(node.rank_devices)
    if p == 1:
        return [Channel(order=(0,), bandwidth_gbps=math.inf)]  # no hop inside: the network decides
    if p > MAX_LAYOUT_RANKS:
        raise ConfigError(
            f"a host of the topology has {p} ranks; layouts are computed for at most {MAX_LAYOUT_RANKS} on one host"
        )
    found = pack_channels(fabric_from_topology(node), channels=channels)
    return found or [Channel(order=tuple(range(p)), bandwidth_gbps=0.0)]


def _chain(order: tuple[int, ...], members: tuple[int, ...]) -> tuple[int, ...]:
    """The ring over a node's positions cut open at its first rank, as the node's ranks."""
    start = order.index(0)
    return tuple(members[k] for k in order[start:] + order[:start])


def _channel_count(intra: list[float], net_gbps: float, channels: int | None) -> int:
    if channels is not None:
        return channels
    best, best_total = 1, -1.0
    for k in range(1, len(intra) + 1):
        total = sum(min(bw, net_gbps / k) for bw in intra[:k])
        if total > best_total * (1 + 1e-9) + _EPS:
            best, best_total = k, total
    return best


@dataclass(frozen=True, slots=True)
class NodesPlan:
    """A layout planned over nodes, with its channels and the nodes' order (for checks)."""

    layout: Layout
    channels: tuple[Channel, ...]
    node_order: tuple[int, ...]


def plan_over_nodes(topology: Topology, *, channels: int | None = None) -> NodesPlan:
    """The layout of every rank device of ``topology``, planned over its hosts (see the module).

    Raises ConfigError for a topology on one host (past 2,048 ranks) or a host past 2,048 ranks.
    """
    n = len(topology.rank_devices)
    nodes = node_groups(topology)
    if len(nodes) == 1:
        raise ConfigError(
            f"the topology has {n} ranks on one host; layouts on one host are computed for at most {MAX_LAYOUT_RANKS}"
        )
    hosts = [topology.rank_devices[node[0]].host or topology.host for node in nodes]
    links = node_links(topology, hosts)
    order = node_order(links)
    m = len(order)
    net = _bottleneck(order, links)
    per_node = node_channels(topology, nodes, hosts, channels)
    widest = max(range(m), key=lambda a: len(per_node[a]))
    # A channel's chains' bandwidth: the slowest node's c-th ring (a node with fewer rings reuses them).
    intra = [min(found[c % len(found)].bandwidth_gbps for found in per_node) for c in range(len(per_node[widest]))]
    k = _channel_count(intra, net, channels)
    rings: list[Channel] = []
    for c in range(k):
        order_c: list[int] = []
        for a in order:
            found = per_node[a]
            order_c.extend(_chain(found[c % len(found)].order, nodes[a]))
        rings.append(Channel(order=tuple(order_c), bandwidth_gbps=min(intra[c % len(intra)], net / k)))
    chains = [_chain(per_node[a][0].order, nodes[a]) for a in order]
    trees = chain_trees(chains, n)
    equal = len({len(node) for node in nodes}) == 1
    layout = Layout(
        rings=tuple(c.order for c in rings),
        trees=trees,
        name="topology",
        ring_bandwidths_gbps=tuple(c.bandwidth_gbps for c in rings),
        nodes=tuple(nodes),
        exchange_by_nodes=equal,
    )
    return NodesPlan(layout=layout, channels=tuple(rings), node_order=tuple(order))
