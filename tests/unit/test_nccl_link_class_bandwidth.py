"""A fit within one node calibrates the bandwidth of the links it measured, not the NICs' (issue 32, item 3).

NCCL's search (NVIDIA/nccl v2.30.7, commit 5067397c, ``src/graph/search.cc``) charges a graph's
``bwIntra`` to the paths between GPUs and NVSwitches and its ``bwInter`` to the NICs (lines 144-145,
``intra ? graph->bwIntra : graph->bwInter``; ``ncclTopoSearchRecNet``, lines 726-741). Its cost model
(``src/graph/tuning.cc``) prices the ring and tree by ``bwIntra`` up to 2 nodes and by ``bwInter``
beyond (line 306), and NVLS-tree by the lesser of the NVSwitch's part (``intraBw``: ``bwIntra`` x
``nvlsEfficiency``, line 311) and the NICs' (``interBw``: ``bwInter``, line 320). A fit within one node
measured the first of each: across nodes, with the NICs declared, the second is NCCL's own. The GB200
logs are in tests/fixtures/real (SOURCES.md); a GB200 "node" is an NVL72 rack (benchmarks/README.md).
"""

from __future__ import annotations

import dataclasses

import pytest
from gb200_logs import RACKS, gb200

from collbench.models.nccl_cost import algorithm_bw_gbps
from collbench.models.nccl_graph import NodeFacts, node_of
from collbench.models.nccl_machine import NcclMachine, with_topology
from collbench.models.predict import price_fits
from collbench.models.priced import Priced, Shapes

_SIMPLE = 2
"""Simple's index in NCCL's protocols (LL, LL128, Simple)."""
RACK_NICS = NodeFacts(nics=72, nic_gbps=50.0, nvls=False)
"""A GB200 NVL72 rack's 72 NICs of 400 Gb/s (benchmarks/bench_predict.py ``NICS``), NVLS off as the
published runs had it."""


def test_nvls_trees_nic_part_keeps_nccls_figure() -> None:
    # Four H100 nodes with 8 NICs of 12.5 GB/s: NCCL's NVLS graph has 8 heads at 12 GB/s, and its
    # NVLS-tree is bound by the NICs (12 GB/s a channel) below the NVSwitch's part (12 x 0.85 x 7/8 x 2).
    node = node_of("H100", 8, NodeFacts(nics=8, nic_gbps=12.5))
    machine = with_topology(NcclMachine(bus_bw_gbps=360.0), node, 4)
    assert machine.nvls is not None and machine.nvls.bw_inter_gbps == 12.0
    fitted = dataclasses.replace(machine, nvls_scale=0.8)
    split = dataclasses.replace(fitted, nvls_net_scale=1.0)
    own = algorithm_bw_gbps(machine, "all-reduce", "nvls_tree", _SIMPLE, 32, 4)
    # A fit across nodes measured the bound it ran into: its scale on the whole, as before.
    assert algorithm_bw_gbps(fitted, "all-reduce", "nvls_tree", _SIMPLE, 32, 4) == pytest.approx(0.8 * own)
    # A fit within one node measured the NVSwitch's part only: the NICs' part binds at NCCL's figure.
    assert algorithm_bw_gbps(split, "all-reduce", "nvls_tree", _SIMPLE, 32, 4) == pytest.approx(own)
    # Where the NVSwitch's part binds (two nodes: interBw doubled, line 320), the fitted scale is on it.
    two = with_topology(NcclMachine(bus_bw_gbps=360.0), node, 2)
    own_two = algorithm_bw_gbps(two, "all-reduce", "nvls_tree", _SIMPLE, 16, 2)
    split_two = dataclasses.replace(two, nvls_scale=0.8, nvls_net_scale=1.0)
    assert algorithm_bw_gbps(split_two, "all-reduce", "nvls_tree", _SIMPLE, 16, 2) == pytest.approx(0.8 * own_two)


def test_a_racks_fit_beyond_two_racks_takes_nccls_bandwidth_between_them() -> None:
    one, _ = gb200(72)
    sizes = (1 << 29, 1 << 34)
    shapes = Shapes(RACKS)

    def entry(ranks: int, nodes: int, facts: NodeFacts) -> tuple[Priced, list[str]]:
        (e,), _, notes = price_fits([one], ranks, nodes, shapes=shapes, nccl_arch="blackwell", nccl_facts=facts)
        return e, notes

    told, notes = entry(1440, 20, RACK_NICS)
    untold, untold_notes = entry(1440, 20, NodeFacts(nvls=False))
    # Told the NICs, beyond 2 racks the ring and tree run at NCCL's bwInter, its search's 16 x 45.1 GB/s
    # (not the rack's fitted 883, which measured NVLinks), and the note says so.
    assert any("its search's figure for the NICs declared" in n for n in notes)
    for size in sizes:
        assert "beyond 2 nodes NCCL's own bus bandwidth between nodes, 722 GB/s (unmeasured)" in told.basis(size)
    # At 16 GiB, the ring's bytes at 722 GB/s (LL128 on the 32 channels NCCL runs, told the NICs) take
    # longer than at the rack's 883 (Simple, 16 channels assumed): the fitted NVLinks no longer speed up
    # the network.
    assert "picks ring/" in told.basis(1 << 34) and told.time_us(1 << 34) > 1.05 * untold.time_us(1 << 34)
    # Not told the NICs: the fitted bus there too, as the note has said.
    assert any("assumes the measured bus bandwidth there too" in n for n in untold_notes)
    assert "beyond 2 nodes" not in untold.basis(1 << 34) and "bus 883 GB/s (fitted)" in untold.basis(1 << 34)
    # Up to 2 racks NCCL prices bwIntra, which the rack measured: its fitted bus, told the NICs or not.
    two, two_notes = entry(144, 2, RACK_NICS)
    assert "bus 883 GB/s (fitted)" in two.basis(1 << 34) and "beyond 2 nodes" not in two.basis(1 << 34)
    assert not any("figure for the NICs" in n for n in two_notes)


def test_a_racks_miss_goes_on_its_latencies_within_a_rack_where_nccls_own_bandwidth_between_racks_is_priced() -> None:
    # What the model misses is a residual of the terms the rack measured (tuning.cc line 653 prices each
    # term from its own figures): beyond 2 racks, told the NICs, the ring's and tree's bandwidth term is
    # NCCL's own bwInter (line 306) and the network's latencies NCCL's own (lines 386-412), so none of it
    # goes there; the base and the NVLink hops within each rack, fitted, keep theirs
    # (test_nccl_link_class_latency's test_a_one_node_fits_miss_is_not_carried_onto_nccls_own_network_latencies).
    # Within one node where NCCL's own NVLink figure is priced, nothing is carried
    # (test_link_floor's test_a_two_node_fits_miss_is_carried_into_one_node_for_neither_family).
    one, _ = gb200(72)
    shapes = Shapes(RACKS)

    def entry(ranks: int, nodes: int) -> Priced:
        (e,), _, _ = price_fits([one], ranks, nodes, shapes=shapes, nccl_arch="blackwell", nccl_facts=RACK_NICS)
        return e

    beyond = entry(1440, 20)
    node = node_of("GB200", 72, RACK_NICS)
    assert node is not None
    machine = with_topology(NcclMachine(bus_bw_gbps=1.0, arch="blackwell"), node, 20)
    assert machine.topology_bus_bw_gbps is not None
    machine = dataclasses.replace(machine, inter_bus_bw_gbps=machine.topology_bus_bw_gbps)
    for size in (1 << 29, 1 << 34):
        basis = beyond.basis(size)
        assert "NCCL's own bus bandwidth between nodes" in basis and "picks nvls" not in basis
        assert "for what it misses on its latencies within a node only (its bandwidth between nodes" in basis
        assert "not on the network's latencies (NCCL's own)" in basis
        algo, proto = basis.split(" picks ", 1)[1].split(";", 1)[0].split("/")
        bw = algorithm_bw_gbps(machine, "all-reduce", algo, ("LL", "LL128", "Simple").index(proto), 1440, 20)
        if algo == "ring":
            # The bytes at NCCL's own bwInter, nothing of the miss on them (the tree's carry its
            # size correction, line 641).
            assert beyond.time_us(size) - beyond.latency_us(size) == pytest.approx(size / (1e3 * bw), rel=1e-9)
    # Up to 2 racks the ring and tree take the fitted bus (bwIntra, which the rack measured): carried
    # on all but the network's latencies.
    basis = entry(144, 2).basis(1 << 34)
    assert "for what it misses, not on the network's latencies (NCCL's own)" in basis
