"""NCCL's own cost model (``collbench/models/nccl_cost.py``) against NVIDIA/nccl v2.30.7's
``src/graph/tuning.cc``: the latencies and bandwidths it computes by hand from the source's formulas."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.errors import ConfigError
from collbench.models.nccl_calibrate import SizeCurve, calibrate
from collbench.models.nccl_cost import nccl_choice, nccl_time_us
from collbench.models.nccl_machine import NcclMachine
from collbench.schedules.ops import Op

H100 = NcclMachine(bus_bw_gbps=300.0, arch="hopper")


def test_tree_ll_latency_is_base_plus_intra_and_inter_hops() -> None:
    # 16 ranks on 2 nodes: baseLat[Tree][LL] 6.8 + 2 ((ppn-1) x NVLink 0.6 + log2(2) x NET 5.0).
    choice = nccl_choice(H100, Op.ALL_REDUCE, 16, 2, 8.0)
    assert (choice.algo, choice.proto) == ("tree", "LL")
    assert choice.latency_us == pytest.approx(6.8 + 2 * (7 * 0.6 + 1 * 5.0))


def test_ring_simple_latency_and_bandwidth_at_a_large_size() -> None:
    size = float(1 << 32)
    choice = nccl_choice(H100, Op.ALL_REDUCE, 16, 2, size)
    assert (choice.algo, choice.proto) == ("ring", "Simple")
    # 2(n-1) = 30 steps, 2 (nodes-1) = 2 of them inter-node (NET 14.0); the others at
    # max(NVLink 3.4, net overhead 1.0 x 3); then x1.4, the ring's plateau across nodes.
    latency = (8.4 + 28 * 3.4 + 2 * 14.0) * 1.4
    assert choice.latency_us == pytest.approx(latency)
    algbw = 300.0 * 16 / 30
    assert choice.time_us == pytest.approx(latency + size / (1e3 * algbw))


def test_one_node_uses_nvlink_latencies_and_no_network_steps() -> None:
    choice = nccl_choice(H100, Op.ALL_GATHER, 8, 1, 64.0)
    assert choice.algo == "ring"  # all-gather has no tree
    assert choice.latency_us == pytest.approx(6.6 + 7 * 0.6)


def test_pci_machines_leave_ll128_off() -> None:
    pci = dataclasses.replace(H100, nvlink=False)
    protos = {nccl_choice(pci, Op.ALL_REDUCE, 2, 1, float(1 << k)).proto for k in range(3, 34)}
    assert "LL128" not in protos


def test_nccls_own_tree_correction_steps_and_the_smoothed_one_rises() -> None:
    # The tree's correction factor jumps at powers of two; NCCL's model can price a larger size lower.
    ll_tree = NcclMachine(bus_bw_gbps=40.0, arch="ampere", nvlink=False)
    edge = 64.0 * (1 << 15)  # treeCorrectionFactor[Simple] goes from .5 to .6 here
    before = nccl_choice(ll_tree, Op.ALL_REDUCE, 64, 64, edge - 1)
    after = nccl_choice(ll_tree, Op.ALL_REDUCE, 64, 64, edge)
    assert (before.algo, before.proto) == (after.algo, after.proto) == ("tree", "Simple")
    assert after.time_us < before.time_us
    smooth_before = nccl_time_us(ll_tree, Op.ALL_REDUCE, 64, 64, edge - 1, smooth=True)
    smooth_after = nccl_time_us(ll_tree, Op.ALL_REDUCE, 64, 64, edge, smooth=True)
    assert smooth_after >= smooth_before


@settings(max_examples=40, deadline=None)
@given(
    ranks_per_node=st.sampled_from([1, 2, 4, 8]),
    nodes=st.integers(1, 512),
    bus=st.floats(5.0, 900.0),
    arch=st.sampled_from(["volta", "ampere", "hopper", "blackwell"]),
    sizes=st.lists(st.integers(1, 1 << 36), min_size=2, max_size=30),
)
def test_smoothed_model_never_falls_with_size(
    ranks_per_node: int, nodes: int, bus: float, arch: str, sizes: list[int]
) -> None:
    ranks = ranks_per_node * nodes
    if ranks < 2:
        return
    machine = NcclMachine(bus_bw_gbps=bus, arch=arch)  # type: ignore[arg-type]
    times = [nccl_time_us(machine, Op.ALL_REDUCE, ranks, nodes, float(s), smooth=True) for s in sorted(sizes)]
    assert all(b >= a for a, b in itertools.pairwise(times))


def test_calibration_recovers_a_known_machine() -> None:
    truth = dataclasses.replace(H100, latency_scale=2.5, bus_bw_gbps=180.0)
    sizes = [float(1 << k) for k in range(3, 34)]
    times = [nccl_time_us(truth, Op.ALL_REDUCE, 16, 2, s, smooth=True) for s in sizes]
    found = calibrate(H100, Op.ALL_REDUCE, 16, 2, sizes, times)
    assert found.latency_scale == pytest.approx(2.5, rel=0.1)
    assert found.bus_bw_gbps == pytest.approx(180.0, rel=0.05)


@settings(max_examples=40, deadline=None)
@given(
    op=st.sampled_from([Op.ALL_REDUCE, Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.BROADCAST]),
    ranks_per_node=st.sampled_from([1, 2, 8, 72]),
    nodes=st.integers(1, 64),
    arch=st.sampled_from(["volta", "ampere", "hopper", "blackwell"]),
    nvlink=st.booleans(),
    scale=st.floats(0.05, 20.0),
    bus=st.floats(1.0, 900.0),
    sizes=st.lists(st.integers(1, 1 << 36), min_size=1, max_size=20),
)
def test_the_calibrations_curve_is_nccl_time_us_to_the_last_bit(
    op: Op, ranks_per_node: int, nodes: int, arch: str, nvlink: bool, scale: float, bus: float, sizes: list[int]
) -> None:
    """calibrate prices its grid through SizeCurve (what depends on size alone worked out once: the
    calibration took 580 x 40 scalar nccl_choice calls a fit, most of bench_predict's time); every
    time must be the scalar model's, bit for bit, so calibrations are unchanged."""
    ranks = ranks_per_node * nodes
    if ranks < 2:
        return
    base = NcclMachine(bus_bw_gbps=100.0, arch=arch, nvlink=nvlink)  # type: ignore[arg-type]
    curve = SizeCurve(base, op, ranks, nodes, [float(s) for s in sizes])
    trial = dataclasses.replace(base, latency_scale=scale, bus_bw_gbps=bus)
    expected = [nccl_time_us(trial, op, ranks, nodes, float(s), smooth=True) for s in sizes]
    assert curve.at(trial).tolist() == expected


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ConfigError):
        nccl_choice(H100, Op.ALL_REDUCE, 1, 1, 8.0)
    with pytest.raises(ConfigError):
        nccl_choice(H100, Op.ALL_REDUCE, 4, 6, 8.0)  # more nodes than ranks
    with pytest.raises(ConfigError):
        NcclMachine(bus_bw_gbps=0.0)


def test_a_part_full_last_node_is_priced_by_its_fullest_node() -> None:
    # 17 ranks at 8 a node: nodes of 8, 8 and 1. The tree's chain within a node is the fullest node's
    # (8 ranks), as at 16 ranks on 2, so one more rank on a third node never makes the call cheaper.
    even = nccl_choice(H100, Op.ALL_REDUCE, 16, 2, 8.0, smooth=True)
    part = nccl_choice(H100, Op.ALL_REDUCE, 17, 3, 8.0, smooth=True, fullest_node=8)
    assert part.time_us >= even.time_us
    # As even as they go without it (6, 6, 5): NCCL's nRanks / nNodes, rounded up.
    assert nccl_choice(H100, Op.ALL_REDUCE, 17, 3, 8.0, fullest_node=6) == nccl_choice(H100, Op.ALL_REDUCE, 17, 3, 8.0)


def test_pat_only_with_one_gpu_a_node_for_reduce_scatter_and_all_gather() -> None:
    # tuning.cc ncclPatEnable: "PAT only supports 1 GPU per node"; Simple only; base 8 us, 2.8 us a
    # rank and log2(nNodes) network hops at a 3.5th of the tree's 14 us; bus bandwidth x0.75.
    machine = NcclMachine(bus_bw_gbps=50.0, arch="hopper")
    small = nccl_choice(machine, Op.ALL_GATHER, 64, 64, 1024.0)
    assert (small.algo, small.proto) == ("pat", "Simple")
    assert small.latency_us == pytest.approx(8.0 + 6 * 14.0 / 3.5 + 64 * 2.8)
    assert small.time_us == pytest.approx(small.latency_us + 1024.0 / (1e3 * 50.0 * 0.75))
    assert nccl_choice(machine, Op.REDUCE_SCATTER, 64, 64, 1024.0).algo == "pat"
    # Eight GPUs a node, or all-reduce: never PAT.
    assert nccl_choice(machine, Op.ALL_GATHER, 64, 8, 1024.0).algo == "ring"
    assert nccl_choice(machine, Op.ALL_REDUCE, 64, 64, 1024.0).algo in ("ring", "tree")
