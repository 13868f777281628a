"""plan_layout: rings fastest first, trees, several hosts (node chains through NICs, node trees)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _layout_topologies import cluster

from collbench.errors import ConfigError
from collbench.layouts.multinode import ORDER_MAX_NODES, host_groups
from collbench.layouts.plan import plan, plan_layout
from collbench.layouts.trees import tree_children, tree_depth
from collbench.runtime.probe import PairMeasure, measured_topology
from collbench.topology.model import Topology

SHARED = Path(__file__).resolve().parents[1] / "fixtures" / "topologies"


def _check_tree(parent: tuple[int, ...], n: int) -> None:
    assert len(parent) == n
    assert parent.count(-1) == 1
    tree_depth(parent)  # raises unless connected and acyclic


def test_single_host_layout_from_a_fixture() -> None:
    path = SHARED / "pcie8-pix-pxb.topo.txt"
    from collbench.topology.nvidia_smi import read_nvidia_smi_topo

    layout = plan_layout(read_nvidia_smi_topo(path), 8)
    assert layout.name == "topology"
    assert layout.world_size == 8
    assert len(layout.ring_bandwidths_gbps) == len(layout.rings) >= 1
    assert list(layout.ring_bandwidths_gbps) == sorted(layout.ring_bandwidths_gbps, reverse=True)
    assert len(layout.trees) == 2
    for t in layout.trees:
        _check_tree(t, 8)
    # Each rank is interior in at most one of the two trees (n even).
    inner = [{r for r, kids in enumerate(tree_children(t)) if kids} for t in layout.trees]
    assert not inner[0] & inner[1]


def test_first_ranks_only() -> None:
    layout = plan_layout(cluster(1, gpus=4), 3)
    assert layout.world_size == 3
    assert sorted(layout.rings[0]) == [0, 1, 2]


def test_several_hosts_ring_walks_each_node_as_one_chain() -> None:
    topo = cluster(4, gpus=4, nic_gbps=50.0)
    result = plan(topo, 16)
    hosts = result.fabric.hosts
    for ch in result.channels:
        order = ch.order
        n = len(order)
        net_hops = sum(1 for k in range(n) if hosts[order[k]] != hosts[order[(k + 1) % n]])
        assert net_hops == 4, "a ring enters and leaves every node once"
        # Leaving and entering nodes goes through the NIC closest to the GPU: bounded by the NIC.
        assert ch.bandwidth_gbps <= 50.0 + 1e-9
    # Four NICs per node, one channel per NIC pair at most: the network is the bottleneck.
    assert result.ring_bandwidth_gbps == pytest.approx(4 * 50.0)


def test_several_hosts_trees_span_nodes_with_a_chain_inside() -> None:
    topo = cluster(3, gpus=4)
    layout = plan_layout(topo, 12)
    fabric_hosts = [d.host for d in topo.rank_devices]
    for parent in layout.trees:
        _check_tree(parent, 12)
        children = tree_children(parent)
        for h in {h for h in fabric_hosts}:
            members = [r for r in range(12) if fabric_hosts[r] == h]
            # Inside a node: exactly one GPU hangs off another node (or is the root); the rest form
            # a chain (each has at most one child in its own node).
            heads = [r for r in members if parent[r] == -1 or fabric_hosts[parent[r]] != h]
            assert len(heads) == 1
            for r in members:
                assert sum(1 for c in children[r] if fabric_hosts[c] == h) <= 1
    # The two trees enter each node through different GPUs.
    heads = [{r for r in range(12) if t[r] == -1 or fabric_hosts[t[r]] != fabric_hosts[r]} for t in layout.trees]
    assert not heads[0] & heads[1]


def test_host_groups_follow_first_rank() -> None:
    result = plan(cluster(2, gpus=2), 4)
    assert host_groups(result.fabric) == [(0, 1), (2, 3)]


@pytest.mark.parametrize(("world", "channels"), [(0, None), (9, None), (4, 0), (4, 33)])
def test_bad_requests_raise_config_error(world: int, channels: int | None) -> None:
    with pytest.raises(ConfigError):
        plan_layout(cluster(2, gpus=4), world, channels=channels)


def test_one_rank() -> None:
    layout = plan_layout(cluster(1, gpus=2), 1)
    assert layout.rings == ((0,),)
    assert layout.trees == ((-1,), (-1,))


def _namespace_cluster(slow: set[tuple[int, int]], hosts: int = 4) -> Topology:
    """What ``discover --probe`` writes of the namespace cluster (benchmarks/netns.py): one CPU rank per
    host, the pairs in ``slow`` at 40 Mbit/s (0.0048 GB/s measured), the others at 300 (0.036)."""
    measures = [
        PairMeasure(a, b, 30.0, 0.0048 if (min(a, b), max(a, b)) in slow else 0.036)
        for a in range(hosts)
        for b in range(hosts)
        if a != b
    ]
    return measured_topology([f"vm#{h}" for h in range(hosts)], measures, gpus=False)


@pytest.mark.parametrize("slow", [{(1, 2), (0, 3)}, {(0, 1), (2, 3)}, {(0, 2), (1, 3)}])
def test_nodes_go_around_the_ring_avoiding_the_slow_network_pairs(slow: set[tuple[int, int]]) -> None:
    # Rank order (0-1-2-3-0) ran through pairs 1-2 and 3-0 at 40 Mbit/s once the probe named each
    # namespace host a node of its own: every all-reduce along the ring 7x slower on the cluster.
    layout = plan_layout(_namespace_cluster(slow), 4)
    (ring,) = layout.rings
    hops = {(min(a, b), max(a, b)) for a, b in zip(ring, ring[1:] + ring[:1], strict=True)}
    assert not hops & slow, ring
    assert layout.ring_bandwidths_gbps[0] == pytest.approx(0.036)
    assert layout.nodes == ((0,), (1,), (2,), (3,))


def test_a_uniform_network_keeps_nodes_in_rank_order() -> None:
    assert plan_layout(_namespace_cluster(set()), 4).rings == ((0, 1, 2, 3),)
    # Past ORDER_MAX_NODES the order is not searched: rank order, whatever the links.
    many = ORDER_MAX_NODES + 1
    assert plan_layout(_namespace_cluster({(1, 2)}, many), many).rings[0] == tuple(range(many))
