"""NCCL graph XML: the ring orders of a layout, written so that NCCL_GRAPH_FILE can load them."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from _layout_topologies import cluster, topology_from

from collbench.errors import ConfigError, InputFileError
from collbench.exporters.nccl_graph import nccl_graph_xml, read_nccl_graph_rings, write_nccl_graph
from collbench.layouts.plan import plan
from collbench.topology.host import host_topology
from collbench.topology.model import LinkKind


def test_single_node_rings_round_trip(tmp_path: Path) -> None:
    nv, sys_ = LinkKind.NVLINK, LinkKind.SYS
    kinds = [[nv if (i // 2 == j // 2 or abs(i - j) == 2) else sys_ for j in range(4)] for i in range(4)]
    bw = [[50.0 if kinds[i][j] == nv else 10.0 for j in range(4)] for i in range(4)]
    topo = topology_from(kinds, bw)
    result = plan(topo, 4, channels=2)
    path = tmp_path / "graph.xml"
    write_nccl_graph(path, topo, result.layout.rings, result.layout.ring_bandwidths_gbps)
    root = ET.parse(path).getroot()
    assert root.tag == "graphs" and root.get("version") == "1"
    graph = root.find("graph")
    assert graph is not None
    assert graph.get("id") == "0" and graph.get("pattern") == "4"
    assert graph.get("nchannels") == str(len(result.layout.rings))
    assert graph.get("typeintra") == "NVL"
    assert float(graph.get("speedintra", "0")) == pytest.approx(min(result.layout.ring_bandwidths_gbps))
    rings = read_nccl_graph_rings(path.read_text())
    assert rings == [[topo.rank_devices[r].index for r in ring] for ring in result.layout.rings]


def test_multinode_channels_are_one_node_chain_between_nets() -> None:
    topo = cluster(2, gpus=4)
    result = plan(topo, 8)
    text = nccl_graph_xml(topo, result.layout.rings, result.layout.ring_bandwidths_gbps)
    graph = ET.fromstring(text).find("graph")
    assert graph is not None and graph.get("typeinter") == "NET"
    for channel in graph.findall("channel"):
        tags = [el.tag for el in channel]
        assert tags[0] == "net" and tags[-1] == "net"
        gpus = [int(el.get("dev", "-1")) for el in channel if el.tag == "gpu"]
        assert sorted(gpus) == [0, 1, 2, 3]
        # The ring enters through the NIC of its first GPU and leaves through its last GPU's NIC.
        assert int(channel[0].get("dev", "-1")) == gpus[0]
        assert int(channel[-1].get("dev", "-1")) == gpus[-1]


def test_cpu_topology_has_no_nccl_graph() -> None:
    topo = host_topology(4)
    result = plan(topo, 4)
    with pytest.raises(ConfigError, match="GPU"):
        nccl_graph_xml(topo, result.layout.rings, result.layout.ring_bandwidths_gbps)


def test_reading_bad_text() -> None:
    with pytest.raises(InputFileError):
        read_nccl_graph_rings("<system/>")
    with pytest.raises(InputFileError):
        read_nccl_graph_rings("not xml")
