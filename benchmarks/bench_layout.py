"""How long `plan_layout` takes: 8-GPU machines (target < 1 s) and 64 nodes of 8 GPUs (target < 10 s).

/work/venv/bin/python benchmarks/bench_layout.py
"""

from __future__ import annotations

import time
from pathlib import Path

from collbench.layouts.plan import plan
from collbench.topology.model import Device, DeviceKind, Link, LinkKind, Topology
from collbench.topology.nvidia_smi import read_nvidia_smi_topo
from collbench.topology.sources import discover_topology

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "fixtures" / "topologies"


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


if __name__ == "__main__":
    main()
