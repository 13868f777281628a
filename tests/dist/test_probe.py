"""The probe on local gloo ranks: every pair measured, links written as measured links; by nodes, on
ranks that pretend to be on three nodes, the pairs within nodes and one pair of ranks per pair of nodes."""

from __future__ import annotations

import dataclasses
import os

import pytest
from node_link_topologies import every_pair

from collbench.errors import ConfigError
from collbench.layouts.plan import plan_layout
from collbench.runtime.launch.membership import TEST_BOOT_ID_ENV
from collbench.runtime.launch.ranks import RankContext, launch
from collbench.runtime.probe import (
    PairMeasure,
    ProbeConfig,
    _probe_worker,
    measured_topology,
    probe_topology,
    round_robin_rounds,
)
from collbench.runtime.probe_pairs import Pairs
from collbench.topology.host import host_topology
from collbench.topology.model import LinkKind, Topology

pytestmark = pytest.mark.dist

_QUICK = ProbeConfig(repeats=2, pings=5, target_s=0.02)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8])
def test_round_robin_rounds_cover_every_pair_once_with_disjoint_pairs(n: int) -> None:
    rounds = round_robin_rounds(n)
    seen = [p for r in rounds for p in r]
    assert sorted(seen) == [(a, b) for a in range(n) for b in range(a + 1, n)]
    for r in rounds:
        ranks = [x for p in r for x in p]
        assert len(ranks) == len(set(ranks))


def test_probe_three_local_ranks_writes_measured_links() -> None:
    topo = probe_topology(3, backend="gloo", timeout_s=60.0, config=_QUICK)
    assert topo.source == "probe"
    assert [d.id for d in topo.rank_devices] == ["CPU0", "CPU1", "CPU2"]
    assert all(d.host for d in topo.rank_devices)
    assert len(topo.links) == 3
    for link in topo.links:
        assert link.kind == LinkKind.MEASURED and link.source == "measured"
        assert link.bandwidth_gbps > 0
        assert link.latency_us is not None and link.latency_us > 0
    # The result is a topology like any other: it feeds layout.
    layout = plan_layout(topo, 3)
    assert sorted(layout.rings[0]) == [0, 1, 2]


def test_probe_keeps_the_base_devices() -> None:
    base = host_topology(2)
    topo = probe_topology(2, base=base, config=_QUICK)
    assert [d.id for d in topo.rank_devices] == [d.id for d in base.rank_devices]
    link = topo.rank_link(0, 1)
    assert link is not None and link.kind == LinkKind.MEASURED


def test_probe_needs_two_ranks() -> None:
    with pytest.raises(ConfigError):
        probe_topology(1)


# Ranks 0, 1 on one pretend node, 2, 3 and 4 on a second, 5 on a third (COLLBENCH_TEST_BOOT_ID, the test
# hook of collbench/runtime/launch/membership.py, makes one machine several nodes).
_NODES = ["a", "a", "b", "b", "b", "c"]


def _on_pretend_nodes(ctx: RankContext, task: tuple[ProbeConfig, bool, Pairs]) -> object:
    os.environ[TEST_BOOT_ID_ENV] = f"pretend-{_NODES[ctx.rank]}"
    return _probe_worker(ctx, task)


def _probed_by_nodes(node_rounds: int) -> Topology:
    task = (dataclasses.replace(_QUICK, node_rounds=node_rounds), False, "nodes")
    got = launch(len(_NODES), _on_pretend_nodes, task, backend="gloo", timeout_s=120.0, result_types=(PairMeasure,))
    hosts, measures = got[0]
    return measured_topology(hosts, measures, gpus=False, per_node=True)


def test_probe_by_nodes_measures_within_nodes_and_a_pair_of_ranks_per_pair_of_nodes() -> None:
    topo = _probed_by_nodes(node_rounds=16)
    hosts = [d.host for d in topo.rank_devices]
    assert len(set(hosts)) == 3 and hosts[0] == hosts[1] != hosts[2] == hosts[3] == hosts[4] != hosts[5]
    # Within nodes: every pair of ranks (1 + 3), listed per pair; nothing between nodes listed so.
    assert sorted((lk.a, lk.b) for lk in topo.links) == [
        ("CPU0", "CPU1"),
        ("CPU2", "CPU3"),
        ("CPU2", "CPU4"),
        ("CPU3", "CPU4"),
    ]
    # Between nodes: each of the 3 pairs of nodes measured once, by their first ranks; nothing inferred.
    assert len(topo.node_links) == 3 and topo.default_node_link is None
    assert all(nl.source == "measured" and nl.bandwidth_gbps > 0 for nl in topo.node_links)
    assert topo.link("CPU1", "CPU4") == topo.node_link(hosts[1], hosts[4]).between("CPU1", "CPU4")
    # The same layout as from the same topology with every pair of ranks listed.
    assert plan_layout(topo, 6) == plan_layout(every_pair(topo), 6)


def test_probe_by_nodes_infers_the_pairs_of_nodes_it_left_out() -> None:
    topo = _probed_by_nodes(node_rounds=1)
    measured = [nl for nl in topo.node_links if nl.source == "measured"]
    # One round of the tournament over 3 nodes: one pair of nodes met, the other two inferred.
    assert len(measured) == 1
    default = topo.default_node_link
    assert default is not None and default.source == "inferred"
    assert default.bandwidth_gbps == measured[0].bandwidth_gbps
    assert "1 of 3 pairs of nodes" in (topo.note or "") and "inferred" in (topo.note or "")
    assert plan_layout(topo, 6) == plan_layout(every_pair(topo), 6)
