"""Layouts past 2,048 ranks, planned over nodes (layouts/nodes.py): the rings are an order of nodes
times each node's own chain, as NCCL joins its intra-node rings node after node (NVIDIA/nccl
src/graph/connect.cc, connectRings) and lays its double binary tree over nodes (connectTrees,
src/graph/trees.cc); the all-to-all is a rule each rank applies to itself (layouts/exchange.py,
NodeExchange). Topologies are made as a probe by nodes makes them (runtime/probe.measured_topology:
every pair within a node, a pair of ranks per pair of nodes measured, the rest an inferred default).
"""

from __future__ import annotations

import itertools

import pytest

from collbench.errors import ConfigError
from collbench.layouts.exchange import NodeExchange
from collbench.layouts.model import Layout
from collbench.layouts.nodes import plan_over_nodes
from collbench.layouts.plan import plan_layout
from collbench.layouts.trees import tree_depth
from collbench.runtime.probe import PairMeasure, measured_topology
from collbench.schedules.ops import Op
from collbench.schedules.registry import get_algorithm
from collbench.schedules.verifier import verify
from collbench.topology.model import Device, DeviceKind, Topology


def _by_nodes(nodes: int, per: int, slow: set[frozenset[int]], *, fast_within: float = 20.0) -> Topology:
    """``nodes`` hosts of ``per`` ranks: every pair within a node at ``fast_within`` GB/s, between nodes
    a pair of ranks per pair of nodes k apart for k = 1, 2, 3 and each slow pair (1 GB/s, the others
    10), the rest the inferred default (their median, 10)."""
    hosts = [f"node{r // per:04d}" for r in range(nodes * per)]
    measures: list[PairMeasure] = []

    def both(a: int, b: int, gbps: float) -> None:
        measures.extend((PairMeasure(a, b, 5.0, gbps), PairMeasure(b, a, 5.0, gbps)))

    for node in range(nodes):
        for i, j in itertools.combinations(range(per), 2):
            both(node * per + i, node * per + j, fast_within)
    pairs = {frozenset((a, (a + k) % nodes)) for a in range(nodes) for k in (1, 2, 3) if nodes > k} | slow
    for pair in sorted(pairs, key=sorted):
        a, b = sorted(pair)
        both(a * per, b * per, 1.0 if pair in slow else 10.0)
    return measured_topology(hosts, measures, gpus=True, per_node=True)


def _node_hops(ring: tuple[int, ...], per: int) -> set[frozenset[int]]:
    """The pairs of nodes the ring hops between."""
    n = len(ring)
    return {
        frozenset((ring[k] // per, ring[(k + 1) % n] // per))
        for k in range(n)
        if ring[k] // per != ring[(k + 1) % n] // per
    }


def test_every_ring_visits_every_rank_once_and_each_node_in_one_stretch() -> None:
    per, nodes = 4, 12
    got = plan_over_nodes(_by_nodes(nodes, per, set()), channels=3)
    assert len(got.layout.rings) == 3
    for ring in got.layout.rings:
        assert sorted(ring) == list(range(nodes * per)) and ring[0] == 0
        # A node is entered once and left once: its ranks sit together, a chain.
        stretches = [node for node, _ in itertools.groupby(r // per for r in ring)]
        assert sorted(stretches) == list(range(nodes))
    # On an even network the nodes follow rank order, as NCCL's do.
    assert got.node_order == tuple(range(nodes))
    assert got.layout.nodes == tuple(tuple(range(a * per, a * per + per)) for a in range(nodes))


def test_slow_pairs_of_nodes_are_avoided_as_the_small_planner_avoids_them() -> None:
    # The namespace cluster's shape: 4 hosts of one rank, pairs 1-2 and 3-0 slow. Rank order runs
    # through both; the small planner's search over node orders finds a ring clear of them.
    slow = {frozenset((1, 2)), frozenset((3, 0))}
    topo = _by_nodes(4, 1, slow)
    small = plan_layout(topo, 4)
    large = plan_over_nodes(topo)
    assert not _node_hops(small.rings[0], 1) & slow
    assert not _node_hops(large.layout.rings[0], 1) & slow
    assert large.layout.ring_bandwidths_gbps[0] == pytest.approx(small.ring_bandwidths_gbps[0])


def test_slow_pairs_in_rank_order_are_no_hop_of_the_ring_over_many_nodes() -> None:
    # Past 8 nodes the small planner keeps rank order; over nodes the slow pairs are avoided, the
    # closing pair (39-0) included.
    per, nodes = 2, 40
    slow = {frozenset((0, 1)), frozenset((5, 6)), frozenset((6, 7)), frozenset((39, 0)), frozenset((20, 21))}
    got = plan_over_nodes(_by_nodes(nodes, per, slow))
    for ring in got.layout.rings:
        assert sorted(ring) == list(range(nodes * per))
        assert not _node_hops(ring, per) & slow
    assert got.layout.ring_bandwidths_gbps[0] == pytest.approx(10.0)


def test_past_2048_ranks_plan_layout_plans_over_nodes() -> None:
    per, nodes = 8, 258  # 2,064 ranks: the n x n model refused them
    slow = {frozenset((a, a + 1)) for a in range(0, 250, 25)}
    topo = _by_nodes(nodes, per, slow)
    n = nodes * per
    layout = plan_layout(topo, n)
    assert layout.name == "topology" and layout.ring_bandwidths_gbps[0] == pytest.approx(10.0)
    for ring in layout.rings:
        assert sorted(ring) == list(range(n))
        assert not _node_hops(ring, per) & slow
    for tree in layout.trees:
        # A double binary tree over 258 nodes (depth 8 at most) and a chain of 8 in each.
        assert tree_depth(tree) <= 9 + per - 1
    assert layout.exchange_by_nodes and not layout.exchange_rounds
    assert layout.exchange_round_count == n - 1
    for rank in (0, 1, 7, 8, n // 2, n - 1):
        mine = layout.for_rank(rank)
        assert len(mine.exchange_partners) == n - 1
        assert sorted(p for p in mine.exchange_partners) == [r for r in range(n) if r != rank]
        for k in (0, 7, 8, n - 2):
            assert layout.for_rank(mine.exchange_partners[k]).exchange_partners[k] == rank


def test_a_single_host_past_2048_ranks_is_refused_in_one_line() -> None:
    gpus = tuple(Device(id=f"GPU{r}", kind=DeviceKind.GPU, index=r) for r in range(2050))
    with pytest.raises(ConfigError, match=r"^the topology has 2050 ranks on one host; layouts on one host are"):
        plan_layout(Topology(host="big", devices=gpus, links=()), 2050)


@pytest.mark.parametrize(("nodes", "per"), [(m, p) for m in range(1, 7) for p in range(1, 6)])
def test_the_exchange_by_nodes_is_a_pairing_every_round_and_meets_every_pair_once(nodes: int, per: int) -> None:
    rule = NodeExchange(tuple(tuple(range(a * per, a * per + per)) for a in range(nodes)))
    n = nodes * per
    met: set[tuple[int, int]] = set()
    for k in range(rule.round_count):
        rnd = [rule.partner(k, r) for r in range(n)]
        assert all(rnd[p] == r for r, p in enumerate(rnd)), (k, rnd)  # a permutation: pairs and idle ranks
        met |= {(r, p) for r, p in enumerate(rnd) if p != r}
    assert len(met) == n * (n - 1)
    # The tournament's count: n - 1 rounds for an even count of nodes of an even size.
    if nodes % 2 == 0 and per % 2 == 0:
        assert rule.round_count == n - 1
    # A pair of nodes meets in consecutive rounds: a slow pair of nodes costs p rounds, not p^2.
    if nodes > 1:
        rounds_of_0_1 = {k for k in range(rule.round_count) if rule.partner(k, 0) // per == 1}
        assert len(rounds_of_0_1) == per and max(rounds_of_0_1) - min(rounds_of_0_1) == per - 1


def test_the_exchange_by_nodes_needs_nodes_of_one_size() -> None:
    with pytest.raises(ValueError, match="nodes of one size"):
        NodeExchange(((0, 1), (2,)))
    topo = _by_nodes(3, 2, set())
    uneven = plan_over_nodes(topo.subset(5)).layout
    assert not uneven.exchange_by_nodes and uneven.exchange_round_count == 0  # the builder's round-robin


def test_topo_pairwise_on_the_rule_by_nodes_is_a_correct_all_to_all_and_a_ranks_part_builds_alike() -> None:
    layout = plan_over_nodes(_by_nodes(3, 2, {frozenset((0, 2))})).layout
    assert layout.exchange_by_nodes
    n = 6
    builder = get_algorithm("topo-pairwise")
    whole = builder.build(Op.ALL_TO_ALL, n, 6 * n, layout=layout, segments=2)
    verify(whole)
    for rank in range(n):
        mine = builder.build(Op.ALL_TO_ALL, n, 6 * n, layout=layout.for_rank(rank), segments=2, rank=rank)
        assert mine.steps[rank] == whole.steps[rank]


def test_a_layout_by_nodes_hashes_and_compares_by_its_rule() -> None:
    rings = ((0, 1, 2, 3),)
    nodes = ((0, 1), (2, 3))
    by_nodes = Layout(rings=rings, nodes=nodes, exchange_by_nodes=True, name="topology")
    plain = Layout(rings=rings, nodes=nodes, name="topology")
    assert by_nodes != plain and hash(by_nodes) != hash(plain)
    assert by_nodes.exchange_is_derived() and not plain.exchange_is_derived()
