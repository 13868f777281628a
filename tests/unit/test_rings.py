"""Ring search: exact against brute force on real topologies, the capacity model, random topologies."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
from _layout_topologies import topology_from
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.layouts.fabric import RingFabric, fabric_from_topology
from collbench.layouts.rings import (
    EXACT_MAX_RANKS,
    best_ring,
    heuristic_ring,
    link_loads,
    pack_channels,
    ring_key,
)
from collbench.topology.model import LinkKind, Topology

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(__file__).resolve().parents[1] / "fixtures" / "topologies"
NVML = REPO / "tests" / "fixtures" / "nvml"


def _read(path: Path) -> Topology:
    if path.suffix == ".xml":
        from collbench.topology.nccl_xml import read_nccl_xml

        return read_nccl_xml(path)
    if path.suffix == ".json":
        from collbench.topology.sources import discover_topology

        return discover_topology(nvml_replay=path)
    from collbench.topology.nvidia_smi import read_nvidia_smi_topo

    return read_nvidia_smi_topo(path)


def _fixture_paths() -> list[Path]:
    shared = sorted(p for p in SHARED.glob("*") if p.suffix in (".txt", ".xml"))
    nvml = sorted(NVML.glob("*.json")) if NVML.is_dir() else []
    return shared + nvml


def _fixture(name: str) -> Topology:
    path = SHARED / name
    return _read(path)


def brute_force_best(fabric: RingFabric) -> tuple[float, float]:
    """The best (bandwidth, -sum 1/bw) of any ring, over every order starting at rank 0."""
    residual = list(fabric.capacity_gbps)
    best = (-1.0, -math.inf)
    for rest in itertools.permutations(range(1, fabric.n)):
        key = ring_key(fabric, (0, *rest), residual, math.inf)
        cand = (key[0], key[2])
        if cand[0] > best[0] + 1e-9 or (abs(cand[0] - best[0]) <= 1e-9 and cand[1] > best[1] + 1e-12):
            best = cand
    return best


@pytest.mark.parametrize("path", _fixture_paths(), ids=lambda p: p.name)
def test_ring_is_the_best_single_ring_by_brute_force(path: Path) -> None:
    fabric = fabric_from_topology(_read(path))
    if fabric.n < 2:
        pytest.skip("one rank: there is no ring to order")
    assert fabric.n <= 8, "brute force over all orders is only feasible for small machines"
    order, bw = best_ring(fabric, list(fabric.capacity_gbps))
    assert sorted(order) == list(range(fabric.n))
    want_bw, want_inv = brute_force_best(fabric)
    assert bw == pytest.approx(want_bw, rel=1e-9)
    got = ring_key(fabric, order, list(fabric.capacity_gbps), math.inf)
    assert got[2] == pytest.approx(want_inv, rel=1e-9)


def test_pcie_two_switch_trees_ring_crosses_sys_twice() -> None:
    fabric = fabric_from_topology(_fixture("pcie8-pix-pxb.topo.txt"))
    order, bw = best_ring(fabric, list(fabric.capacity_gbps))
    n = len(order)
    kinds = [fabric.kinds[order[k]][order[(k + 1) % n]] for k in range(n)]
    assert kinds.count(LinkKind.SYS) == 2
    # Both PIX pairs are used: the fastest links of each tree are on the ring.
    assert kinds.count(LinkKind.PIX) == 2
    assert bw == pytest.approx(10.0)


def test_nvswitch_channels_use_the_fabric_full_bandwidth() -> None:
    topo = _fixture("hgx-h100x8-nv18-nics.topo.txt")
    fabric = fabric_from_topology(topo)
    full = 18 * 25.0  # NV18 at 25 GB/s per link and direction
    assert sum(c.bandwidth_gbps for c in pack_channels(fabric)) == pytest.approx(full)
    four = pack_channels(fabric, channels=4)
    assert len(four) == 4
    assert [c.bandwidth_gbps for c in four] == pytest.approx([full / 4] * 4)
    # A GPU's NVLink ports are shared: more channels never add up to more than the fabric.
    assert sum(c.bandwidth_gbps for c in pack_channels(fabric, channels=16)) == pytest.approx(full)


def test_all_pairs_nvlink_channels_use_every_link_in_both_directions() -> None:
    fabric = fabric_from_topology(_fixture("a100x4-nv4-nics.topo.txt"))
    channels = pack_channels(fabric)
    # 4 GPUs, 3 peers each over NV4 (100 GB/s per direction): 300 GB/s out of every GPU.
    assert sum(c.bandwidth_gbps for c in channels) == pytest.approx(300.0)
    loads = link_loads(fabric, channels)
    n = fabric.n
    for i in range(n):
        for j in range(n):
            if i != j:
                assert loads[i * n + j] == pytest.approx(100.0)


def test_later_channels_get_what_earlier_ones_left() -> None:
    # Ring 0-1-2-3 on NVLink; 0-2 and 1-3 are PCIe: the reverse ring reuses the NVLink cables in
    # the other direction, then nothing NVLink-only is left.
    nv, pc = LinkKind.NVLINK, LinkKind.PIX
    kinds = [[nv, nv, pc, nv], [nv, nv, nv, pc], [pc, nv, nv, nv], [nv, pc, nv, nv]]
    bw = [[50.0 if kinds[i][j] == nv else 20.0 for j in range(4)] for i in range(4)]
    fabric = fabric_from_topology(topology_from(kinds, bw))
    channels = pack_channels(fabric, channels=2)
    assert [c.bandwidth_gbps for c in channels] == pytest.approx([50.0, 50.0])
    assert set(channels[0].order[1:]) == {1, 2, 3}
    first, second = channels[0].order, channels[1].order
    assert second == (first[0], *reversed(first[1:]))


_KINDS = [LinkKind.NVLINK, LinkKind.NVSWITCH, LinkKind.PIX, LinkKind.PXB, LinkKind.PHB, LinkKind.SYS]


@st.composite
def random_topologies(draw: st.DrawFn, max_n: int = 7) -> Topology:
    n = draw(st.integers(min_value=2, max_value=max_n))
    kinds = [[LinkKind.PIX] * n for _ in range(n)]
    bw = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            kinds[i][j] = kinds[j][i] = draw(st.sampled_from(_KINDS))
            bw[i][j] = bw[j][i] = draw(st.sampled_from([5.0, 10.0, 20.0, 25.0, 50.0, 100.0]))
    return topology_from(kinds, bw)


@settings(max_examples=60, deadline=None)
@given(random_topologies(), st.one_of(st.none(), st.integers(min_value=1, max_value=6)))
def test_random_topologies_rings_visit_every_rank_and_never_overdraw(topo: Topology, channels: int | None) -> None:
    fabric = fabric_from_topology(topo)
    packed = pack_channels(fabric, channels=channels)
    assert packed, "a connected topology always has a ring"
    for ch in packed:
        assert sorted(ch.order) == list(range(fabric.n))
        assert ch.bandwidth_gbps > 0
    assert [c.bandwidth_gbps for c in packed] == sorted((c.bandwidth_gbps for c in packed), reverse=True)
    if channels is not None:
        assert len(packed) <= channels
    loads = link_loads(fabric, packed)
    for r, (load, cap) in enumerate(zip(loads, fabric.capacity_gbps, strict=True)):
        assert load <= cap * (1 + 1e-6) + 1e-9, f"{fabric.resource_names[r]}: {load} > {cap}"
    # Per directed link, in particular: the pair resources are the first n*n.
    n = fabric.n
    for i in range(n):
        for j in range(n):
            if i != j:
                assert loads[i * n + j] <= fabric.bandwidth_gbps[i][j] * (1 + 1e-6)


@settings(max_examples=40, deadline=None)
@given(random_topologies(max_n=6))
def test_random_topologies_best_ring_matches_brute_force(topo: Topology) -> None:
    fabric = fabric_from_topology(topo)
    order, bw = best_ring(fabric, list(fabric.capacity_gbps))
    if fabric.n < 3:
        assert sorted(order) == list(range(fabric.n))
        return
    want_bw, want_inv = brute_force_best(fabric)
    assert bw == pytest.approx(want_bw, rel=1e-9)
    assert ring_key(fabric, order, list(fabric.capacity_gbps), math.inf)[2] == pytest.approx(want_inv, rel=1e-9)


def test_large_machine_uses_the_heuristic_and_finds_the_fast_cycle() -> None:
    # 16 ranks: fast links only between ring neighbours of a scrambled cycle; the heuristic finds it.
    n = 16
    assert n > EXACT_MAX_RANKS
    cycle = [0, 5, 9, 2, 14, 7, 11, 3, 8, 13, 1, 6, 15, 10, 4, 12]
    fast = {frozenset((cycle[k], cycle[(k + 1) % n])) for k in range(n)}
    kinds = [[LinkKind.NVLINK if frozenset((i, j)) in fast else LinkKind.SYS for j in range(n)] for i in range(n)]
    bw = [[50.0 if frozenset((i, j)) in fast else 5.0 for j in range(n)] for i in range(n)]
    fabric = fabric_from_topology(topology_from(kinds, bw))
    order = heuristic_ring(fabric, list(fabric.capacity_gbps), tuple(range(n)))
    assert sorted(order) == list(range(n))
    order2, bw2 = best_ring(fabric, list(fabric.capacity_gbps))
    assert bw2 == pytest.approx(50.0)
    assert {frozenset((order2[k], order2[(k + 1) % n])) for k in range(n)} == fast


def test_layouts_past_the_rank_bound_are_refused_in_one_line() -> None:
    from collbench.errors import ConfigError
    from collbench.layouts.fabric import MAX_LAYOUT_RANKS
    from collbench.topology.model import Device, DeviceKind

    n = MAX_LAYOUT_RANKS + 1
    devices = tuple(Device(id=f"CPU{i}", kind=DeviceKind.CPU, index=i) for i in range(n))
    with pytest.raises(ConfigError, match=f"{n} ranks; layouts are computed for at most {MAX_LAYOUT_RANKS}"):
        fabric_from_topology(Topology(host="h", devices=devices, links=()))


def test_hop_table_and_hop_resources_agree() -> None:
    # The array the vectorised searches read and the tuples the exact search reads are one model.
    topo = _read(NVML / "dgx1-v100.json")
    fabric = fabric_from_topology(topo)
    residual = list(fabric.capacity_gbps)
    matrix = fabric.hop_bandwidth_matrix(residual)
    for i in range(fabric.n):
        for j in range(fabric.n):
            if i != j:
                assert fabric.hop(i, j) == fabric.hop_resources[i][j]
                assert matrix[i, j] == fabric.hop_bandwidth(residual, i, j)
