"""NCCL's topology search (``collbench/models/nccl_graph.py``) and its switch algorithms (NVLS, NVLS-tree,
CollNet: ``nccl_switch.py``, enabled in ``nccl_cost.py``) against NVIDIA/nccl v2.30.7 (commit 5067397c):
``src/graph/search.cc`` (``ncclTopoCompute``: the speed arrays, pass 1 and 2, ``ncclTopoDupChannels``,
``ncclTopoSearchTryNvls``), ``src/graph/connect.cc`` (``ncclTopoPostset``: the channels doubled),
``src/graph/tuning.cc`` (``ncclTopoTuneModel``: NVLS/CollNet bandwidths, latencies, enable rules) and
``src/enqueue.cc`` (``updateCollCostTable``: CollNet up to 8 GPUs a node, NVLS across nodes only with
CollNet). Every expected value is worked by hand from those formulas."""

from __future__ import annotations

import dataclasses

import pytest

from collbench.errors import ConfigError
from collbench.models.nccl_cost import algorithm_bw_gbps, nccl_choice
from collbench.models.nccl_graph import (
    NcclNode,
    NodeFacts,
    comm_channels,
    node_of,
    nvls_graph,
    nvls_graph_over,
    ring_graph,
)
from collbench.models.nccl_machine import NcclMachine, with_topology
from collbench.schedules.ops import Op

# topo.h: SM90_NVLINK_BW 20.6 and SM100_NVLINK_BW 40.1 GB/s a link, 18 links a GPU.
H100 = NcclNode(gpus=8, sm=90, gpu_nvlink_gbps=18 * 20.6, nvls=True)
A100 = NcclNode(gpus=8, sm=80, gpu_nvlink_gbps=12 * 20.0)
B200 = NcclNode(gpus=8, sm=100, gpu_nvlink_gbps=18 * 40.1, nvls=True)


def test_h100_ring_one_node_six_channels_at_60_doubled_to_twelve_at_30() -> None:
    # sm90SpeedArrayIntra starts at 60: 370.8 / 60 = 6 channels (360). 50 (7 x 50 = 350), 40 (9 x 40 =
    # 360, not more) and 30 (12 x 30) do not beat it; 24 / 60 < 0.49 ends pass 1. DupChannels: 60 GB/s
    # is over 50, so 12 channels at 30; pass 2 cannot raise 12 channels to 40 (9 fit).
    ring = ring_graph(H100, 1)
    assert (ring.channels, ring.bw_intra_gbps, ring.bus_bw_gbps) == (12, 30.0, 360.0)
    # ncclTopoPostset doubles the communicator's channels: 24 run.
    assert comm_channels(ring, H100, 1) == 24


def test_a100_ring_ends_at_the_gpus_whole_bandwidth_and_b200_doubles_to_sixteen() -> None:
    # speedArrayIntra 40: 6 channels use all 240 GB/s (nChannels x bw >= totalBw ends the search);
    # doubled (sm 80 is not > 80): 12 x 20.
    ring = ring_graph(A100, 1)
    assert (ring.channels, ring.bw_intra_gbps) == (12, 20.0)
    # sm100SpeedArrayIntra 90: 721.8 / 90 = 8 channels; doubled to 16 at 45; 50 fits 14 < 16.
    assert (ring_graph(B200, 1).channels, ring_graph(B200, 1).bw_intra_gbps) == (16, 45.0)


def test_across_nodes_the_nics_bound_the_ring_and_hopper_keeps_16_channels_running() -> None:
    node = dataclasses.replace(H100, nics=8, nic_gbps=50.0)
    # sm90SpeedArrayInter: 48 fits 7 GPU channels (336); 45 fits 8 (360, one a NIC); 42, 40, 30 and 24
    # are not more; 22 / 45 < 0.49. 45 is under 50 with 8 channels: not doubled.
    ring = ring_graph(node, 2)
    assert (ring.channels, ring.bw_intra_gbps) == (8, 45.0)
    assert "8 NICs of 50 GB/s" in ring.why
    # Postset: 16; the "<16 channels, bwIntra > 45" doubling does not apply at 45.
    assert comm_channels(ring, node, 2) == 16
    slow = dataclasses.replace(H100, nics=2, nic_gbps=12.5)
    # Two 100 Gb/s NICs: 12 GB/s fits one channel a NIC; 6 GB/s (6/12 > 0.49) two a NIC: 4 x 6 = 24 is
    # equal, not more.
    assert ring_graph(slow, 2).channels * ring_graph(slow, 2).bw_inter_gbps == pytest.approx(24.0)


def test_nvls_graph_one_head_a_gpu_each_costing_n_plus_1_channels() -> None:
    # One node: 8 heads (minChannels = maxChannels), a head carrying (8 + 1) x s: 40 GB/s (9 x 40 =
    # 360 <= 370.8); pass 2 raises the speed between nodes while under twice 40: 50, 60.
    graph = nvls_graph(H100, 1)
    assert graph is not None
    assert (graph.channels, graph.bw_intra_gbps, graph.bw_inter_gbps) == (8, 40.0, 60.0)
    # An NVL72 rack: 32 heads at most (NCCL_MAX_NVLS_ARITY), 33 x 20 <= 721.8.
    rack = nvls_graph(dataclasses.replace(B200, gpus=72), 1)
    assert rack is not None and (rack.channels, rack.bw_intra_gbps) == (32, 20.0)


def test_no_nvls_without_nvlink_sharp_or_across_nodes_without_nics() -> None:
    assert nvls_graph(A100, 1) is None
    assert nvls_graph(H100, 2) is None  # its heads are the GPUs with a NIC: not known
    across = nvls_graph(dataclasses.replace(H100, nics=8, nic_gbps=50.0), 2)
    # 48: 6 heads (7 x 48 <= 370.8); 45: 7; 40: 8 (more channels win); then the NICs take 42, 45, 48.
    assert across is not None and (across.channels, across.bw_intra_gbps, across.bw_inter_gbps) == (8, 40.0, 48.0)


def test_every_rank_takes_the_fewest_nvls_heads_of_any_node() -> None:
    # Each rank searches its own node: one NVLS head a GPU of it with a NIC (search.cc line 1127,
    # maxChannels = min(NCCL_MAX_NVLS_ARITY, GPUs)), and init.cc (lines 1437-1442) aligns every rank on
    # the smallest nChannels, bwIntra and bwInter any rank found. 13 ranks on nodes of 8: the last
    # node's 5 GPUs find 5 heads at 48 GB/s (6 x 48 <= 370.8), the full node 8 at 40 (48 a NIC), so
    # every rank runs 5 heads x 40, 48 a NIC.
    node = dataclasses.replace(H100, nics=8, nic_gbps=50.0)
    part = nvls_graph(dataclasses.replace(node, gpus=5), 2)
    assert part is not None and (part.channels, part.bw_intra_gbps, part.bw_inter_gbps) == (5, 48.0, 48.0)
    graph = nvls_graph_over(node, 2, fewest_gpus=5)
    assert graph is not None and (graph.channels, graph.bw_intra_gbps, graph.bw_inter_gbps) == (5, 40.0, 48.0)
    assert "5 GPUs on the last" in graph.why
    machine = with_topology(NcclMachine(bus_bw_gbps=360.0, arch="hopper"), node, 2, fewest_gpus=5)
    # tuning.cc: 5 x min(40 x .85 x 4/5 x 2 = 54.4, 48 x 2, perChMaxNVLSTreeBws hopper N2 57.7), x 13 / 24.
    nvls_tree = algorithm_bw_gbps(machine, Op.ALL_REDUCE, "nvls_tree", 2, 13, 2)
    assert nvls_tree == pytest.approx(5 * 54.4 * 13 / 24)
    # Full nodes: the one search. A node of one GPU searches no NVLS graph (nvls.cc line 262:
    # gpuCount < 2), its ranks' nChannels 0 turns NVLS off for all (init.cc line 1453).
    assert nvls_graph_over(node, 2, fewest_gpus=8) == nvls_graph(node, 2)
    assert with_topology(NcclMachine(bus_bw_gbps=360.0), node, 2, fewest_gpus=1).nvls is None


def _h100_machine(nodes: int, **facts: object) -> NcclMachine:
    node = dataclasses.replace(H100, nics=8, nic_gbps=50.0) if nodes > 1 else H100
    collnet = bool(facts.get("collnet", False))
    return with_topology(NcclMachine(bus_bw_gbps=360.0, arch="hopper"), node, nodes, collnet=collnet)


def test_nvls_all_reduce_bandwidth_and_latency_as_tuning_cc_writes_them() -> None:
    machine = _h100_machine(1)
    size = float(1 << 30)
    choice = nccl_choice(machine, Op.ALL_REDUCE, 8, 1, size)
    assert (choice.algo, choice.proto) == ("nvls", "Simple")
    # busBw = 8 x min(40 x 0.85 x 7/8 x 2, 60) = 476; x nRanks / nsteps = 8 / 14. Latency: NVLink's
    # hwLatencies for NVLS, 25 us, no base latency.
    algbw = 8 * (40 * 0.85 * 7 / 8 * 2) * 8 / 14
    assert choice.latency_us == pytest.approx(25.0)
    assert choice.time_us == pytest.approx(25.0 + size / (1e3 * algbw))
    # Small sizes stay with the ring or tree (NVLS's 25 us is the largest latency).
    assert nccl_choice(machine, Op.ALL_REDUCE, 8, 1, 1024.0).algo in ("ring", "tree")


def test_nvls_all_gather_within_a_node_and_not_across_without_collnet() -> None:
    machine = _h100_machine(1)
    # All-gather: x (ppn - 1) / ppn and no bus-to-algorithm conversion: 8 x 40 x 0.85 x 7/8 x 7/8 =
    # 208 GB/s, under the ring's 360 x 8/7: NCCL's model keeps the ring for it on one H100 node.
    nvls_bw = algorithm_bw_gbps(machine, Op.ALL_GATHER, "nvls", 2, 8, 1)
    assert nvls_bw == pytest.approx(8 * 40 * 0.85 * 7 / 8 * 7 / 8)
    assert nccl_choice(machine, Op.ALL_GATHER, 8, 1, float(1 << 32)).algo == "ring"
    two = _h100_machine(2)
    assert {nccl_choice(two, Op.ALL_GATHER, 16, 2, float(1 << k)).algo for k in range(3, 34)} == {"ring"}


def test_nvls_tree_only_across_nodes_with_its_per_channel_cap() -> None:
    machine = _h100_machine(2)
    assert machine.nvls is not None
    size = float(1 << 32)
    choice = nccl_choice(machine, Op.ALL_REDUCE, 16, 2, size)
    assert (choice.algo, choice.proto) == ("nvls_tree", "Simple")
    # min(40 x .85 x 7/8 x 2 = 59.5, 48 x 2 (two nodes), perChMaxNVLSTreeBws hopper N2 57.7) = 57.7.
    algbw = 8 * 57.7 * 16 / 30
    # NVLink 25 + 2 log2(2) x NET 20.9.
    assert choice.latency_us == pytest.approx(25.0 + 2 * 20.9)
    assert choice.time_us == pytest.approx(choice.latency_us + size / (1e3 * algbw))
    # NVLS alone across nodes needs CollNet: never chosen here.
    algos = {nccl_choice(machine, Op.ALL_REDUCE, 16, 2, float(1 << k)).algo for k in range(3, 36)}
    assert "nvls" not in algos and "collnet_direct" not in algos and "collnet_chain" not in algos


def test_collnet_only_with_a_plugin_two_nodes_and_eight_gpus_a_node_at_most() -> None:
    machine = _h100_machine(2, collnet=True)
    chain_bw = algorithm_bw_gbps(machine, Op.ALL_REDUCE, "collnet_chain", 2, 16, 2)
    direct_bw = algorithm_bw_gbps(machine, Op.ALL_REDUCE, "collnet_direct", 2, 16, 2)
    # Chain: the ring's channels x speed, x 0.5. Direct: 8 heads x 45, the GPU/NIC factor 1, x 0.85
    # on sm 90, x 0.5.
    assert chain_bw == pytest.approx(8 * 45.0 * 0.5)
    assert direct_bw == pytest.approx(8 * 45.0 * 0.85 * 0.5)
    # NCCL enables the collnet algorithms at a shape where a plugin is declared, never without one.
    without = _h100_machine(2)
    off = {nccl_choice(without, Op.ALL_REDUCE, 16, 2, float(1 << k)).algo for k in range(3, 36)}
    on = {nccl_choice(machine, Op.ALL_REDUCE, 16, 2, float(1 << k)).algo for k in range(3, 36)}
    assert not off & {"collnet_direct", "collnet_chain"}
    assert on & {"collnet_direct", "collnet_chain", "nvls"}
    # 16 GPUs a node: over NCCL_MAX_DIRECT_ARITY + 1, CollNet is off (enqueue.cc).
    big = {nccl_choice(machine, Op.ALL_REDUCE, 32, 2, float(1 << k)).algo for k in range(3, 36)}
    assert not big & {"collnet_direct", "collnet_chain"}
    # One node: below NCCL_COLLNET_NODE_THRESHOLD (2).
    one = with_topology(NcclMachine(bus_bw_gbps=360.0), H100, 1, collnet=True)
    assert not {nccl_choice(one, Op.ALL_REDUCE, 8, 1, float(1 << k)).algo for k in range(3, 36)} & {
        "collnet_direct",
        "collnet_chain",
    }


def test_node_of_reads_the_board_and_leaves_unknown_or_meshed_gpus_alone() -> None:
    node = node_of("NVIDIA H100 80GB HBM3", 8, NodeFacts())
    assert node is not None and node.gpu_nvlink_gbps == pytest.approx(370.8) and node.nvls and node.x86
    grace = node_of("NVIDIA GB200", 72, NodeFacts(nics=18, nic_gbps=50.0))
    assert grace is not None and not grace.x86 and grace.nic_known()
    assert node_of("NVIDIA A100-SXM4-80GB", 8, NodeFacts()) is not None
    assert node_of("Tesla V100-SXM2-32GB", 8, NodeFacts()) is None  # DGX-1's mesh: not a switch
    assert node_of("NVIDIA GeForce RTX 2080 Ti", 2, NodeFacts()) is None
    with pytest.raises(ConfigError):
        NodeFacts(nics=2, nic_gbps=-1.0)


def test_with_topology_gives_nccls_own_ring_figure_at_each_shape() -> None:
    measured = with_topology(NcclMachine(bus_bw_gbps=300.0), H100, 1)
    # The ring's bus bandwidth NCCL's search gives (12 x 30 GB/s), which NCCL chooses by; the
    # calibrated 300 stays the machine's own.
    assert measured.topology_bus_bw_gbps == 360.0 and measured.bus_bw_gbps == 300.0
    own = measured.own_figures()
    assert own is not None and own.bus_bw_gbps == 360.0 and own.latency_scale == 1.0 and own.nvls_scale == 1.0
    assert NcclMachine(bus_bw_gbps=300.0).own_figures() is None
    # Across nodes with the NICs not known no channel count is claimed (NCCL's default stands), and no
    # NVLS graph (its heads are the GPUs with a NIC): a machine searched on one node carried its
    # one-node NVLS graph there, which enabled NVLS-tree across two and twenty GB200 racks.
    across = with_topology(measured, H100, 2)
    assert (across.channels, across.comm_channels, across.nvls, across.topology_bus_bw_gbps) == (16, None, None, None)


def test_no_ring_at_the_slowest_speed_falls_back_as_nccl_does() -> None:
    # search.cc, ncclTopoCompute's last resort: "Could not find a path for pattern %d, falling back to
    # simple order": the GPUs in order, bwIntra = bwInter = 0.1, nChannels = 1. A NIC of 1e-7 GB/s
    # (predict --nic-gbps 0.0000001) holds no channel at any speed NCCL tries.
    node = dataclasses.replace(H100, nics=1, nic_gbps=1e-7)
    ring = ring_graph(node, 2)
    assert (ring.channels, ring.bw_intra_gbps, ring.bw_inter_gbps) == (1, 0.1, 0.1)
    assert "fallback" in ring.why and "1e-07 GB/s" in ring.why


def test_nccls_own_model_never_falls_as_full_nodes_are_added_where_it_leaves_nvls_tree() -> None:
    # tuning.cc (v2.30.7) prices NVLS-tree's latency intraLat + 2 log2i(nNodes) interLat (line 428) and
    # the tree's 2 ((nRanks / nNodes - 1) intraLat + log2i(nNodes) interLat) (line 416): both step up
    # at a power of two of nodes, NVLS-tree's by 2 x 20.9 us against the tree's 2 x 8.5 (LL128), so
    # NCCL leaves NVLS-tree for the tree there (3 -> 4 nodes at 2 MiB, 15 -> 16 at 16 MiB, 63 -> 64 at
    # 32 MiB). Its own time still rises: a collbench prediction that falls at those node counts
    # (benchmarks/README.md, the H100 cluster with its NICs) comes from the fit's calibration, not
    # from NCCL's model.
    flips = {1 << 21: 4, 1 << 24: 16, 1 << 25: 64}
    for size, at in flips.items():
        before = nccl_choice(_h100_machine(at - 1), Op.ALL_REDUCE, 8 * (at - 1), at - 1, float(size))
        after = nccl_choice(_h100_machine(at), Op.ALL_REDUCE, 8 * at, at, float(size))
        assert (before.algo, after.algo) == ("nvls_tree", "tree"), size
        assert after.time_us > before.time_us
    sizes = [float(1 << k) for k in range(3, 34)]
    for smooth in (False, True):
        previous: list[float] | None = None
        for nodes in range(1, 65):
            machine = _h100_machine(nodes)
            times = [nccl_choice(machine, Op.ALL_REDUCE, 8 * nodes, nodes, s, smooth=smooth).time_us for s in sizes]
            if previous is not None:
                falls = [(nodes, s) for s, a, b in zip(sizes, previous, times, strict=True) if b < a]
                assert falls == [], (smooth, falls)
            previous = times


def test_across_h100_nodes_each_family_is_bound_by_its_own_per_channel_cap_not_the_nics() -> None:
    # What bounds NVLS-tree with the NICs declared (tuning.cc v2.30.7 lines 311-322: bw = min(intraBw,
    # interBw, perChMaxNVLSTreeBw)): its NVSwitch part 40 x .85 x 7/8 x 2 = 59.5 a channel, its NIC part
    # 48 (x2 on 2 nodes, line 320) and perChMaxNVLSTreeBws hopper (line 276, N2 57.7, N4 45.5): the cap,
    # below both. The tree's (line 331: min(busBw x .92, nChannels x perChMaxTreeBw)) is its own
    # cap beyond 2 nodes too: 8 x 36.0 = 288 under 8 x 45 GB/s a NIC x .92 = 331. So a scale fitted to
    # NVLS-tree's times measured NVLS-tree's cap, not a link the tree shares in NCCL's model, and it
    # stays NVLS's (nvls_scale), not the tree's (benchmarks/README.md, the H100 cluster: the full-node
    # decreases where NCCL leaves NVLS-tree for the tree stay).
    for nodes, nvls_cap, tree_cap in ((2, 57.7, 41.4), (4, 45.5, 36.0), (16, 45.5, 36.0)):
        machine = _h100_machine(nodes)
        ranks = 8 * nodes
        nvls_tree = algorithm_bw_gbps(machine, Op.ALL_REDUCE, "nvls_tree", 2, ranks, nodes)
        assert nvls_tree == pytest.approx(8 * nvls_cap * ranks / (2 * (ranks - 1)))
        assert nvls_cap < min(40 * 0.85 * 7 / 8 * 2, 48.0 * (2 if nodes <= 2 else 1))
        tree = algorithm_bw_gbps(machine, Op.ALL_REDUCE, "tree", 2, ranks, nodes)
        assert tree == pytest.approx(8 * tree_cap * 0.5)
        fitted = dataclasses.replace(machine, nvls_scale=0.851, nvls_measured=True)
        assert algorithm_bw_gbps(fitted, Op.ALL_REDUCE, "nvls_tree", 2, ranks, nodes) == pytest.approx(
            0.851 * nvls_tree
        )
        assert algorithm_bw_gbps(fitted, Op.ALL_REDUCE, "tree", 2, ranks, nodes) == tree
