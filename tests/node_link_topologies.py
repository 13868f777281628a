"""Topologies whose links between hosts are said per pair of hosts (``node_links``), built in code, and
the same topologies with every pair of ranks listed (tests/unit/test_topology_node_links.py, the CLI's,
the probe's)."""

from __future__ import annotations

from collbench.topology.model import Device, DeviceKind, Link, LinkKind, NodeLink, Topology


def _measured(a: str, b: str, gbps: float, latency_us: float = 20.0) -> Link:
    return Link(a, b, LinkKind.MEASURED, bandwidth_gbps=gbps, latency_us=latency_us, source="measured")


def classed(hosts: int, per_host: int, slow: dict[tuple[int, int], float], *, default_gbps: float = 5.0) -> Topology:
    """CPU ranks ``per_host`` to a host, measured links within each host (20 GB/s, a little less on
    higher ranks so that rings have a best order), node links for the ``slow`` host pairs (GB/s) and an
    inferred default between every other pair of hosts."""
    devices = [
        Device(f"CPU{r}", DeviceKind.CPU, r, name=f"rank {r}", host=f"h{r // per_host}")
        for r in range(hosts * per_host)
    ]
    links = [
        _measured(f"CPU{h * per_host + i}", f"CPU{h * per_host + j}", 20.0 - i - 0.5 * j, 2.0)
        for h in range(hosts)
        for i in range(per_host)
        for j in range(i + 1, per_host)
    ]
    node_links = [
        NodeLink(LinkKind.MEASURED, gbps, 40.0, "measured", a=f"h{a}", b=f"h{b}") for (a, b), gbps in slow.items()
    ]
    node_links.append(NodeLink(LinkKind.MEASURED, default_gbps, 30.0, "inferred"))
    return Topology(host="h0", devices=tuple(devices), links=tuple(links), source="probe", node_links=tuple(node_links))


def every_pair(topo: Topology) -> Topology:
    """The same topology with every pair of rank devices listed (the version 1 document)."""
    ranks = topo.rank_devices
    links = [found for i, a in enumerate(ranks) for b in ranks[i + 1 :] if (found := topo.link(a.id, b.id)) is not None]
    return Topology(host=topo.host, devices=topo.devices, links=tuple(links), source=topo.source, note=topo.note)
