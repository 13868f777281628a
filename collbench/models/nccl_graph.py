"""What NCCL's topology search finds on a node: its ring's and NVLS's channels and bandwidths.

NCCL's cost model (``nccl_cost.py``) prices each algorithm from the graph its topology search found:
``graphs[a]->nChannels`` times the bandwidth per channel (``bwIntra`` within nodes, ``bwInter`` between
them). This module follows that search (NVIDIA/nccl v2.30.7, commit 5067397c, ``src/graph/search.cc``:
``ncclTopoCompute``, ``ncclTopoDupChannels``, ``ncclTopoSearchTryNvls``, ``ncclTopoSearchRecNet``;
``src/graph/connect.cc``: ``ncclTopoPostset``; ``src/init.cc``: the ring graph's 1 to 32 channels) on
a node described by what a user knows of it: its GPUs, their NVLinks to an NVSwitch, its NICs.

The search is a depth-first search over GPU orders that takes each channel's bandwidth off every link
it crosses. On the nodes described here every GPU reaches the others through the NVSwitch, so a
channel at speed ``s`` costs each GPU ``s`` of its NVLink bandwidth (both ways), and across nodes one
NIC ``s`` of its speed: at a speed the search finds as many channels as those budgets hold, which is
what :func:`_fits` counts. The speeds tried and the order they are tried in are NCCL's own
(``speedArrayIntra``/``Inter`` per compute capability, pass 1 then pass 2). A node whose links are not
known to follow that pattern (a PCIe box, an NVLink mesh without a switch) is not described here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from collbench.errors import ConfigError
from collbench.topology.bandwidth import NVLINK_GBPS_PER_LINK, GpuLinks, gpu_links

# search.cc: the speeds (GB/s a channel) the search tries, best first, per compute capability class.
_SPEEDS_INTRA = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
_SPEEDS_INTER = (
    48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12
)  # fmt: skip
_SM90_SPEEDS_INTRA = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)
_SM90_SPEEDS_INTER = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)
_SM100_SPEEDS_INTRA = (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)
_SM100_SPEEDS_INTER = (
    96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12
)  # fmt: skip

RING_MAX_CHANNELS = 32
"""init.cc: the ring graph searches ``MAXCHANNELS / 2`` channels at most (MAXCHANNELS 64, device.h)."""
_MAX_CHANNELS = 64
"""device.h ``MAXCHANNELS``: what ``ncclTopoPostset`` caps the communicator's channels at."""
NVLS_MAX_ARITY = 32
"""device.h ``NCCL_MAX_NVLS_ARITY``: the NVLS graph has one channel (head) per GPU, up to this many."""
_CLOSE_ENOUGH = 0.49
"""search.cc pass 1 lowers the speed while the next is above this share of the best found."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclNode:
    """One node as NCCL's topology search sees it, where every GPU reaches the others through NVSwitch."""

    gpus: int
    """GPUs in the node (NCCL's system; an NVL72 rack is one node of 72)."""
    sm: int
    """Compute capability x10: picks the speeds the search tries."""
    gpu_nvlink_gbps: float
    """Each GPU's NVLinks together at NCCL's figure per link (``SM90_NVLINK_BW`` 20.6 GB/s...)."""
    nvls: bool = False
    """NVLink SHARP (NVSwitch 3 and later, sm 90 and up): NCCL's NVLS graph is searched."""
    nics: int = 0
    """NICs in the node; 0 where not known."""
    nic_gbps: float | None = None
    """Each NIC's speed, GB/s a direction (NCCL's ``speed`` in Mb/s / 8000); None where not known."""
    x86: bool = True
    """An x86 CPU (Grace boards are ARM)."""

    def __post_init__(self) -> None:
        if self.gpus < 1 or not self.gpu_nvlink_gbps > 0 or self.nics < 0:
            raise ConfigError("a node needs at least one GPU with NVLinks, and no negative NIC count")
        if self.nic_gbps is not None and not (self.nic_gbps > 0 and math.isfinite(self.nic_gbps)):
            raise ConfigError(f"a NIC's speed must be a positive number of GB/s, got {self.nic_gbps}")

    def speeds(self, across_nodes: bool) -> tuple[float, ...]:
        if self.sm >= 100:
            return _SM100_SPEEDS_INTER if across_nodes else _SM100_SPEEDS_INTRA
        if self.sm >= 90:
            return _SM90_SPEEDS_INTER if across_nodes else _SM90_SPEEDS_INTRA
        return _SPEEDS_INTER if across_nodes else _SPEEDS_INTRA

    def nic_known(self) -> bool:
        return self.nics > 0 and self.nic_gbps is not None


_NCCL_NVLINK_GBPS: tuple[tuple[int, float], ...] = ((100, 40.1), (90, 20.6), (80, 20.0), (70, 20.0))
"""NCCL's bandwidth of one NVLink by compute capability x10 (src/graph/topo.h, ``SM100_NVLINK_BW``
40.1, ``SM90_NVLINK_BW`` 20.6, ``SM80_NVLINK_BW`` and ``SM70_NVLINK_BW`` 20.0, GB/s), the figure its
topology search gives every NVLink, below the links' nominal 25 and 50 GB/s."""


def nccl_nvlink_bus_gbps(gpu: GpuLinks) -> float | None:
    """The bus bandwidth NCCL's topology search finds within one node of ``gpu``: its NVLinks, each at
    NCCL's own figure (``_NCCL_NVLINK_GBPS``), a ring's channels together using all of them; None for a
    GPU without listed NVLinks."""
    if gpu.nvlink_gbps is None or gpu.sm < 70:
        return None
    nominal = NVLINK_GBPS_PER_LINK[5 if gpu.sm >= 100 else 4 if gpu.sm >= 90 else 3 if gpu.sm >= 80 else 2]
    links = round(gpu.nvlink_gbps / nominal)
    per_link = next(gbps for sm, gbps in _NCCL_NVLINK_GBPS if gpu.sm >= sm)
    return links * per_link


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeFacts:
    """What a user declares of the nodes beyond what the fits' GPU tells: their NICs, a CollNet plugin."""

    nics: int = 0
    """NICs a node; 0 where not known."""
    nic_gbps: float | None = None
    """Each NIC's speed, GB/s a direction; None where not known."""
    collnet: bool = False
    """A CollNet (in-network reduction) plugin is loaded and enabled; NCCL runs without one by default."""
    nvls: bool = True
    """NCCL may run NVLS and NVLS-tree where the GPUs have NVLink SHARP (``NCCL_NVLS_ENABLE``'s default);
    False where the runs set ``NCCL_NVLS_ENABLE=0``: NCCL then runs ring and tree there (its search
    makes no NVLS graph), so what was measured is theirs and so is what is asked."""

    def __post_init__(self) -> None:
        if self.nics < 0 or (self.nic_gbps is not None and not (self.nic_gbps > 0 and math.isfinite(self.nic_gbps))):
            raise ConfigError("NICs: a count of 0 or more and a positive speed in GB/s")

    def nic_known(self) -> bool:
        return self.nics > 0 and self.nic_gbps is not None


_GRACE_BOARDS = ("GB200", "GB300", "GH200")
"""Boards whose CPU is NVIDIA Grace (ARM), not x86."""


def node_of(device: str, gpus: int, facts: NodeFacts) -> NcclNode | None:
    """The node NCCL's search sees with ``gpus`` GPUs named ``device`` (a listed SXM board of sm 80 or
    later, whose GPUs reach each other through an NVSwitch), or None where it is not known."""
    gpu = gpu_links(device) if device else None
    if gpu is None or gpu.sm < 80:
        return None
    bw = nccl_nvlink_bus_gbps(gpu)
    if bw is None:
        return None
    return NcclNode(
        gpus=gpus,
        sm=gpu.sm,
        gpu_nvlink_gbps=bw,
        nvls=gpu.nvswitch_reduction and facts.nvls,
        nics=facts.nics,
        nic_gbps=facts.nic_gbps,
        x86=gpu.name not in _GRACE_BOARDS,
    )


@dataclass(frozen=True, slots=True)
class Graph:
    """One of NCCL's graphs: its channels and each channel's bandwidth (GB/s) within and between nodes."""

    channels: int
    bw_intra_gbps: float
    bw_inter_gbps: float
    why: str
    """How the search got there, in a few words (for predict's basis)."""

    @property
    def bus_bw_gbps(self) -> float:
        """``nChannels * bw``: the bus bandwidth NCCL's model gives the ring (tuning.cc)."""
        return self.channels * self.bw_intra_gbps


def _ring_fits(node: NcclNode, across_nodes: bool) -> Callable[[float], int]:
    """Channels a ring holds at a speed: each crosses every GPU's NVLinks once each way, and across
    nodes leaves and enters by one NIC (whose speed the search takes each channel's off,
    ``ncclTopoSearchRecNet``)."""

    def fits(speed: float) -> int:
        n = int(node.gpu_nvlink_gbps / speed + 1e-9)
        if across_nodes and node.nic_known():
            assert node.nic_gbps is not None
            n = min(n, node.nics * int(node.nic_gbps / speed + 1e-9))
        return n

    return fits


def _pass_one(
    speeds: tuple[float, ...], start: int, fits: Callable[[float], int], max_channels: int, total_gbps: float
) -> tuple[int, float]:
    """search.cc pass 1: from the first speed tried, lower it while the next is above 0.49 of the best
    found, keeping a graph only where it carries more (``ncclTopoCompareGraphs``: channels x bw)."""
    best_n, best_s = 0, 0.0
    for i in range(start, len(speeds)):
        s = speeds[i]
        if best_n and s / best_s <= _CLOSE_ENOUGH:
            break
        n = min(fits(s), max_channels)
        if n >= 1 and n * s > best_n * best_s:
            best_n, best_s = n, s
        # An optimal graph (every channel found) or one using all the GPU's bandwidth ends the search.
        if best_n == max_channels or best_n * best_s >= total_gbps:
            break
    return best_n, best_s


_FALLBACK_GBPS = 0.1
"""The speed of the one channel NCCL's search falls back to where it finds no graph (search.cc)."""


def ring_graph(node: NcclNode, nodes: int) -> Graph:
    """The ring graph NCCL's search finds for ``nodes`` nodes of ``node`` (init.cc: 1 to 32 channels).

    Pass 1 (:func:`_pass_one`), then ``ncclTopoDupChannels`` (twice the channels at half the speed where
    the speed is 25 GB/s or more, except on sm > 80 below 50 GB/s with over 4 channels), then pass 2
    (the speed raised while the channels still fit)."""
    across = nodes > 1
    speeds = node.speeds(across)
    total = node.gpu_nvlink_gbps
    max_bw = min(total, node.nic_gbps) if across and node.nic_known() and node.nic_gbps is not None else total
    start = next((i for i, s in enumerate(speeds) if s <= max_bw and s <= total), len(speeds) - 1)
    fits = _ring_fits(node, across)
    n, s = _pass_one(speeds, start, fits, RING_MAX_CHANNELS, total)
    if n == 0:
        # NCCL does not fail here: ncclTopoCompute's last resort (src/graph/search.cc, "Could not find
        # a path for pattern %d, falling back to simple order") takes the GPUs in order, one channel at
        # 0.1 GB/s (bwIntra = bwInter = 0.1), after both passes.
        nic = f" with NICs of {node.nic_gbps:g} GB/s" if across and node.nic_gbps is not None else ""
        why = f"no ring at NCCL's slowest speed{nic}: its fallback, 1 channel of {_FALLBACK_GBPS:g} GB/s"
        return Graph(1, _FALLBACK_GBPS, _FALLBACK_GBPS, why)
    dup = s >= 25.0 and not (node.sm > 80 and s < 50.0 and n > 4)
    if dup:
        doubled = min(2 * n, RING_MAX_CHANNELS)
        s /= -(-doubled // n)
        n = doubled
    # Pass 2: a faster speed where the channels found still fit.
    i = next((k for k, v in enumerate(speeds) if v <= s), len(speeds) - 1)
    while i > 0 and fits(speeds[i - 1]) >= n:
        i -= 1
        s = speeds[i]
    nic = f", {node.nics} NICs of {node.nic_gbps:g} GB/s a node" if across and node.nic_known() else ""
    why = f"a ring of {n} x {s:g} GB/s on {node.gpu_nvlink_gbps:g} GB/s of NVLink a GPU{nic}"
    return Graph(n, s, s, why)


def comm_channels(ring: Graph, node: NcclNode, nodes: int) -> int:
    """The communicator's channels (``comm->nChannels``), which the ring's plateau test divides by:
    ``ncclTopoPostset`` doubles the ring graph's, and doubles them again across nodes on sm 90 and up
    where the ring's speed is over 45 GB/s and they are under 16."""
    n = min(_MAX_CHANNELS, 2 * ring.channels)
    if node.sm >= 90 and nodes > 1 and ring.bw_intra_gbps > 45.0 and n < 16:
        n = min(_MAX_CHANNELS, 2 * n)
    return n


def nvls_graph(node: NcclNode, nodes: int) -> Graph | None:
    """NCCL's NVLS graph (``ncclTopoCompute``, pattern NVLS), or None where NCCL has none: no NVLink
    SHARP, fewer than 2 GPUs, or across nodes with the NICs not known (its heads are the GPUs with a NIC).

    Each channel has one GPU as its head, which the switch's traffic reaches twice
    (``ncclTopoSearchTryNvls``: a path of weight 2 to and from the head, 1 for the others): n heads at
    speed s cost every head (n + 1) s of its NVLinks. On one node every GPU is a head (``minChannels =
    maxChannels``); across nodes one a NIC (``ncclTopoSearchRecNet``), at the NIC's speed, more
    channels preferred, and pass 2 raises the speed between nodes alone."""
    if not node.nvls or node.gpus < 2 or node.sm < 90:
        return None
    across = nodes > 1
    if across and not node.nic_known():
        return None
    speeds = node.speeds(across)
    total = node.gpu_nvlink_gbps
    heads_max = min(NVLS_MAX_ARITY, node.gpus) if not across else min(NVLS_MAX_ARITY, node.gpus, node.nics)

    def heads(speed: float) -> int:
        n = min(int(total / speed + 1e-9) - 1, heads_max)
        if across:
            assert node.nic_gbps is not None
            n = n if speed <= node.nic_gbps else 0
        return n

    if not across:
        # One node: all GPUs are heads, at the first speed where they fit (searched down from the
        # first whose channels' sum is within the GPU's bandwidth).
        need = heads_max
        speed = next((s for s in speeds if s * need <= total and heads(s) >= need), None)
        if speed is None:
            return None
        inter = _nvls_inter(speeds, speed, None)
        return Graph(need, speed, inter, f"NVLS: {need} heads x {speed:g} GB/s")
    best_n, best_s = 0, 0.0
    start = next((i for i, s in enumerate(speeds) if node.nic_gbps is not None and s <= node.nic_gbps), len(speeds))
    for s in speeds[start:]:
        if best_n and s / best_s <= _CLOSE_ENOUGH:
            break
        n = heads(s)
        # ncclTopoCompareGraphs for NVLS: more channels, or more channels x bw between nodes.
        if n >= 1 and (n > best_n or n * s > best_n * best_s):
            best_n, best_s = n, s
    if best_n == 0:
        return None
    inter = _nvls_inter(speeds, best_s, node.nic_gbps)
    why = f"NVLS: {best_n} heads x {best_s:g} GB/s, {inter:g} GB/s a NIC"
    return Graph(best_n, best_s, inter, why)


def nvls_graph_over(node: NcclNode, nodes: int, fewest_gpus: int | None = None) -> Graph | None:
    """The NVLS graph a communicator over ``nodes`` nodes of ``node`` runs where one node holds fewer
    GPUs (``fewest_gpus``: the part-full last one). Each rank searches its own node, whose heads are
    its own GPUs (``nvls_graph``), and NCCL aligns every rank on the smallest (:func:`aligned`): the
    fewest GPUs of any node set the heads (search.cc line 1127: ``maxChannels = std::min(NCCL_MAX_NVLS_ARITY,
    system->nodes[GPU].count)``). A node of one GPU searches no NVLS graph (``src/transport/nvls.cc``
    line 262, ``ncclNvlsInit``: ``gpuCount < 2``), so the communicator has none."""
    full = nvls_graph(node, nodes)
    if fewest_gpus is None or fewest_gpus >= node.gpus:
        return full
    fewest = nvls_graph(dataclasses.replace(node, gpus=max(fewest_gpus, 1)), nodes)
    graph = aligned(full, fewest)
    if graph is None or graph == full:
        return graph
    return dataclasses.replace(
        graph,
        why=f"NVLS: {graph.channels} heads x {graph.bw_intra_gbps:g} GB/s, {graph.bw_inter_gbps:g} GB/s a NIC "
        f"(every rank takes the fewest heads of any node: {fewest_gpus} GPUs on the last)",
    )


def aligned(full: Graph | None, fewest: Graph | None) -> Graph | None:
    """One graph for every rank, as NCCL aligns each rank's search before tuning (v2.30.7 ``src/init.cc``
    lines 1437-1442, "Make sure we align all ranks so that the tuning is consistent across ranks":
    ``graphs[a]->nChannels = std::min(...)`` over every rank's graph info, and likewise ``bwIntra`` and
    ``bwInter``), here of two nodes' searches; None where either found none (nChannels 0: line 1453
    then turns NVLS off for the communicator)."""
    if full is None or fewest is None:
        return None
    channels = min(full.channels, fewest.channels)
    intra = min(full.bw_intra_gbps, fewest.bw_intra_gbps)
    inter = min(full.bw_inter_gbps, fewest.bw_inter_gbps)
    if (channels, intra, inter) == (full.channels, full.bw_intra_gbps, full.bw_inter_gbps):
        return full
    return Graph(channels, intra, inter, full.why)


def _nvls_inter(speeds: tuple[float, ...], intra: float, nic_gbps: float | None) -> float:
    """search.cc pass 2 for NVLS: the speed between nodes raised a step at a time while it is under
    twice the speed within the node and the NIC (if any) carries the next."""
    i = speeds.index(intra)
    inter = intra
    while i > 0 and inter < 2 * intra and (nic_gbps is None or speeds[i - 1] <= nic_gbps):
        i -= 1
        inter = speeds[i]
    return inter
