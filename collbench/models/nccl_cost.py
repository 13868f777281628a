"""NCCL's own cost model of its algorithms, as ``src/graph/tuning.cc`` writes it.

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

Ring and tree are priced, PAT for reduce-scatter and all-gather where every node holds one GPU
(NCCL's own condition, read from the shape), and the algorithms that reduce in a switch
(``nccl_switch.py``): NVLS and NVLS-tree where NCCL's search finds an NVLS graph (NVLink SHARP:
Hopper and Blackwell NVSwitch boards; across nodes only with the NICs known, whose GPUs are its heads),
CollNet direct and chain only where a CollNet plugin is declared (off by default, as in NCCL), each
under NCCL's enable rules (:func:`_algorithms`). What NCCL reads from its topology search, and a fit
does not hold, is the machine priced (``nccl_machine.NcclMachine``: bus bandwidth, channels, NVLS
graph, GPU generation, latency scales).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from collbench.errors import ConfigError, NotApplicableError
from collbench.models.nccl_machine import ARCHS, NcclMachine
from collbench.models.nccl_switch import (
    MAX_DIRECT_ARITY,
    MAX_NVLS_ARITY,
    NVLS_ALGORITHMS,
    SWITCH_ALGORITHMS,
    switch_bandwidth,
    switch_latency,
)
from collbench.nccl.algorithms import PROTOCOLS
from collbench.schedules.ops import NCCL_TUNED_OPS, Op

NCCL_SOURCE = "NVIDIA/nccl v2.30.7 src/graph/tuning.cc"

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
    (1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5,
     0.4, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6,
     0.6, 0.6, 0.6, 0.6, 0.8, 0.9, 0.9, 0.9, 0.9, 1.0, 1.0, 1.0),
    (0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5,
     0.5, 0.5, 0.5, 0.6, 0.7, 0.8, 0.7, 0.7, 0.8, 0.9, 0.9, 0.9),
)  # fmt: skip
"""``treeCorrectionFactor``: ``ncclTopoGetAlgoTime`` reads the tree's for ``0 <= logSize < 23`` and
NVLS-tree's (Blackwell on x86) for ``logSize < 24``."""
_TREE_ENTRIES = 23
_NVLS_TREE_ENTRIES = 24
_NET_OVERHEAD_US = 1.0
"""getNetOverhead on Intel x86 and unknown CPUs (AMD: 2.0); tripled for Simple."""


@dataclass(frozen=True, slots=True)
class NcclChoice:
    """The (algorithm, protocol) NCCL's model prices cheapest at one size, and its time."""

    algo: str
    proto: str
    time_us: float
    latency_us: float
    net_latency_us: float = 0.0
    """The part of ``latency_us`` that is the network's: ``interLat``'s hops, and the ring's steps within
    a node where its network overhead is the operand ``std::max`` takes (tuning.cc lines 386-412); 0 on
    one node."""


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
    chunked: bool = False
    """Reduce-scatter and all-gather: NVLS runs them within a node, with ``(ppn - 1) / ppn`` of its
    bandwidth and no bus-to-algorithm conversion (lines 312-318, 376-382)."""


def _ring_and_pat(ranks: int, nodes: int) -> tuple[str, ...]:
    return ("ring", "pat") if nodes == ranks else ("ring",)


_COLLECTIVES: dict[Op, _Collective] = {
    Op.ALL_REDUCE: _Collective(
        steps=lambda n: 2 * (n - 1),
        net_steps=lambda m: 2 * (m - 1),
        candidates=lambda ranks, nodes: ("tree", "ring"),
        all_reduce=True,
    ),
    Op.REDUCE_SCATTER: _Collective(
        steps=lambda n: n - 1, net_steps=lambda m: m - 1, candidates=_ring_and_pat, chunked=True
    ),
    Op.ALL_GATHER: _Collective(
        steps=lambda n: n - 1, net_steps=lambda m: m - 1, candidates=_ring_and_pat, chunked=True
    ),
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


def _algorithms(machine: NcclMachine, op: Op, ranks: int, nodes: int, nvls_only: bool | None = None) -> tuple[str, ...]:
    """The algorithms NCCL prices for ``op`` at this shape, its enable rules applied (tuning.cc
    ``ncclTopoTuneModel``'s loops and ``algoEnable``; enqueue.cc ``updateCollCostTable``): NVLS on one
    node where NVLink SHARP is (across nodes only with CollNet), NVLS-tree across nodes, CollNet with a
    plugin on 2 nodes or more (``NCCL_COLLNET_NODE_THRESHOLD`` 2) and up to 8 GPUs a node, its direct
    form only on an NVSwitch node. CollNet's and NVLS's reduce-scatter and all-gather across nodes need
    the plugin's ``iallgather``/``ireducescatter``, not known here: left off."""
    coll = _COLLECTIVES[op]
    algos = list(coll.candidates(ranks, nodes))
    local = -(-ranks // nodes)
    nvls = machine.nvls is not None and machine.nvls.channels >= 2 and machine.arch in ("hopper", "blackwell")
    if coll.all_reduce:
        if machine.collnet and nodes >= 2 and local <= MAX_DIRECT_ARITY + 1:
            algos += ["collnet_direct", "collnet_chain"] if machine.nvswitch else ["collnet_chain"]
        if nvls and (nodes == 1 or machine.collnet):
            algos.append("nvls")
        if nvls and nodes > 1:
            algos.append("nvls_tree")
    elif coll.chunked and nvls and nodes == 1 and local <= MAX_NVLS_ARITY:
        algos.append("nvls")
    if nvls_only is None:
        return tuple(algos)
    return tuple(a for a in algos if (a in NVLS_ALGORITHMS) == nvls_only)


def _bandwidth(machine: NcclMachine, op: Op, algo: str, proto: int, ranks: int, nodes: int) -> float:
    """Algorithm bandwidth (GB/s) of (algo, proto): tuning.cc lines 306-382."""
    arch = ARCHS.index(machine.arch)
    col = min(nodes, 3) - 1
    coll = _COLLECTIVES[op]
    if algo in SWITCH_ALGORITHMS:
        return switch_bandwidth(machine, algo, ranks, nodes, coll.all_reduce, coll.steps(ranks), arch, col)
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
    machine: NcclMachine,
    op: Op,
    algo: str,
    proto: int,
    ranks: int,
    nodes: int,
    fullest: int | None = None,
    scales: tuple[float, float] = (1.0, 1.0),
) -> tuple[float, float]:
    """Latency (us) of (algo, proto), and the part of it that is the network's: tuning.cc lines 384-432.
    ``scales``: what multiplies the terms of the links within a node and the base latency, and what
    multiplies the network's (``interLat`` and the ring's network overhead, :func:`_scales`); (1, 1) is
    NCCL's own."""
    local, net = scales
    if algo in SWITCH_ALGORITHMS:
        return switch_latency(machine, algo, ranks, nodes, fullest, scales)
    if algo == "pat":
        # Lines 429-432: log2(nNodes) network hops at a 3.5th of the tree's network latency (one GPU a
        # node: hwLatencies NET, Tree, Simple), plus 2.8 us a rank (tuning.cc names no link for it: it
        # keeps the base's scale).
        hops = int(math.log2(nodes)) * (_HW_LAT["net"]["tree"][_SIMPLE] * net / 3.5)
        return _PAT_BASE_LAT_US * local + hops + ranks * 2.8 * local, hops
    intra_class = "nvlink" if machine.nvlink else "pci"
    ppn = ranks / nodes
    lat = _BASE_LAT[algo][proto] * local
    intra = _HW_LAT[intra_class][algo][proto] * local
    # With one rank per node the tree's network latency is exposed on every hop (line 387).
    inter = _HW_LAT["net"]["tree" if ppn == 1 else algo][proto] * net
    coll = _COLLECTIVES[op]
    nsteps = coll.steps(ranks)
    if algo == "ring":
        if coll.chained:
            # sameChannels: one hop's latency (line 397), the network's across nodes (hw[a], line 286).
            if nodes == 1:
                return lat + _HW_LAT[intra_class]["ring"][proto] * local, 0.0
            hop = _HW_LAT["net"]["ring"][proto] * net
            return lat + hop, hop
        overhead = 0.0
        if nodes > 1:
            overhead = _NET_OVERHEAD_US * (2.0 if machine.amd_cpu else 1.0) * (3.0 if proto == _SIMPLE else 1.0) * net
        inter_steps = 0 if nodes == 1 else coll.net_steps(nodes)
        # intraLat = std::max(intraLat, netOverhead) (line 410): the steps within a node cost the
        # network's overhead where that is the larger (std::max returns its first operand on a tie).
        network = inter_steps * inter + ((nsteps - inter_steps) * overhead if overhead > intra else 0.0)
        intra = max(intra, overhead)
        return lat + (nsteps - inter_steps) * intra + inter_steps * inter, network
    if coll.all_reduce:
        # NCCL writes nRanks / nNodes (whole nodes); where the last node is part-full the chain within
        # the fullest node is the one waited for (the same when even).
        chain = fullest if fullest is not None else -(-ranks // nodes)
        hops = int(math.log2(nodes))
        return lat + 2 * ((chain - 1) * intra + hops * inter), 2 * hops * inter
    return lat, 0.0


def _scales(machine: NcclMachine) -> tuple[float, float] | None:
    """The (within a node, network) latency scales :func:`_latency` applies, where they differ (a fit
    within one node asked across nodes: ``NcclMachine.net_latency_scale``); None where one scale, the
    machine's ``latency_scale``, multiplies the whole latency afterwards."""
    if machine.net_latency_scale is None:
        return None
    return machine.latency_scale, machine.net_latency_scale


def _tree_correction(proto: int, size_bytes: float, smooth: bool, entries: int = _TREE_ENTRIES) -> float:
    """treeCorrectionFactor at ``log2(bytes >> 6)`` (NCCL's steps), or interpolated in log size.

    NCCL's own table steps at powers of two, so its predicted time can fall when a size crosses one;
    ``smooth`` interpolates between the table's entries instead, which keeps time rising with size
    (a factor never grows by more than 25% per doubling).
    """
    table = _TREE_CORRECTION[proto][:entries]
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


def _correction(machine: NcclMachine, coll: _Collective, algo: str, proto: int, size: float, smooth: bool) -> float:
    """The bandwidth's correction at a size (``ncclTopoGetAlgoTime``): the tree all-reduce's, and
    NVLS-tree's on Blackwell with an x86 CPU; 1 for the others."""
    if not coll.all_reduce:
        return 1.0
    if algo == "tree":
        return _tree_correction(proto, size, smooth)
    if algo == "nvls_tree" and machine.arch == "blackwell" and machine.x86:
        return _tree_correction(proto, size, smooth, _NVLS_TREE_ENTRIES)
    return 1.0


def _protocols(machine: NcclMachine, algo: str) -> tuple[int, ...]:
    """The protocols priced: ring and tree run all three (LL128 only over NVLink and from sm 7.0: lines
    518-536), the others Simple only (NVLS, NVLS-tree and PAT skip the rest; CollNet gets no bandwidth on
    them)."""
    if algo not in ("ring", "tree"):
        return (_SIMPLE,)
    return (_LL, _LL128, _SIMPLE) if machine.nvlink and machine.ll128_sm else (_LL, _SIMPLE)


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
    nvls: bool | None = None,
    key: Callable[[NcclChoice], float] | None = None,
) -> NcclChoice:
    """The cheapest of the algorithms NCCL enables at this shape (ring, tree, PAT, NVLS, NVLS-tree, CollNet)
    and their protocols at one size, priced as NCCL does.

    ``smooth`` interpolates the tree's correction factor (:func:`_tree_correction`) and ramps the ring's
    plateau factor in (:func:`_plateau_factor`); without it the model is NCCL's exactly. Ranks need not
    fill every node: NCCL reads ``nRanks / nNodes`` (tuning.cc: ``ppn``, and in integers for the tree).
    ``fullest_node``: the ranks on the fullest node where the last is part-full (default: as even as
    they go). ``nvls``: True prices NVLS and NVLS-tree only, False the others only (None: all). ``key``:
    what "cheapest" compares (default: the time), for a model whose time is NCCL's priced otherwise. Raises
    ConfigError for fewer than 2 ranks or more nodes than ranks, NotApplicableError for an op NCCL does
    not tune (it runs those as grouped send/recv) or no algorithm of the family asked at this shape.
    """
    the_op = _tuned(op)
    if ranks < 2 or nodes < 1 or nodes > ranks:
        raise ConfigError(f"NCCL's model needs 2 or more ranks and at least one a node, got {ranks} on {nodes}")
    best: NcclChoice | None = None
    best_cost = math.inf
    coll = _COLLECTIVES[the_op]
    channels = machine.comm_channels or machine.channels
    split = _scales(machine)
    for algo in _algorithms(machine, the_op, ranks, nodes, nvls):
        for proto in _protocols(machine, algo):
            bw = _bandwidth(machine, the_op, algo, proto, ranks, nodes)
            lat, net = _latency(machine, the_op, algo, proto, ranks, nodes, fullest_node, split or (1.0, 1.0))
            bw *= _correction(machine, coll, algo, proto, size_bytes, smooth)
            ring_plateau = algo == "ring" and proto == _SIMPLE and nodes > 1 and coll.all_reduce
            if ring_plateau:
                plateau = _plateau_factor(machine, size_bytes / (channels * ranks), smooth)
                lat, net = lat * plateau, net * plateau
            if split is None:
                lat, net = lat * machine.latency_scale, net * machine.latency_scale
            # GB/s is 10^3 bytes per microsecond.
            time_us = lat + size_bytes / (1e3 * bw)
            here = NcclChoice(algo, PROTOCOLS[proto], time_us, lat, net)
            cost = time_us if key is None else key(here)
            if best is None or cost < best_cost:
                best, best_cost = here, cost
    if best is None:
        raise NotApplicableError(f"NCCL's model has no {'NVLS' if nvls else 'ring or tree'} algorithm at this shape")
    return best


def nccl_time_us(
    machine: NcclMachine, op: Op | str, ranks: int, nodes: int, size_bytes: float, *, smooth: bool = False
) -> float:
    """NCCL's predicted time (us) of its cheapest algorithm at one size: :func:`nccl_choice`'s."""
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


def size_terms(
    machine: NcclMachine, op: Op | str, ranks: int, nodes: int, sizes: list[float], nvls: bool | None = None
) -> list[tuple[str, int, np.ndarray, np.ndarray]]:
    """Per candidate (algorithm, protocol index) NCCL prices at this shape: its unscaled latency (us)
    and its bandwidth's correction at each size, smoothed, as :func:`nccl_choice` applies them (the
    tree's correction, the ring's plateau factor): what depends on the sizes alone, worked out once
    for a calibration's many bandwidths (``nccl_calibrate.SizeCurve``)."""
    the_op = _tuned(op)
    if ranks < 2 or nodes < 1 or nodes > ranks:
        raise ConfigError(f"NCCL's model needs 2 or more ranks and at least one a node, got {ranks} on {nodes}")
    # The latencies here are scaled by one factor afterwards: a calibration's, at the fit's own shape.
    assert _scales(machine) is None, "size_terms prices one latency scale"
    out: list[tuple[str, int, np.ndarray, np.ndarray]] = []
    coll = _COLLECTIVES[the_op]
    channels = machine.comm_channels or machine.channels
    for algo in _algorithms(machine, the_op, ranks, nodes, nvls):
        for proto in _protocols(machine, algo):
            lat, _ = _latency(machine, the_op, algo, proto, ranks, nodes)
            latency = np.full(len(sizes), lat)
            correction = np.array([_correction(machine, coll, algo, proto, s, True) for s in sizes])
            if algo == "ring" and proto == _SIMPLE and nodes > 1 and coll.all_reduce:
                latency = np.array([lat * _plateau_factor(machine, s / (channels * ranks), True) for s in sizes])
            out.append((algo, proto, latency, correction))
    return out


def algorithm_bw_gbps(machine: NcclMachine, op: Op | str, algo: str, proto: int, ranks: int, nodes: int) -> float:
    """The algorithm bandwidth (GB/s) NCCL's model gives (algo, protocol index) before its size
    correction (tuning.cc lines 306-382)."""
    return _bandwidth(machine, _tuned(op), algo, proto, ranks, nodes)
