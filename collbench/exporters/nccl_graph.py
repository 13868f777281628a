"""NCCL graph XML for ring orders (``NCCL_GRAPH_FILE``), from a layout's rings.

The format is the one NCCL dumps with ``NCCL_GRAPH_DUMP_FILE`` (ncclTopoDumpGraphs, NVIDIA/nccl
src/graph/search.cc): ``<graphs version="1">``
holding ``<graph id pattern crossnic nchannels speedintra speedinter latencyinter typeintra typeinter
samechannels>``, each with one ``<channel>`` per ring listing ``<gpu dev=N/>`` in ring order. Only
the ring graph (id 0, pattern 4) is written; NCCL searches the trees itself.

``dev`` is the GPU's CUDA index on its node (``Device.index``). On several nodes, NCCL's graph describes
one node: every channel is the chain of the first node's GPUs, opened and closed by ``<net dev=N/>``,
the NICs through which the ring enters and leaves (their indices on the node). ``speedintra`` and
``speedinter`` are GB/s per channel: NCCL runs every channel at the graph's one speed, so the slowest
channel's bandwidth is written.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from collbench.errors import ConfigError, InputFileError
from collbench.fileio import atomic_write_text
from collbench.topology.model import DeviceKind, LinkKind, Topology

# NCCL's link type names (kvDictLinkType) for the path kinds collbench knows. NCCL has no NODE level:
# a path between host bridges of one socket is priced as PHB.
_NCCL_TYPE = {
    LinkKind.NVLINK: "NVL",
    LinkKind.NVSWITCH: "NVL",
    LinkKind.PIX: "PIX",
    LinkKind.PXB: "PXB",
    LinkKind.PHB: "PHB",
    LinkKind.NODE: "PHB",
    LinkKind.SYS: "SYS",
    LinkKind.NET: "NET",
}
_WORST_FIRST = ("NET", "SYS", "PHB", "PXB", "PIX", "NVL")


def _closest_nic(topology: Topology, gpu_id: str) -> int | None:
    order = {k: i for i, k in enumerate(LinkKind)}
    best: tuple[int, int] | None = None
    host = topology.device(gpu_id).host
    for nic in topology.nics:
        if nic.host != host:
            continue
        link = topology.link(gpu_id, nic.id)
        key = (order[link.kind] if link is not None else len(order), nic.index)
        if best is None or key < best:
            best = key
    return best[1] if best is not None else None


def nccl_graph_xml(topology: Topology, rings: tuple[tuple[int, ...], ...], bandwidths_gbps: tuple[float, ...]) -> str:
    """The XML text of the ring graph for ``rings`` (ranks index ``topology.rank_devices``).

    Raises ConfigError when the topology has no GPUs (NCCL graphs name GPUs) or no rings are given.
    """
    gpus = topology.rank_devices
    if not topology.gpus or any(d.kind != DeviceKind.GPU for d in gpus):
        raise ConfigError("an NCCL graph names GPUs; this topology has none (use a GPU topology)")
    if not rings:
        raise ConfigError("no rings to write")
    hosts = [d.host or topology.host for d in gpus]
    first_host = hosts[0]
    multinode = len(set(hosts)) > 1
    channels: list[tuple[list[int], int | None, int | None]] = []
    intra_types: set[str] = set()
    for ring in rings:
        if len(ring) != len(gpus):
            raise ConfigError(f"a ring has {len(ring)} ranks, the topology {len(gpus)} GPUs")
        if multinode:
            start = next(k for k, r in enumerate(ring) if hosts[r] == first_host and hosts[ring[k - 1]] != first_host)
            chain: list[int] = []
            k = start
            while hosts[ring[k % len(ring)]] == first_host and len(chain) < len(ring):
                chain.append(ring[k % len(ring)])
                k += 1
            net_in = _closest_nic(topology, gpus[chain[0]].id)
            net_out = _closest_nic(topology, gpus[chain[-1]].id)
        else:
            chain, net_in, net_out = list(ring), None, None
        hops = list(zip(chain, chain[1:] + ([] if multinode else chain[:1]), strict=False))
        for a, b in hops:
            link = topology.link(gpus[a].id, gpus[b].id)
            if link is not None and link.kind in _NCCL_TYPE:
                intra_types.add(_NCCL_TYPE[link.kind])
        channels.append((chain, net_in, net_out))
    speed = min(bandwidths_gbps) if bandwidths_gbps else 0.0
    type_intra = next((t for t in _WORST_FIRST if t in intra_types), "NVL")
    root = ET.Element("graphs", version="1")
    graph = ET.SubElement(
        root,
        "graph",
        id="0",
        pattern="4",
        crossnic="0",
        nchannels=str(len(channels)),
        speedintra=f"{speed:g}",
        speedinter=f"{speed:g}",
        latencyinter="0",
        typeintra=type_intra,
        typeinter="NET" if multinode else "PIX",
        samechannels="0",
    )
    for chain, net_in, net_out in channels:
        ch = ET.SubElement(graph, "channel")
        if net_in is not None:
            ET.SubElement(ch, "net", dev=str(net_in))
        for r in chain:
            ET.SubElement(ch, "gpu", dev=str(gpus[r].index))
        if net_out is not None:
            ET.SubElement(ch, "net", dev=str(net_out))
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode") + "\n"


def write_nccl_graph(
    path: Path, topology: Topology, rings: tuple[tuple[int, ...], ...], bandwidths_gbps: tuple[float, ...]
) -> None:
    """Write :func:`nccl_graph_xml` to ``path`` (atomically). Raises InputFileError if it cannot."""
    atomic_write_text(path, nccl_graph_xml(topology, rings, bandwidths_gbps))


def read_nccl_graph_rings(text: str, path: str = "<input>") -> list[list[int]]:
    """The GPU ``dev`` order of every channel of the ring graph (id 0) in an NCCL graph XML.

    Raises InputFileError for text that is not a graph XML.
    """
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise InputFileError(path, f"not XML: {exc}") from None
    if root.tag != "graphs":
        raise InputFileError(path, f"expected <graphs>, found <{root.tag}>")
    for graph in root.findall("graph"):
        if graph.get("id") == "0":
            return [[int(g.get("dev", "-1")) for g in ch.findall("gpu")] for ch in graph.findall("channel")]
    raise InputFileError(path, 'no ring graph (<graph id="0">)')
