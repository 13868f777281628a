"""What a probe by nodes writes (``measured_topology(..., per_node=True)``): every pair within a node as a
link, each pair of nodes measured as a node link, and, where pairs of nodes were left out, an inferred
default (the median of those measured) that the note names. Built from measurements made up here, as
rank 0 receives them; tests/dist/test_probe.py measures real ones."""

from __future__ import annotations

import statistics

import pytest
from node_link_topologies import every_pair

from collbench.layouts.plan import plan_layout
from collbench.runtime.probe import PairMeasure, measured_topology


def _both(a: int, b: int, gbps: float, latency_us: float = 10.0) -> list[PairMeasure]:
    return [PairMeasure(a, b, latency_us, gbps), PairMeasure(b, a, latency_us, gbps * 1.1)]


# 4 nodes of 2 ranks: n0 = 0, 1; n1 = 2, 3; n2 = 4, 5; n3 = 6, 7.
HOSTS = ["n0", "n0", "n1", "n1", "n2", "n2", "n3", "n3"]
WITHIN = [m for a in (0, 2, 4, 6) for m in _both(a, a + 1, 20.0, 2.0)]


def test_every_pair_of_nodes_measured_nothing_inferred() -> None:
    between = _both(0, 2, 1.0) + _both(0, 4, 5.0) + _both(0, 6, 5.0) + _both(2, 4, 5.0) + _both(2, 6, 5.0)
    between += _both(4, 6, 0.5)
    topo = measured_topology(HOSTS, WITHIN + between, gpus=False, per_node=True)
    assert [(lk.a, lk.b) for lk in topo.links] == [
        ("CPU0", "CPU1"),
        ("CPU2", "CPU3"),
        ("CPU4", "CPU5"),
        ("CPU6", "CPU7"),
    ]
    assert len(topo.node_links) == 6 and topo.default_node_link is None
    slow = topo.link("CPU1", "CPU3")
    assert slow is not None and slow.source == "measured"
    assert slow.bandwidth_gbps == pytest.approx(1.05)  # the mean of the two directions, as a link's
    assert "6 of 6 pairs of nodes" in (topo.note or "") and "inferred" not in (topo.note or "")


def test_pairs_of_nodes_left_out_are_inferred_as_the_median_of_those_measured() -> None:
    between = _both(0, 2, 1.0, 30.0) + _both(4, 6, 3.0, 50.0) + _both(0, 4, 9.0, 70.0)
    topo = measured_topology(HOSTS, WITHIN + between, gpus=False, per_node=True)
    default = topo.default_node_link
    assert default is not None and default.source == "inferred"
    assert default.bandwidth_gbps == pytest.approx(statistics.median([1.05, 3.15, 9.45]))
    assert default.latency_us == pytest.approx(50.0)
    guessed = topo.link("CPU3", "CPU7")
    assert guessed is not None and guessed.source == "inferred"
    note = topo.note or ""
    assert "3 of 6 pairs of nodes" in note and "inferred as the median" in note
    # What the probe wrote lays out as the same topology with every pair of ranks listed.
    assert plan_layout(topo, 8) == plan_layout(every_pair(topo), 8)


def test_on_one_node_a_probe_by_nodes_is_every_pair() -> None:
    measures = [m for a in range(4) for b in range(a + 1, 4) for m in _both(a, b, 10.0 + a + b)]
    by_nodes = measured_topology(["h"] * 4, measures, gpus=False, per_node=True)
    assert by_nodes == measured_topology(["h"] * 4, measures, gpus=False)
    assert not by_nodes.node_links and len(by_nodes.links) == 6


def test_a_probe_by_nodes_is_the_same_machine_as_a_probe_of_every_pair() -> None:
    # Profiles merge by the machine's fingerprint (its first two ranks): a probe of every pair and one by
    # nodes of the same ranks name the same machine, and two probes by nodes with other figures too.
    from collbench.profile.document import machine_fingerprint

    between = _both(0, 2, 1.0) + _both(4, 6, 3.0)
    every = [m for a in range(8) for b in range(a + 1, 8) for m in _both(a, b, 7.0)]
    by_nodes = measured_topology(HOSTS, WITHIN + between, gpus=False, per_node=True)
    slower = measured_topology(
        HOSTS, [PairMeasure(m.src, m.dst, 99.0, 0.1) for m in WITHIN + between], gpus=False, per_node=True
    )
    all_pairs = measured_topology(HOSTS, every, gpus=False)
    assert machine_fingerprint(by_nodes) == machine_fingerprint(all_pairs) == machine_fingerprint(slower)
    assert by_nodes.fingerprint == slower.fingerprint != all_pairs.fingerprint
    assert by_nodes.subset(2).node_links == () and by_nodes.subset(3).default_node_link is not None
