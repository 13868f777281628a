"""The layout collbench uses on a topology: ring orders (channels, fastest first) and two trees.

One host: rings from the exact (or, past 10 ranks, heuristic) search of :mod:`collbench.layouts.rings`;
trees are NCCL's double binary tree laid along the best ring. Several hosts: node chains joined through
the NICs (:mod:`collbench.layouts.multinode`), and the double binary tree over nodes with a chain per
node.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.errors import ConfigError
from collbench.layouts.exchange import exchange_order
from collbench.layouts.fabric import MAX_LAYOUT_RANKS, RingFabric, fabric_from_topology
from collbench.layouts.model import Layout
from collbench.layouts.multinode import host_groups, multinode_ring_search, node_aware_trees, ring_order_trees
from collbench.layouts.nodes import plan_over_nodes
from collbench.layouts.rings import MAX_CHANNELS, Channel, pack_channels
from collbench.topology.model import Topology


@dataclass(frozen=True, slots=True)
class LayoutPlan:
    """A layout with what it was computed from (for rendering and checks)."""

    layout: Layout
    fabric: RingFabric
    channels: tuple[Channel, ...]
    topology: Topology

    @property
    def ring_bandwidth_gbps(self) -> float:
        """Total bandwidth of all channels, GB/s per direction."""
        return sum(c.bandwidth_gbps for c in self.channels)


def check_request(topology: Topology, world_size: int, channels: int | None) -> None:
    """Raise ConfigError for a world size or channel count the topology cannot give."""
    have = len(topology.rank_devices)
    if have == 0:
        raise ConfigError("the topology has no GPUs and no CPU ranks: nothing to lay out")
    if not 1 <= world_size <= have:
        raise ConfigError(f"asked for {world_size} ranks, the topology has {have} rank devices; use --ranks 1..{have}")
    if channels is not None and not 1 <= channels <= MAX_CHANNELS:
        raise ConfigError(f"--channels must be between 1 and {MAX_CHANNELS}, got {channels}")


def plan(topology: Topology, world_size: int, *, channels: int | None = None) -> LayoutPlan:
    """Compute the layout of the first ``world_size`` rank devices of ``topology`` with its details.

    Raises ConfigError when ``world_size`` is not 1..(number of rank devices) or ``channels`` is not
    1..32.
    """
    check_request(topology, world_size, channels)
    topo = topology.subset(world_size) if world_size < len(topology.rank_devices) else topology
    fabric = fabric_from_topology(topo)
    multihost = len(set(fabric.hosts)) > 1
    if world_size == 1:
        found = [Channel(order=(0,), bandwidth_gbps=0.0)]
    else:
        search = multinode_ring_search if multihost else None
        found = pack_channels(fabric, channels=channels, ring_search=search)
    if not found:  # no path between some ranks: still lay them out, at zero bandwidth
        found = [Channel(order=tuple(range(world_size)), bandwidth_gbps=0.0)]
    best = found[0].order
    trees = node_aware_trees(fabric, best) if multihost else ring_order_trees(best)
    rounds, spread = exchange_order(fabric.bandwidth_gbps)
    layout = Layout(
        rings=tuple(c.order for c in found),
        trees=trees,
        name="topology",
        ring_bandwidths_gbps=tuple(c.bandwidth_gbps for c in found),
        exchange_rounds=rounds,
        exchange_spread=spread,
        nodes=tuple(host_groups(fabric)),
    )
    return LayoutPlan(layout=layout, fabric=fabric, channels=tuple(found), topology=topo)


def plan_layout(topology: Topology, world_size: int, *, channels: int | None = None) -> Layout:
    """The ``topology`` layout over its first ``world_size`` rank devices (ranks index them).

    Rings fastest first with ``ring_bandwidths_gbps`` filled (GB/s per direction, from the capacity
    model of :mod:`collbench.layouts.rings`); ``channels`` fixes the ring count (default: as many as
    pay off); trees are the double binary tree, node-aware on several hosts; the all-to-all's exchange
    rounds group the slowest pairs (``layouts/exchange.py``).
    Raises ConfigError for a world size or channel count the topology cannot give.
    """
    if world_size > MAX_LAYOUT_RANKS:  # no n x n model at this size: planned over nodes
        check_request(topology, world_size, channels)
        topo = topology.subset(world_size) if world_size < len(topology.rank_devices) else topology
        return plan_over_nodes(topo, channels=channels).layout
    return plan(topology, world_size, channels=channels).layout
