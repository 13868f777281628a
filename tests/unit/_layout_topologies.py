"""Topologies built in code for the layout tests (imported by test_rings, test_plan, test_nccl_graph)."""

from __future__ import annotations

from collbench.topology.model import Device, DeviceKind, Link, LinkKind, Topology


def topology_from(kinds: list[list[LinkKind]], bandwidth: list[list[float]]) -> Topology:
    """GPUs 0..n-1 with the given link kind and bandwidth per pair (upper triangle used)."""
    n = len(kinds)
    devices = [Device(id=f"GPU{i}", kind=DeviceKind.GPU, index=i) for i in range(n)]
    links = [
        Link(a=f"GPU{i}", b=f"GPU{j}", kind=kinds[i][j], bandwidth_gbps=bandwidth[i][j])
        for i in range(n)
        for j in range(i + 1, n)
    ]
    return Topology(host="t", devices=tuple(devices), links=tuple(links))


def cluster(nodes: int, gpus: int = 4, nic_gbps: float = 50.0) -> Topology:
    """``nodes`` hosts of ``gpus`` GPUs on NVSwitch, one NIC per GPU (PIX), others SYS."""
    devices: list[Device] = []
    links: list[Link] = []
    for h in range(nodes):
        host = f"node{h:02d}"
        for i in range(gpus):
            r = h * gpus + i
            devices.append(Device(id=f"GPU{r}", kind=DeviceKind.GPU, index=r, host=host))
            devices.append(
                Device(id=f"NIC{r}", kind=DeviceKind.NIC, index=r, host=host, extra=(("speed_gbps", str(nic_gbps)),))
            )
        for i in range(gpus):
            for j in range(gpus):
                a = h * gpus + i
                b = h * gpus + j
                if i < j:
                    links.append(Link(a=f"GPU{a}", b=f"GPU{b}", kind=LinkKind.NVSWITCH, count=18, bandwidth_gbps=450.0))
                kind = LinkKind.PIX if i == j else LinkKind.SYS
                links.append(Link(a=f"GPU{a}", b=f"NIC{b}", kind=kind, bandwidth_gbps=24.0 if i == j else 10.0))
    return Topology(host="cluster", devices=tuple(devices), links=tuple(links))
