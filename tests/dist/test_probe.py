"""The probe on local gloo ranks: every pair measured, links written as measured links."""

from __future__ import annotations

import pytest

from collbench.errors import ConfigError
from collbench.layouts.plan import plan_layout
from collbench.topology.host import host_topology
from collbench.topology.model import LinkKind
from collbench.runtime.probe import ProbeConfig, probe_topology, round_robin_rounds

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
