"""NCCL's own cost model for its ring and tree algorithms, as ``src/graph/tuning.cc`` writes it.

NCCL picks an (algorithm, protocol) per call by pricing each as ``latency + bytes / bandwidth``
(``ncclTopoGetAlgoTime``) and running the cheapest. This module follows NVIDIA/nccl v2.30.7
(commit 5067397c2676d5aed50042fc39e5c8ee96eb0027), ``src/graph/tuning.cc``:

* the constants: ``baseLatencies`` (lines 150-151), ``hwLatencies`` per link class NVLink, PCI and NET
  (lines 157-175), ``llMaxBws`` (178-183), ``perChMaxRingLL128Bws`` (185-190), ``perChMaxTreeLL128Bws``
  (192-197), ``perChMaxTreeBws`` (199-204);
* ``ncclTopoTuneModel`` (lines 288-413): the steps per collective (``nsteps``), each protocol's bus
  bandwidth from the graph's (``busBw`` and its refinements, lines 324-336), bus to algorithm bandwidth
  (lines 376-382), and the latencies: a ring pays ``nsteps - nInterSteps`` intra-node hops and
  ``2 (nNodes - 1)`` inter-node hops (lines 393-413, network post overhead included), a tree
  ``2 ((ppn - 1) intraLat + log2(nNodes) interLat)`` (line 416);
* ``ncclTopoGetAlgoTime`` (lines 630-654): the tree all-reduce's per-size correction factor (623-627),
  the ring's plateau factor across nodes (647-650), one operation per call.

Only the five collectives NCCL tunes (``NCCL_TUNED_OPS``) have a place in this model: all-to-all,
scatter, gather, send/recv and barrier NCCL runs as grouped ``ncclSend``/``ncclRecv`` (nccl-tests'
``alltoall.cu``, ``scatter.cu``, ``gather.cu``, ``sendrecv.cu``), which ``ncclTopoTuneModel`` never
prices (and NCCL has no barrier: ``torch.distributed`` runs one as an all-reduce of one byte);
:func:`nccl_choice` refuses them rather than price them as a ring they do not run.

Ring and tree are priced, and PAT for reduce-scatter and all-gather where every node holds one GPU
(NCCL's own condition, read from the shape). NVLS, NVLS-tree and CollNet need facts about the
machine (NVSwitch SHARP, a CollNet plugin) that a measured log does not give, and are not priced.
What NCCL reads from its topology search, and a fit does not hold, is a parameter here: the ring's
bus bandwidth (``nChannels * bw``, the same for the tree graph), the channel count for the
per-channel caps, the GPU generation, whether links within a node are NVLink, and whether LL128 is
enabled. ``latency_scale`` multiplies every latency: 1 is NCCL's own model; a fitted value keeps
NCCL's structure with this machine's latencies.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from collbench.errors import ConfigError, NotApplicableError
from collbench.nccl.algorithms import PROTOCOLS
from collbench.schedules.ops import NCCL_TUNED_OPS, Op
from collbench.topology.bandwidth import NVLINK_GBPS_PER_LINK, GpuLinks, compute_capability

NCCL_SOURCE = "NVIDIA/nccl v2.30.7 src/graph/tuning.cc"

Arch = Literal["volta", "ampere", "hopper", "blackwell"]
ARCHS: tuple[Arch, ...] = ("volta", "ampere", "hopper", "blackwell")
# Indices into NCCL's protocols (collbench.nccl.algorithms.PROTOCOLS: LL, LL128, Simple, NCCL's own order).
_LL, _LL128, _SIMPLE = (PROTOCOLS.index(p) for p in ("LL", "LL128", "Simple"))

# baseLatencies (us), per protocol LL, LL128, Simple.
_BASE_LAT = {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
# hwLatencies (us) per link class, algorithm and protocol.
_HW_LAT = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)},
}
# llMaxBws (GB/s): [compcap index for one node, or CPU vendor (Intel 0, AMD 1) across nodes][min(nodes, 3) - 1].
_LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (2 * 141.0, 2 * 45.0, 2 * 35.0))
_PER_CH_RING_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (40.0, 40.0, 40.0))
_PER_CH_TREE_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (55.6, 31.67, 20.0))
_PER_CH_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))
# treeCorrectionFactor[protocol][log2(bytes / 64)], 64 B to 256 MiB.
_TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0),
    (0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9),
)
"""The first 23 entries of each row: ``ncclTopoGetAlgoTime`` reads them for ``0 <= logSize < 23`` only."""
_NET_OVERHEAD_US = 1.0
"""getNetOverhead on Intel x86 and unknown CPUs (AMD: 2.0); tripled for Simple."""

LATENCY_SHARE_TO_FIT = 0.2
"""The least share of the time at the smallest measured size that latency must take for the points to
tell a latency scale; below it NCCL's own latencies are kept."""

DEFAULT_CHANNELS = 16
"""Channels assumed for the per-channel caps and the ring's plateau test, where the topology is not known."""


DEFAULT_ARCH: Arch = "hopper"
"""The generation taken where the GPU is not known (no device name in the rows, or an unlisted one)."""


def arch_of(gpu: GpuLinks | None, device_name: str = "") -> Arch:
    """NCCL's compute-capability class of a GPU (tuning.cc, ``compCapIndex``: sm 100 and up Blackwell,
    90 Hopper, 80 Ampere, else Volta), from a listed board, else from the device name of a known PCIe
    card (``compute_capability``: an RTX 5090 is Blackwell, an RTX 2080 Ti Volta's class), or
    ``DEFAULT_ARCH`` where the GPU is not known."""
    sm = gpu.sm if gpu is not None else compute_capability(device_name) if device_name else 0
    if sm <= 0:
        return DEFAULT_ARCH
    if sm >= 100:
        return "blackwell"
    if sm >= 90:
        return "hopper"
    return "ampere" if sm >= 80 else "volta"


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
class NcclMachine:
    """What NCCL's topology search gives its cost model, and a fit does not hold."""

    bus_bw_gbps: float
    """The ring graph's bus bandwidth, ``nChannels * bw`` (the tree graph's taken the same)."""
    arch: Arch = "hopper"
    nvlink: bool = True
    """Links within a node are NVLink (else PCI): picks ``hwLatencies``' class, and enables LL128."""
    channels: int = DEFAULT_CHANNELS
    amd_cpu: bool = False
    latency_scale: float = 1.0
    """Multiplies every latency; 1 is NCCL's own model."""
    inter_bus_bw_gbps: float | None = None
    """The bus bandwidth NCCL uses beyond two nodes (``bwInter``); None: the same as ``bus_bw_gbps``."""

    def __post_init__(self) -> None:
        if not self.bus_bw_gbps > 0 or not math.isfinite(self.bus_bw_gbps):
            raise ConfigError(f"NCCL's model needs a positive bus bandwidth, got {self.bus_bw_gbps}")
        if self.arch not in ARCHS:
            raise ConfigError(f"unknown GPU generation {self.arch!r}; known: {', '.join(ARCHS)}")
        if self.channels < 1 or not self.latency_scale >= 0:
            raise ConfigError("NCCL's model needs at least one channel and a latency scale >= 0")


@dataclass(frozen=True, slots=True)
class NcclChoice:
    """The (algorithm, protocol) NCCL's model prices cheapest at one size, and its time."""

    algo: str
    proto: str
    time_us: float
    latency_us: float


@dataclass(frozen=True, slots=True)
class _Collective:
    """What tuning.cc says of one collective (it branches on ``coll`` where this reads a field)."""

    steps: Callable[[int], int]
    """The ring's ``nsteps`` over n ranks (``ncclFuncSteps``): its bandwidth is ``busBw * nRanks / nsteps``."""
    net_steps: Callable[[int], int]
    """How many of the ring's steps cross the network on m nodes (their latency is the network's)."""
    candidates: Callable[[int, int], tuple[str, ...]]
    """(ranks, nodes) -> the algorithms priced. Only all-reduce has the tree among ring and tree. PAT
    runs reduce-scatter and all-gather where every node holds one GPU (tuning.cc ncclPatEnable, lines
    216-223: "PAT only supports 1 GPU per node"; lines 295-303: those two collectives, Simple only)."""
    chained: bool = False
    """The ring runs it as a chain (broadcast, reduce): one hop's latency (sameChannels, line 397)."""
    all_reduce: bool = False
    """All-reduce's own terms: the tree's latency up and down (lines 420-427), the tree's correction
    factors and the ring's plateau over nodes (:func:`_tree_correction`, :func:`_plateau_factor`)."""


def _ring_and_pat(ranks: int, nodes: int) -> tuple[str, ...]:
    return ("ring", "pat") if nodes == ranks else ("ring",)


_COLLECTIVES: dict[Op, _Collective] = {
    Op.ALL_REDUCE: _Collective(
        steps=lambda n: 2 * (n - 1),
        net_steps=lambda m: 2 * (m - 1),
        candidates=lambda ranks, nodes: ("tree", "ring"),
        all_reduce=True,
    ),
    Op.REDUCE_SCATTER: _Collective(steps=lambda n: n - 1, net_steps=lambda m: m - 1, candidates=_ring_and_pat),
    Op.ALL_GATHER: _Collective(steps=lambda n: n - 1, net_steps=lambda m: m - 1, candidates=_ring_and_pat),
    Op.BROADCAST: _Collective(
        steps=lambda n: n, net_steps=lambda m: m - 1, candidates=lambda ranks, nodes: ("ring",), chained=True
    ),
    Op.REDUCE: _Collective(
        steps=lambda n: n, net_steps=lambda m: m - 1, candidates=lambda ranks, nodes: ("ring",), chained=True
    ),
}
"""The collectives NCCL tunes, each as tuning.cc prices it: the one place this model names an op."""


_PAT_BASE_LAT_US = 8.0
"""baseLatencies for PAT (tuning.cc line 154), every protocol."""
_PAT_BUS_SHARE = 0.75
"""``if (a == NCCL_ALGO_PAT) busBw *= .75`` (line 337); PAT's bus bandwidth is its algorithm
bandwidth for reduce-scatter and all-gather (no ``nRanks / nsteps`` conversion, lines 376-382)."""


def _bandwidth(machine: NcclMachine, op: Op, algo: str, proto: int, ranks: int, nodes: int) -> float:
    """Algorithm bandwidth (GB/s) of (algo, proto): tuning.cc lines 306-382, ring, tree and PAT."""
    arch = ARCHS.index(machine.arch)
    col = min(nodes, 3) - 1
    ll_max = _LL_MAX_BW[arch if nodes == 1 else (1 if machine.amd_cpu else 0)][col]
    inter = machine.inter_bus_bw_gbps if machine.inter_bus_bw_gbps is not None else machine.bus_bw_gbps
    bus = machine.bus_bw_gbps if nodes <= 2 else inter
    ch = machine.channels
    if algo == "pat":
        return bus * _PAT_BUS_SHARE
    if algo == "ring":
        if proto == _LL:
            bus = min(ll_max, bus * 0.5)
        elif proto == _LL128:
            bus = min(bus * 0.92, ch * _PER_CH_RING_LL128[arch][col])
        return bus * ranks / _COLLECTIVES[op].steps(ranks)
    bus = min(bus * 0.92, ch * _PER_CH_TREE[arch][col])
    if proto == _LL:
        bus = min(bus / 3.8, ll_max)
    elif proto == _LL128:
        bus = min(bus * (7.0 / 9.0 if nodes == 1 else 120.0 / 128.0), ch * _PER_CH_TREE_LL128[arch][col])
    return bus * 0.5


def _latency(
    machine: NcclMachine, op: Op, algo: str, proto: int, ranks: int, nodes: int, fullest: int | None = None
) -> float:
    """Latency (us) of (algo, proto): tuning.cc lines 384-432, ring, tree and PAT."""
    if algo == "pat":
        # Lines 429-432: log2(nNodes) network hops at a 3.5th of the tree's network latency (one GPU a
        # node: hwLatencies NET, Tree, Simple), plus 2.8 us a rank.
        inter_pat = _HW_LAT["net"]["tree"][_SIMPLE]
        return _PAT_BASE_LAT_US + int(math.log2(nodes)) * (inter_pat / 3.5) + ranks * 2.8
    intra_class = "nvlink" if machine.nvlink else "pci"
    ppn = ranks / nodes
    lat = _BASE_LAT[algo][proto]
    intra = _HW_LAT[intra_class][algo][proto]
    # With one rank per node the tree's network latency is exposed on every hop (line 387).
    inter = _HW_LAT["net"]["tree" if ppn == 1 else algo][proto]
    coll = _COLLECTIVES[op]
    nsteps = coll.steps(ranks)
    if algo == "ring":
        if coll.chained:
            hw = _HW_LAT[intra_class if nodes == 1 else "net"]["ring"][proto]
            return lat + hw  # sameChannels: one hop's latency (line 397)
        overhead = 0.0
        if nodes > 1:
            overhead = _NET_OVERHEAD_US * (2.0 if machine.amd_cpu else 1.0) * (3.0 if proto == _SIMPLE else 1.0)
        intra = max(intra, overhead)
        inter_steps = 0 if nodes == 1 else coll.net_steps(nodes)
        return lat + (nsteps - inter_steps) * intra + inter_steps * inter
    if coll.all_reduce:
        # NCCL writes nRanks / nNodes (whole nodes); where the last node is part-full the chain within
        # the fullest node is the one waited for (the same when even).
        chain = fullest if fullest is not None else -(-ranks // nodes)
        lat += 2 * ((chain - 1) * intra + int(math.log2(nodes)) * inter)
    return lat


def _tree_correction(proto: int, size_bytes: float, smooth: bool) -> float:
    """treeCorrectionFactor at ``log2(bytes >> 6)`` (NCCL's steps), or interpolated in log size.

    NCCL's own table steps at powers of two, so its predicted time can fall when a size crosses one;
    ``smooth`` interpolates between the table's entries instead, which keeps time rising with size
    (a factor never grows by more than 25% per doubling).
    """
    table = _TREE_CORRECTION[proto]
    units = size_bytes / 64.0
    if units < 1:
        return 1.0
    x = math.log2(units)
    if not smooth:
        idx = math.floor(x)
        return table[idx] if idx < len(table) else 1.0
    # Interpolated between the entries, and from the last entry to 1 over the next doubling.
    ends = (*table, 1.0)
    if x >= len(ends) - 1:
        return 1.0
    lo = math.floor(x)
    return ends[lo] + (ends[lo + 1] - ends[lo]) * (x - lo)


def _plateau_factor(machine: NcclMachine, bytes_per_channel_rank: float, smooth: bool) -> float:
    """The ring's plateau factor across nodes (ncclTopoGetAlgoTime: x1.4, x1.9 on Volta, from 64 bytes
    a channel and rank), or with ``smooth`` ramped in over the doubling below 64.

    NCCL's own step falls when a rank is added at a fixed size (the bytes a channel and rank drop
    under 64): its time then goes down as ranks are added. Ramped over a doubling of bytes per rank,
    the factor falls by at most ``factor - 1`` while the ring's latency (its steps) doubles, so the
    time keeps rising with ranks, and still rises with size.
    """
    factor = 1.9 if machine.arch == "volta" else 1.4
    if not smooth:
        return factor if bytes_per_channel_rank >= 64 else 1.0
    if bytes_per_channel_rank <= 0:
        return 1.0
    ramp = min(max(math.log2(bytes_per_channel_rank / 64.0) + 1.0, 0.0), 1.0)
    return 1.0 + (factor - 1.0) * ramp


def _tuned(op: Op | str) -> Op:
    """``op`` as an Op; raise NotApplicableError for one NCCL does not tune (grouped send/recv in NCCL)."""
    the_op = op if isinstance(op, Op) else Op.parse(op)
    if not the_op.spec.nccl_tuned:
        tuned = ", ".join(o.spec.nccl_name for o in NCCL_TUNED_OPS)
        runs = (
            f"NCCL runs {the_op.value} as grouped send/recv, with no ring or tree to choose"
            if the_op.spec.payload
            else "NCCL has no barrier (torch.distributed runs one as an all-reduce of one byte)"
        )
        raise NotApplicableError(
            f"NCCL's cost model ({NCCL_SOURCE}) prices only the collectives it tunes ({tuned}): {runs}"
        )
    return the_op


def nccl_choice(
    machine: NcclMachine,
    op: Op | str,
    ranks: int,
    nodes: int,
    size_bytes: float,
    *,
    smooth: bool = False,
    fullest_node: int | None = None,
) -> NcclChoice:
    """The cheapest of ring and tree over LL, LL128 and Simple at one size, priced as NCCL does.

    ``smooth`` interpolates the tree's correction factor (:func:`_tree_correction`) and ramps the ring's
    plateau factor in (:func:`_plateau_factor`); without it the model is NCCL's exactly. Ranks need not
    fill every node: NCCL reads ``nRanks / nNodes`` (tuning.cc: ``ppn``, and in integers for the tree).
    ``fullest_node``: the ranks on the fullest node where the last is part-full (default: as even as
    they go). Raises ConfigError for fewer than 2 ranks or more nodes than ranks,
    NotApplicableError for an op NCCL does not tune (it runs those as grouped send/recv).
    """
    the_op = _tuned(op)
    if ranks < 2 or nodes < 1 or nodes > ranks:
        raise ConfigError(f"NCCL's model needs 2 or more ranks and at least one a node, got {ranks} on {nodes}")
    best: NcclChoice | None = None
    # LL128 runs over NVLink (and NICs close enough); NCCL leaves it off over PCI (lines 518-536).
    protos = (_LL, _LL128, _SIMPLE) if machine.nvlink else (_LL, _SIMPLE)
    coll = _COLLECTIVES[the_op]
    for algo in coll.candidates(ranks, nodes):
        for proto in protos if algo != "pat" else (_SIMPLE,):
            bw = _bandwidth(machine, the_op, algo, proto, ranks, nodes)
            lat = _latency(machine, the_op, algo, proto, ranks, nodes, fullest_node)
            if algo == "tree" and coll.all_reduce:
                bw *= _tree_correction(proto, size_bytes, smooth)
            ring_plateau = algo == "ring" and proto == _SIMPLE and nodes > 1 and coll.all_reduce
            if ring_plateau:
                lat *= _plateau_factor(machine, size_bytes / (machine.channels * ranks), smooth)
            lat *= machine.latency_scale
            # GB/s is 10^3 bytes per microsecond.
            time_us = lat + size_bytes / (1e3 * bw)
            if best is None or time_us < best.time_us:
                best = NcclChoice(algo, PROTOCOLS[proto], time_us, lat)
    assert best is not None
    return best


def nccl_time_us(
    machine: NcclMachine, op: Op | str, ranks: int, nodes: int, size_bytes: float, *, smooth: bool = False
) -> float:
    """NCCL's predicted time (us) of its cheapest ring or tree at one size: :func:`nccl_choice`'s."""
    return nccl_choice(machine, op, ranks, nodes, size_bytes, smooth=smooth).time_us


def peak_bus_bw_gbps(op: Op | str, ranks: int, sizes: list[float], times_us: list[float]) -> float:
    """The largest bus bandwidth (GB/s) among measured points: what NCCL's topology search would find
    its links to give, read from the measurement instead. Raises ConfigError when there is none."""
    the_op = op if isinstance(op, Op) else Op.parse(op)
    factor = the_op.spec.busbw_factor(ranks)
    best = max((s / t / 1e3 * factor for s, t in zip(sizes, times_us, strict=True) if t > 0), default=0.0)
    if not best > 0:
        raise ConfigError("no measured point with a positive time to read a bus bandwidth from")
    return best


def calibrate(
    machine: NcclMachine, op: Op | str, ranks: int, nodes: int, sizes: list[float], times_us: list[float]
) -> NcclMachine:
    """``machine`` with the latency scale and bus bandwidth that make NCCL's model (smoothed) follow the
    measured times at their own shape best, in squared log error.

    NCCL's structure (which algorithm and protocol at which size, how latency and bandwidth grow with
    ranks and nodes) is kept; only the two numbers a machine sets are fitted, by a coarse grid then a
    finer one around its best. Where the sizes cannot tell the latency (NCCL's latency is under
    ``LATENCY_SHARE_TO_FIT`` of its time even at the smallest size), the scale stays 1: NCCL's own.
    """
    _tuned(op)
    if not sizes:
        raise ConfigError("no measured points to calibrate NCCL's model on")
    logs = np.log(np.asarray(times_us, dtype=np.float64))
    peak = peak_bus_bw_gbps(op, ranks, sizes, times_us)
    smallest = nccl_choice(_replace(machine, 1.0, peak), op, ranks, nodes, min(sizes), smooth=True)
    # Where even the smallest measured size is mostly bandwidth, the points cannot tell the latency:
    # NCCL's own latencies stand, and only the bandwidth is fitted.
    latency_measured = smallest.latency_us >= LATENCY_SHARE_TO_FIT * smallest.time_us

    times = _SizeCurve(machine, _tuned(op), ranks, nodes, sizes)

    def loss(scale: float, bus: float) -> float:
        model = np.log(times.at(_replace(machine, scale, bus)))
        return float(np.sum((model - logs) ** 2))

    best = (loss(1.0, peak), 1.0, peak)
    for span, centre_scale, centre_bus in ((4.0, 1.0, peak), (0.5, None, None)):
        cs = best[1] if centre_scale is None else centre_scale
        cb = best[2] if centre_bus is None else centre_bus
        for i in range(-8, 9) if latency_measured else (0,):
            scale = cs * 2.0 ** (span * i / 8)
            for j in range(-8, 9):
                bus = cb * 2.0 ** (span / 4 * j / 8)
                value = loss(scale, bus)
                if value < best[0]:
                    best = (value, scale, bus)
    return _replace(machine, best[1], best[2])


class _SizeCurve:
    """``nccl_time_us(..., smooth=True)`` at fixed sizes and shape for many (latency scale, bus
    bandwidth) pairs, as the calibration's grid asks: what depends on the size alone (the tree's
    correction, the ring's plateau factor, each candidate's unscaled latency) is worked out once, and
    each pair costs one bandwidth per candidate and a few array operations, in the same order of
    operations as ``nccl_choice`` (so the same times, to the last bit)."""

    __slots__ = ("_candidates", "_nodes", "_op", "_ranks", "_sizes")

    def __init__(self, machine: NcclMachine, op: Op, ranks: int, nodes: int, sizes: list[float]) -> None:
        if ranks < 2 or nodes < 1 or nodes > ranks:
            raise ConfigError(f"NCCL's model needs 2 or more ranks and at least one a node, got {ranks} on {nodes}")
        self._op, self._ranks, self._nodes = op, ranks, nodes
        self._sizes = np.asarray(sizes, dtype=np.float64)
        protos = (_LL, _LL128, _SIMPLE) if machine.nvlink else (_LL, _SIMPLE)
        self._candidates: list[tuple[str, int, np.ndarray, np.ndarray]] = []
        coll = _COLLECTIVES[op]
        for algo in coll.candidates(ranks, nodes):
            for proto in protos if algo != "pat" else (_SIMPLE,):
                lat = _latency(machine, op, algo, proto, ranks, nodes)
                latency = np.full(len(sizes), lat)
                correction = np.ones(len(sizes))
                if algo == "tree" and coll.all_reduce:
                    correction = np.array([_tree_correction(proto, s, True) for s in sizes])
                if algo == "ring" and proto == _SIMPLE and nodes > 1 and coll.all_reduce:
                    latency = np.array(
                        [lat * _plateau_factor(machine, s / (machine.channels * ranks), True) for s in sizes]
                    )
                self._candidates.append((algo, proto, latency, correction))

    def at(self, machine: NcclMachine) -> np.ndarray:
        """The cheapest candidate's time (us) at each size on ``machine`` (only its latency scale and
        bandwidths may differ from the machine the curve was made for)."""
        best = np.full(len(self._sizes), np.inf)
        for algo, proto, latency, correction in self._candidates:
            bw = _bandwidth(machine, self._op, algo, proto, self._ranks, self._nodes) * correction
            best = np.minimum(best, latency * machine.latency_scale + self._sizes / (1e3 * bw))
        return best


def _replace(machine: NcclMachine, latency_scale: float, bus_bw_gbps: float) -> NcclMachine:
    return dataclasses.replace(machine, latency_scale=latency_scale, bus_bw_gbps=bus_bw_gbps)
