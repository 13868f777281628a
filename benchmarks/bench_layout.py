"""How long `plan_layout` takes: 8-GPU machines (target < 1 s), 64 nodes of 8 GPUs (target < 10 s), and
1,024 ranks of several shapes (target < 10 s each; issue 13). Past 2,048 ranks a layout is refused with
one line, which the last case shows.

/work/venv/bin/python benchmarks/bench_layout.py
"""

from __future__ import annotations

import time
from pathlib import Path

from collbench.errors import ConfigError
from collbench.layouts.plan import plan
from collbench.topology.model import Device, DeviceKind, Link, LinkKind, Topology
from collbench.topology.nvidia_smi import read_nvidia_smi_topo
from collbench.topology.sources import discover_topology

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO / "tests" / "fixtures" / "topologies"


def cluster(nodes: int, gpus: int = 8, nic_gbps: float = 50.0) -> Topology:
    """HGX-like nodes: NVSwitch (NV18) inside, one 400 Gbit/s NIC per GPU (PIX), SYS to the others."""
    devices: list[Device] = []
    links: list[Link] = []
    for h in range(nodes):
        for i in range(gpus):
            r = h * gpus + i
            devices.append(Device(id=f"GPU{r}", kind=DeviceKind.GPU, index=r, host=f"node{h:03d}"))
            extra = (("speed_gbps", str(nic_gbps)),)
            devices.append(Device(id=f"NIC{r}", kind=DeviceKind.NIC, index=r, host=f"node{h:03d}", extra=extra))
        for i in range(gpus):
            for j in range(gpus):
                a, b = h * gpus + i, h * gpus + j
                if i < j:
                    links.append(Link(a=f"GPU{a}", b=f"GPU{b}", kind=LinkKind.NVSWITCH, count=18, bandwidth_gbps=450.0))
                kind = LinkKind.PIX if i == j else LinkKind.SYS
                links.append(Link(a=f"GPU{a}", b=f"NIC{b}", kind=kind, bandwidth_gbps=24.0 if i == j else 10.0))
    return Topology(host="cluster", devices=tuple(devices), links=tuple(links))


def cpu_host(ranks: int) -> Topology:
    """One host of ``ranks`` CPU ranks, every pair through host memory (what `discover` gives)."""
    devices = tuple(Device(id=f"CPU{i}", kind=DeviceKind.CPU, index=i) for i in range(ranks))
    links = tuple(
        Link(a=f"CPU{i}", b=f"CPU{j}", kind=LinkKind.LOOPBACK, bandwidth_gbps=10.0)
        for i in range(ranks)
        for j in range(i + 1, ranks)
    )
    return Topology(host="host", devices=devices, links=links)


def pcie_tree(sockets: int = 2, switches: int = 16, per_switch: int = 32) -> Topology:
    """One host of GPUs under PCIe switches (PIX inside a switch, PXB across, SYS across sockets)."""
    n = sockets * switches * per_switch
    where = [(g // (switches * per_switch), g // per_switch) for g in range(n)]
    devices = tuple(Device(id=f"GPU{g}", kind=DeviceKind.GPU, index=g, numa_node=where[g][0]) for g in range(n))
    links = []
    for i in range(n):
        for j in range(i + 1, n):
            if where[i][1] == where[j][1]:
                kind, bw = LinkKind.PIX, 24.0
            elif where[i][0] == where[j][0]:
                kind, bw = LinkKind.PXB, 22.0
            else:
                kind, bw = LinkKind.SYS, 10.0
            links.append(Link(a=f"GPU{i}", b=f"GPU{j}", kind=kind, bandwidth_gbps=bw))
    return Topology(host="host", devices=devices, links=tuple(links))


def _time(name: str, topo: Topology, target_s: float) -> None:
    t0 = time.perf_counter()
    result = plan(topo, len(topo.rank_devices))
    dt = time.perf_counter() - t0
    verdict = "ok" if dt < target_s else "OVER TARGET"
    print(
        f"{name:<34} {len(topo.rank_devices):>4} ranks  {dt:7.3f} s  (target < {target_s:g} s: {verdict})  "
        f"{len(result.channels)} channel(s), {result.ring_bandwidth_gbps:.1f} GB/s"
    )


def main() -> None:
    for name in ("hgx-h100x8-nv18-nics.topo.txt", "pcie8-pix-pxb.topo.txt"):
        path = SHARED / name
        if path.exists():
            _time(name, read_nvidia_smi_topo(path), 1.0)
    for rec in sorted((REPO / "tests" / "fixtures" / "nvml").glob("*.json")):
        topo = discover_topology(nvml_replay=rec)
        if len(topo.rank_devices) == 8:
            _time(f"nvml {rec.name}", topo, 1.0)
    _time("64 nodes x 8 GPUs (NVSwitch, 8 NICs)", cluster(64), 10.0)
    _time("128 nodes x 8 GPUs (NVSwitch, 8 NICs)", cluster(128), 10.0)
    _time("1024 nodes x 1 GPU (1 NIC)", cluster(1024, gpus=1), 10.0)
    _time("1024 CPU ranks on one host", cpu_host(1024), 10.0)
    _time("1024 GPUs, 32 PCIe switches, 2 sockets", pcie_tree(), 10.0)
    try:
        plan(cpu_host(2049), 2049)
    except ConfigError as exc:
        print(f"{'2049 CPU ranks on one host':<34} refused: {exc}")


if __name__ == "__main__":
    main()
