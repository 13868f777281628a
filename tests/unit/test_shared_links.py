"""The socket interconnect and PCIe switch uplinks are shared links: every channel crossing one takes
its bandwidth off the same per-direction capacity (issue 11; NCCL's topology graph charges a path to
each PCIe and CPU-to-CPU link it crosses, src/graph/paths.cc and search.cc).

The loads here are counted independently of the capacity model: from the channels' hops, the link
kinds of the topology and the sockets the test itself assigned.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.layouts.plan import plan
from collbench.topology.model import Device, DeviceKind, Link, LinkKind, Topology
from collbench.topology.sources import discover_topology

NVML = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"


def _socket_loads(topo: Topology, socket: dict[str, int]) -> dict[tuple[int, int], float]:
    """GB/s the layout's channels put over the socket link, per direction (socket a -> socket b)."""
    result = plan(topo, len(topo.rank_devices))
    ranks = topo.rank_devices
    load: dict[tuple[int, int], float] = defaultdict(float)
    for ch in result.channels:
        n = len(ch.order)
        for k in range(n):
            a, b = ranks[ch.order[k]], ranks[ch.order[(k + 1) % n]]
            link = topo.link(a.id, b.id)
            assert link is not None
            if link.kind == LinkKind.SYS:
                load[(socket[a.id], socket[b.id])] += ch.bandwidth_gbps
    return load


def _two_socket(kinds: dict[tuple[int, int], tuple[LinkKind, float]], sockets: list[int]) -> Topology:
    devices = [
        Device(id=f"GPU{i}", kind=DeviceKind.GPU, index=i, numa_node=s, cpus=tuple(range(s * 8, s * 8 + 8)))
        for i, s in enumerate(sockets)
    ]
    links = [
        Link(a=f"GPU{i}", b=f"GPU{j}", kind=kind, count=2 if kind == LinkKind.NVLINK else 1, bandwidth_gbps=bw)
        for (i, j), (kind, bw) in kinds.items()
    ]
    return Topology(host="t", devices=tuple(devices), links=tuple(links))


def test_dgx1_v100_rings_do_not_oversubscribe_the_socket_link() -> None:
    # Before: a fifth ring crossed the sockets 8 times at 7.88 GB/s (31.5 GB/s each way over a link
    # modelled at 7.88), and the total came to 157.9 GB/s, above the GPUs' own 6 x 25 GB/s of NVLink.
    topo = discover_topology(nvml_replay=NVML / "dgx1-v100.json")
    socket = {g.id: int(g.numa_node or 0) for g in topo.gpus}
    sys_gbps = max(lk.bandwidth_gbps for lk in topo.links if lk.kind == LinkKind.SYS)
    for direction, gbps in _socket_loads(topo, socket).items():
        assert gbps <= sys_gbps * (1 + 1e-6), f"{direction}: {gbps} GB/s over a {sys_gbps} GB/s socket link"
    assert plan(topo, 8).ring_bandwidth_gbps <= 6 * 25.0 + 1e-6


def test_four_gpus_two_nvlink_pairs_joined_by_sys_share_one_socket_link() -> None:
    # GPU0-GPU1 and GPU2-GPU3 joined by NVLink inside a socket; every path between the pairs crosses
    # the sockets. Two rings that each cross twice would put 2 x 10 GB/s each way over a 10 GB/s link.
    nv, sys = (LinkKind.NVLINK, 50.0), (LinkKind.SYS, 10.0)
    pairs = {(0, 1): nv, (2, 3): nv, (0, 2): sys, (0, 3): sys, (1, 2): sys, (1, 3): sys}
    topo = _two_socket(pairs, [0, 0, 1, 1])
    loads = _socket_loads(topo, {f"GPU{i}": s for i, s in enumerate([0, 0, 1, 1])})
    assert loads, "every ring over these four GPUs crosses the sockets"
    assert max(loads.values()) <= 10.0 * (1 + 1e-6)
    assert plan(topo, 4).ring_bandwidth_gbps == pytest.approx(10.0)


def test_pcie_switch_uplink_is_shared_by_every_path_leaving_the_switch() -> None:
    # Two PCIe switches of two GPUs (PIX inside, PXB between) on one socket: whatever the ring, all
    # traffic leaving a switch goes up its one uplink, so the rings together get the PXB bandwidth.
    pix, pxb = (LinkKind.PIX, 24.0), (LinkKind.PXB, 16.0)
    pairs = {(0, 1): pix, (2, 3): pix, (0, 2): pxb, (0, 3): pxb, (1, 2): pxb, (1, 3): pxb}
    topo = _two_socket(pairs, [0, 0, 0, 0])
    result = plan(topo, 4)
    ranks = topo.rank_devices
    switch = {"GPU0": 0, "GPU1": 0, "GPU2": 1, "GPU3": 1}
    up: dict[int, float] = defaultdict(float)
    for ch in result.channels:
        for k in range(4):
            a, b = ranks[ch.order[k]].id, ranks[ch.order[(k + 1) % 4]].id
            if switch[a] != switch[b]:
                up[switch[a]] += ch.bandwidth_gbps
    assert max(up.values()) <= 16.0 * (1 + 1e-6)
    assert result.ring_bandwidth_gbps == pytest.approx(16.0)


@st.composite
def two_socket_machines(draw: st.DrawFn) -> tuple[Topology, dict[str, int], float]:
    """2..8 GPUs on two sockets; inside a socket NVLink or a PCIe level, across it NVLink or SYS."""
    per_socket = [draw(st.integers(1, 4)), draw(st.integers(1, 4))]
    sockets = [0] * per_socket[0] + [1] * per_socket[1]
    sys_gbps = draw(st.sampled_from([5.0, 10.0, 16.0, 20.0]))
    inside = st.sampled_from([LinkKind.NVLINK, LinkKind.PIX, LinkKind.PXB, LinkKind.PHB, LinkKind.NODE])
    speed = {LinkKind.PIX: 24.0, LinkKind.PXB: 22.0, LinkKind.PHB: 20.0, LinkKind.NODE: 18.0, LinkKind.SYS: sys_gbps}
    pairs: dict[tuple[int, int], tuple[LinkKind, float]] = {}
    n = len(sockets)
    for i in range(n):
        for j in range(i + 1, n):
            if sockets[i] == sockets[j]:
                kind = draw(inside)
            else:
                kind = LinkKind.NVLINK if draw(st.integers(0, 3)) == 0 else LinkKind.SYS
            pairs[(i, j)] = (kind, draw(st.sampled_from([25.0, 50.0])) if kind == LinkKind.NVLINK else speed[kind])
    topo = _two_socket(pairs, sockets)
    return topo, {f"GPU{i}": s for i, s in enumerate(sockets)}, sys_gbps


@settings(max_examples=80, deadline=None)
@given(two_socket_machines())
def test_random_two_socket_machines_never_overdraw_the_socket_link(
    machine: tuple[Topology, dict[str, int], float],
) -> None:
    topo, socket, sys_gbps = machine
    if len(topo.rank_devices) < 2:
        return
    for direction, gbps in _socket_loads(topo, socket).items():
        assert gbps <= sys_gbps * (1 + 1e-6), f"{direction}: {gbps} GB/s over a {sys_gbps} GB/s socket link"


def test_heuristic_regime_keeps_the_socket_link_within_capacity() -> None:
    # 48 GPUs (past the exact search): 6 PCIe switches of 8 per socket, PIX inside, PXB across, SYS
    # between the sockets. The heuristic's rings must still respect the shared uplinks.
    sockets = [g // 24 for g in range(48)]
    switch = [g // 8 for g in range(48)]
    pairs: dict[tuple[int, int], tuple[LinkKind, float]] = {}
    for i in range(48):
        for j in range(i + 1, 48):
            if switch[i] == switch[j]:
                pairs[(i, j)] = (LinkKind.PIX, 24.0)
            elif sockets[i] == sockets[j]:
                pairs[(i, j)] = (LinkKind.PXB, 22.0)
            else:
                pairs[(i, j)] = (LinkKind.SYS, 10.0)
    topo = _two_socket(pairs, sockets)
    result = plan(topo, 48)
    for ch in result.channels:
        assert sorted(ch.order) == list(range(48))
    loads = _socket_loads(topo, {f"GPU{i}": s for i, s in enumerate(sockets)})
    assert max(loads.values()) <= 10.0 * (1 + 1e-6)
    # The widest ring crosses the sockets once each way: 10 GB/s.
    assert result.ring_bandwidth_gbps == pytest.approx(10.0)


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_real_two_socket_pastes_never_overdraw_the_socket_link() -> None:
    # Every published `nvidia-smi topo -m` paste in the corpus whose GPUs sit on two or more NUMA
    # nodes (by the paste's own NUMA or CPU affinity columns) and that has SYS paths between GPUs.
    from collbench.topology.nvidia_smi import read_nvidia_smi_topo

    checked = []
    for path in sorted([*FIXTURES.glob("real/*.topo.txt"), *FIXTURES.glob("topologies/*.topo.txt")]):
        topo = read_nvidia_smi_topo(path)
        gpus = topo.gpus
        keys = {g.id: g.numa_node if g.numa_node is not None else g.cpus for g in gpus}
        if len(gpus) < 2 or None in keys.values() or len(set(keys.values())) < 2:
            continue
        if not any(lk.kind == LinkKind.SYS for lk in topo.links if lk.a in keys and lk.b in keys):
            continue
        socket_of = {k: i for i, k in enumerate(dict.fromkeys(keys.values()))}
        socket = {g: socket_of[k] for g, k in keys.items()}
        sys_gbps = max(lk.bandwidth_gbps for lk in topo.links if lk.kind == LinkKind.SYS)
        for direction, gbps in _socket_loads(topo, socket).items():
            assert gbps <= sys_gbps * (1 + 1e-6), f"{path.name} {direction}: {gbps} GB/s over {sys_gbps}"
        checked.append(path.name)
    # The published DGX-1 hybrid cube-mesh is one of them (the 8 x V100 case).
    assert "dgx1-v100-x8-hybrid-cube-mesh-in-python-string.topo.txt" in checked


def _two_colouring_of_sys_pairs(topo: Topology) -> dict[str, int]:
    """Sockets from the SYS cells alone: every SYS pair crosses the sockets, so colour that graph."""
    gpus = [g.id for g in topo.gpus]
    across = {g: [h for h in gpus if (lk := topo.link(g, h)) is not None and lk.kind == LinkKind.SYS] for g in gpus}
    socket = {gpus[0]: 0}
    todo = [gpus[0]]
    while todo:
        g = todo.pop()
        for h in across[g]:
            if h not in socket:
                socket[h] = 1 - socket[g]
                todo.append(h)
            assert socket[h] != socket[g], f"the SYS pairs of {g} and {h} are not two sockets"
    assert len(socket) == len(gpus), "the SYS pairs leave some GPU's socket open"
    return socket


@pytest.mark.parametrize(
    "name",
    [
        # Quoted without its CPU/NUMA affinity columns: only NV# and SYS. Before, each SYS hop was a
        # link of its own, and a fifth ring crossed the sockets 8 times at 10 GB/s (40 GB/s each way
        # over a 10 GB/s link; 160 GB/s in all).
        "v100-x8-nv1-nv2-no-affinity-kep.topo.txt",
        # No NUMA column, and every GPU's CPU affinity is the same "1-1" with SOC between them. Before,
        # two rings crossed the sockets 4 times one way at 8.33 GB/s each (33 GB/s over 10).
        "p100-dgx1-x8-nv1-soc-4nics-glued-header.topo.txt",
    ],
)
def test_dgx1_pastes_that_name_no_socket_still_share_the_socket_link(name: str) -> None:
    # Neither paste names a NUMA node, and NVLink hides the PCIe paths between the GPUs.
    from collbench.topology.nvidia_smi import read_nvidia_smi_topo

    topo = read_nvidia_smi_topo(FIXTURES / "real" / name)
    assert all(g.numa_node is None for g in topo.gpus)
    socket = _two_colouring_of_sys_pairs(topo)
    assert sorted(g for g, s in socket.items() if s == 0) == ["GPU0", "GPU1", "GPU2", "GPU3"]
    sys_gbps = max(lk.bandwidth_gbps for lk in topo.links if lk.kind == LinkKind.SYS)
    for direction, gbps in _socket_loads(topo, socket).items():
        assert gbps <= sys_gbps * (1 + 1e-6), f"{direction}: {gbps} GB/s over a {sys_gbps} GB/s socket link"
    # The GPUs' own NVLink (6 x 25 GB/s) bounds what rings can add up to.
    assert plan(topo, 8).ring_bandwidth_gbps <= 6 * 25.0 + 1e-6


def test_gpus_of_unknown_socket_on_two_pcie_domains_keep_their_per_direction_links() -> None:
    # No affinity, but the PCIe paths (NODE inside, SYS across) split the GPUs into two sockets: the
    # per-direction socket resources already hold, and the rings still get the link each way.
    node, sys = (LinkKind.NODE, 18.0), (LinkKind.SYS, 10.0)
    sockets = [0, 0, 1, 1]
    pairs = {(i, j): node if sockets[i] == sockets[j] else sys for i in range(4) for j in range(i + 1, 4)}
    devices = tuple(Device(id=f"GPU{i}", kind=DeviceKind.GPU, index=i) for i in range(4))
    links = tuple(Link(a=f"GPU{i}", b=f"GPU{j}", kind=k, bandwidth_gbps=bw) for (i, j), (k, bw) in pairs.items())
    topo = Topology(host="t", devices=devices, links=links)
    loads = _socket_loads(topo, {f"GPU{i}": s for i, s in enumerate(sockets)})
    assert max(loads.values()) == pytest.approx(10.0)
