"""NCCL's algorithms that reduce in a switch, as ``src/graph/tuning.cc`` prices them: NVLS and
NVLS-tree (NVLink SHARP, the NVSwitch reducing) and CollNet direct and chain (a network switch
reducing, through a CollNet plugin). NVIDIA/nccl v2.30.7 (commit 5067397c), ``ncclTopoTuneModel``:
the constants (``nvlsEfficiency``, ``perChMaxNVLSTreeBws``, ``hwLatencies`` of these algorithms), their
bandwidths (lines 311-382) and latencies (lines 384-428). They run the Simple protocol only, and have
no base latency. Which of them NCCL enables at a shape is ``nccl_cost._algorithms``'.
"""

from __future__ import annotations

import math

from collbench.models.nccl_machine import NcclMachine

_TREE_NET_SIMPLE_US = 14.0
"""``hwLatencies[NET][Tree][Simple]``: the network's latency with one rank a node (line 387)."""

_NVLS_EFFICIENCY = {"volta": 0.0, "ampere": 0.0, "hopper": 0.85, "blackwell": 0.74}
"""tuning.cc ``nvlsEfficiency`` per compute capability class."""
_PER_CH_NVLS_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 80.0))
"""tuning.cc ``perChMaxNVLSTreeBws`` [compcap][min(nodes, 3) - 1], GB/s a channel."""
_HW_LAT: dict[str, tuple[float, float, float]] = {
    "collnet_direct": (3.7, 3.7, 31.0),
    "collnet_chain": (2.8, 2.8, 30.0),
    "nvls": (25.0, 0.0, 18.0),
    "nvls_tree": (25.0, 0.0, 20.9),
}
"""``hwLatencies`` (us) of the Simple-only algorithms, per link class NVLink, PCI, NET (their base
latencies are 0)."""
NVLS_FIGURE_CHECK = "no published NVLS run here checks it"
"""What is known of NCCL's NVLS figure against a measurement, said wherever a prediction rests on it
unmeasured. The published NVL72 racks here (tests/fixtures/real/all_reduce_perf-gb200-*rank-*.log)
ran with ``NCCL_NVLS_ENABLE=0`` (CoreWeave's example jobs, coreweave/nccl-tests a736384): their times
are the ring's and tree's, not NVLS's (tests/unit/test_nccl_nvls_calibration.py), so they say nothing
of NVLS's figure; an earlier text here compared it with the 72-rank run as if that had run NVLS."""
MAX_DIRECT_ARITY = 7
"""device.h ``NCCL_MAX_DIRECT_ARITY``: CollNet runs with up to 8 GPUs a node (enqueue.cc
``updateCollCostTable``), CollNet-direct's graph has that many heads at most (search.cc)."""
MAX_NVLS_ARITY = 32
"""device.h ``NCCL_MAX_NVLS_ARITY``: NVLS runs reduce-scatter and all-gather with up to 32 GPUs a node."""
SWITCH_ALGORITHMS = frozenset(_HW_LAT)
NVLS_ALGORITHMS = frozenset({"nvls", "nvls_tree"})
"""The algorithms NVLink SHARP runs: the NVSwitch reduces, so what their time says of the links is not
what a ring's or tree's says (the NVSwitch's reduction, ``nvlsEfficiency``, bounds them); a
calibration gives them a figure of their own (``NcclMachine.nvls_scale``)."""


def switch_bandwidth(
    machine: NcclMachine, algo: str, ranks: int, nodes: int, all_reduce: bool, steps: int, arch: int, col: int
) -> float:
    """NVLS's, NVLS-tree's and CollNet's algorithm bandwidth (GB/s), Simple: tuning.cc lines 311-382.

    ``steps``: the ring's ``nsteps`` (all-reduce's bus bandwidth is converted by ``nRanks / nsteps``,
    reduce-scatter's and all-gather's not). NVLS's graph (its heads and speeds,
    ``nccl_graph.nvls_graph``) is NCCL's topology figure, times ``NcclMachine.nvls_scale`` (1 where no
    NVLS time was measured): not the ring's calibration, whose links (NVLink, NICs) NVLS shares but
    whose bound (each GPU's NVLinks) is not NVLS's (the NVSwitch's reduction, ``nvlsEfficiency``).
    One scale serves NVLS and NVLS-tree: on the boards here NVLS-tree's per-channel bandwidth is its
    NVSwitch part (GB200: 28.7 GB/s against 80 between nodes), so both measure the same reduction.
    CollNet's graphs are taken as the ring's (its channels and speed; CollNet-direct one head a GPU up
    to 8), which NCCL searches separately."""
    ppn = ranks / nodes
    if algo in ("nvls", "nvls_tree"):
        graph = machine.nvls
        assert graph is not None
        ch = graph.channels
        intra = graph.bw_intra_gbps * _NVLS_EFFICIENCY[machine.arch] * (ch - 1) / ch
        # All-reduce pipelines its reduce-scatter and all-gather halves through the switch.
        intra *= 2.0 if all_reduce else (ppn - 1) / ppn
        inter = graph.bw_inter_gbps * (2 if nodes <= 2 and algo == "nvls_tree" else 1)
        cap = _PER_CH_NVLS_TREE[arch][col] if algo == "nvls_tree" else math.inf
        if machine.nvls_net_scale is None:
            bw = min(intra, inter, cap) * machine.nvls_scale
        else:
            # The NVSwitch's part at the fitted scale, the NICs' at theirs; the per-channel cap names no
            # link in tuning.cc and keeps the NVLS scale.
            scale = machine.nvls_scale
            bw = min(intra * scale, inter * machine.nvls_net_scale, cap * scale)
        bus = ch * bw
        return bus * ranks / steps if all_reduce else bus
    per_channel = machine.bus_bw_gbps / machine.channels
    if algo == "collnet_chain":
        return machine.channels * per_channel * 0.5
    heads = min(MAX_DIRECT_ARITY + 1, -(-ranks // nodes))
    bus = heads * per_channel
    # "Collnet+Direct requires all GPUs to have a local NIC to work at full speed" (GPU/NIC ratio).
    factor = ppn / heads
    factor -= (factor - 1) / 2
    bus /= factor
    if machine.arch in ("hopper", "blackwell"):
        bus *= 0.85
    return bus * 0.5


def switch_latency(
    machine: NcclMachine,
    algo: str,
    ranks: int,
    nodes: int,
    fullest: int | None,
    scales: tuple[float, float] = (1.0, 1.0),
) -> tuple[float, float]:
    """NVLS's, NVLS-tree's and CollNet's latency (us), and the part of it that is the network's
    (``interLat``'s): tuning.cc lines 384-428 (base latency 0). ``scales``: what multiplies the terms
    within a node (``intraLat``, CollNet's arity serialization) and what multiplies the network's
    (``interLat``); (1, 1) is NCCL's own."""
    local, net_scale = scales
    nvlink, pci, net = _HW_LAT[algo]
    intra = (nvlink if machine.nvlink else pci) * local
    # With one rank a node the network's latency is the tree's (line 387).
    inter = (_TREE_NET_SIMPLE_US if ranks == nodes else net) * net_scale
    if algo == "nvls":
        hop = inter if nodes > 1 else 0.0
        return intra + hop, hop
    if algo == "nvls_tree":
        hops = 2 * int(math.log2(nodes)) * inter
        return intra + hops, hops
    chain = fullest if fullest is not None else -(-ranks // nodes)
    if algo == "collnet_direct":
        # "0.4 us arity serialization latency" a local rank.
        return 2 * (min(1, chain - 1) * intra + (chain - 1) * 0.4 * local) + inter, inter
    return 2 * (chain - 1) * intra + inter, inter
