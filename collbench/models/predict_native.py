"""NCCL's native at another shape: NCCL's own model with this machine's numbers, where NCCL has one.

For the five collectives NCCL picks an algorithm and protocol for (``NCCL_TUNED_OPS``), its native is
priced by NCCL's own cost model (``nccl_cost.py``, ``src/graph/tuning.cc``), with its latency scale and
bus bandwidth fitted to the measured curve. The others (all-to-all, scatter, gather, send/recv) NCCL
runs as grouped point-to-point, which tuning.cc does not price: ``priced.by_structure`` prices those
by native's formula where it has their structure (``native_structure.py``) and says so. Barrier
through ``torch.distributed`` is an all-reduce of one byte: :func:`nccl_barrier` prices it with
NCCL's model of that all-reduce, its latencies scaled to the measured time.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
from collections.abc import Callable, Sequence

from collbench.errors import NotApplicableError
from collbench.models.card_links import card_links, card_notes
from collbench.models.fitted import Fit
from collbench.models.nccl_calibrate import calibrate
from collbench.models.nccl_cost import NCCL_SOURCE, NcclChoice, nccl_choice
from collbench.models.nccl_graph import NodeFacts, node_of, ring_graph
from collbench.models.nccl_machine import Arch, NcclMachine, channels_text, ll128_sm, with_topology
from collbench.models.nccl_switch import NVLS_ALGORITHMS, NVLS_FIGURE_CHECK
from collbench.models.priced import Priced, Shapes, label, node_class
from collbench.models.scaled import ScaledFit
from collbench.schedules.ops import Op
from collbench.units import time_text

_CALIBRATION_POINTS = 40
_GRID_PER_DOUBLING = 4


def _calibration_points(fit: Fit) -> tuple[list[float], list[float]]:
    """The fit's curve at its own shape, sampled evenly in log size over its measured sizes."""
    lo, hi = max(float(fit.min_bytes), 1.0), max(float(fit.max_bytes), 2.0)
    if hi <= lo:
        hi = lo * 2
    sizes = [lo * (hi / lo) ** (i / (_CALIBRATION_POINTS - 1)) for i in range(_CALIBRATION_POINTS)]
    scaled = _scaled(fit)
    return sizes, [scaled.time_us(s, fit.world_size) for s in sizes]


NO_FACTS = NodeFacts()


@functools.lru_cache(maxsize=256)
def nccl_machine_for(fit: Fit, nodes: int, arch: Arch, nvlink: bool = True, facts: NodeFacts = NO_FACTS) -> NcclMachine:
    """NCCL's model calibrated to ``fit``'s curve at its own shape (``nodes`` nodes), on the graphs NCCL's
    search finds there (``with_topology``: channels, NVLS); kept, as a fit is priced at many shapes (a
    crossover search, a tune's predicted shapes) and the calibration is its costliest step."""
    sizes, times = _calibration_points(fit)
    node = node_of(fit.device, -(-fit.world_size // nodes), facts)
    start = NcclMachine(bus_bw_gbps=1.0, arch=arch, nvlink=nvlink, ll128_sm=ll128_sm(fit.device))
    # The measured ranks as even over their nodes as they go: the fewest on a node set NVLS's heads.
    start = with_topology(start, node, nodes, collnet=facts.collnet, fewest_gpus=fit.world_size // nodes)
    return calibrate(start, fit.op, fit.world_size, nodes, sizes, times)


def ran_nvls(
    machine: NcclMachine, op: str, ranks: int, nodes: int, size: float, fullest: int | None = None
) -> bool | None:
    """Whether NCCL runs NVLS or NVLS-tree at this shape and size, choosing by its own figures
    (``NcclMachine.own_figures``: its topology's bandwidths and its own latencies, not a calibration's,
    which NCCL never sees); None where its search finds no NVLS graph (nothing to tell apart)."""
    own = machine.own_figures()
    if own is None or machine.nvls is None:
        return None
    return nccl_choice(own, op, ranks, nodes, size, smooth=True, fullest_node=fullest).algo in NVLS_ALGORITHMS


@functools.lru_cache(maxsize=8192)
def _residual(
    fit: Fit, measured_nodes: int, arch: Arch, nvlink: bool, facts: NodeFacts, size: float
) -> tuple[float, bool]:
    """The fit's time over NCCL's calibrated model's at the fit's own shape, at a measured ``size``,
    priced with the family NCCL ran there (NVLS or not: ``ran_nvls``), and whether that was NVLS: the
    same at every shape asked, so kept (a rank-count sweep asks each grid size once a shape)."""
    own = nccl_machine_for(fit, measured_nodes, arch, nvlink, facts)
    nvls = ran_nvls(own, fit.op, fit.world_size, measured_nodes, size)
    model = nccl_choice(own, fit.op, fit.world_size, measured_nodes, size, smooth=True, nvls=nvls).time_us
    return (_scaled(fit).time_us(size, fit.world_size) / model if model > 0 else 1.0), bool(nvls)


@functools.lru_cache(maxsize=256)
def _scaled(fit: Fit) -> ScaledFit:
    """``ScaledFit.of(fit)``, kept: preparing it walks the fit's whole size grid."""
    return ScaledFit.of(fit)


def native_nccl(
    fit: Fit,
    others: Sequence[Fit],
    world_size: int,
    nodes: int,
    shapes: Shapes,
    arch: Arch,
    at_shape: bool,
    nvlink: bool = True,
    facts: NodeFacts = NO_FACTS,
) -> tuple[Priced, list[str]]:
    """NCCL's native at a shape: one model at every shape, NCCL's own with this machine's numbers.

    NCCL's model is calibrated to the fit at its measured shape (``nccl_machine_for``: its latency
    scale and bandwidths, each from the sizes NCCL ran its algorithms at), and what it still misses
    there, the fit's time over the model's at each measured size (``residual``), multiplies it at every
    shape where NCCL runs the family that ran there (``carried``), on the terms priced from the fitted
    figures and none of NCCL's own standing in for them (``missed_us``): at the measured shape and sizes that
    is the fit itself, and elsewhere the same model, so a prediction moves continuously with ranks and
    nodes instead of switching from the fit to NCCL's model off the measured shape. Outside the
    measured sizes the residual is held at its edge where no NVLS is in play. The time is made
    non-decreasing in size (its running maximum over a log grid); it rises with ranks as NCCL's model
    does (``nccl_choice``'s smooth form), but where NCCL's own figures pick the family the fitted ones
    price dearer: NCCL's pick is still what runs, the basis names the cheaper one, and ``fastest_us``
    is its time (more ranks, where NCCL's own figures flip to it, can be faster than NCCL's pick here).
    """
    measured_nodes = shapes.assumed_nodes(fit)
    notes: list[str] = []
    intra: NcclMachine | None = None
    # A fit within one node measured its links' latencies (tuning.cc's intraLat, the base), not the
    # network's (interLat, the ring's network overhead): across nodes those stay NCCL's own.
    network_unmeasured = measured_nodes == 1 and nodes > 1
    # A fit beside it that crossed the network is priced whole wherever it holds the bandwidth NCCL
    # uses (fit_choice.pick_for: beyond 2 nodes it is always taken over this one); up to 2 nodes NCCL
    # prices by the links within a node (bwIntra), this fit's. A fit across nodes has one latency scale
    # for its network hops and its many hops within a node together (GB200, 20 racks: the tree's 71
    # NVLink hops a rack to 4 network hops each way), where its smallest size tells one at all (the
    # 20-rack log's does not: NCCL's own), so it tells no network latency apart to carry here: those
    # stay NCCL's own, and the note and basis name that fit rather than ask for a run across nodes.
    across = max(
        (f for f in others if f is not fit and shapes.assumed_nodes(f) > 1), key=lambda f: f.world_size, default=None
    )
    net_own = (
        "network latencies NCCL's own, unmeasured"
        if across is None
        else f"network latencies NCCL's own (x{across.world_size} across {shapes.assumed_nodes(across)} nodes crossed "
        "the network, but told none apart from its links' within a node)"
    )
    # Ranks fill nodes at the measured count a node where that holds them (the default node count
    # does), the last node part-full: its fullest node is then a measured one.
    per_node = max(fit.world_size // measured_nodes, 1)
    fullest = per_node if (nodes - 1) * per_node < world_size <= nodes * per_node else None
    # Each rank searches its own node and NCCL keeps the smallest of every rank's graph (nccl_graph.aligned,
    # src/init.cc's graphs[a]->nChannels = std::min(...)): NVLS's heads are then those of the node
    # holding fewest ranks, the part-full last one where ranks fill nodes as measured (on one node, all).
    most = fullest if fullest is not None and nodes > 1 else -(-world_size // nodes)
    fewest = world_size - (nodes - 1) * most if fullest is not None else world_size // nodes
    target_node = node_of(fit.device, most, facts)
    # Beyond 2 nodes NCCL prices the ring and tree by the graph's bwInter (tuning.cc line 306), the speed
    # its search charges to the NICs (search.cc lines 145, 726-741); up to 2, by bwIntra, charged to the
    # links within a node. A fit within one node measured the latter: told the NICs, the former is NCCL's.
    nics_own = network_unmeasured and node_class(nodes) == 3 and target_node is not None and target_node.nic_known()
    if node_class(nodes) == 3 and node_class(measured_nodes) < 3:
        # No fit beside it crossed the network (one that did would be priced here: pick_for).
        if nics_own:
            notes.append(
                f"{label(fit, shapes)}: NCCL uses its inter-node bandwidth beyond 2 nodes (its search's figure "
                "for the NICs declared); none was measured, so it is NCCL's own; network latencies NCCL's own, "
                "unmeasured (fit a run across nodes beside it)"
            )
        else:
            notes.append(
                f"{label(fit, shapes)}: NCCL uses its inter-node bandwidth beyond 2 nodes; none was measured, "
                "so the prediction assumes the measured bus bandwidth there too"
                + ("; network latencies NCCL's own, unmeasured" if network_unmeasured else "")
            )
    elif nodes == 1 and measured_nodes > 1:
        intra = _intra_node_machine(fit, shapes, arch, nvlink, facts)
    elif network_unmeasured:
        notes.append(
            f"{label(fit, shapes)}: NCCL's model across {nodes} nodes with the bus bandwidth and latency scale "
            f"fitted within one node (its links' latencies); {net_own}"
            + ("; the network was not measured (fit a run across nodes beside it)" if across is None else "")
            + ", so the time is likely too short"
        )
    elif node_class(nodes) < node_class(measured_nodes):
        notes.append(
            f"{label(fit, shapes)}: predicted on {nodes} node{'s' if nodes != 1 else ''} with the bus bandwidth "
            f"measured across {measured_nodes} nodes; links within fewer nodes were not measured and are "
            "usually faster, so the time is likely too long"
        )

    @functools.lru_cache(maxsize=256)
    def choice(size: float) -> NcclChoice:
        # NCCL runs the family its own figures price cheaper (it never sees a calibration); within it,
        # the calibrated model's cheapest algorithm and protocol (their links are the same), what it
        # missed carried as priced (``missed_us``: onto the fitted terms only, so it can reorder them).
        nvls = ran_nvls(machine, fit.op, world_size, nodes, size, fullest)
        return nccl_choice(
            machine, fit.op, world_size, nodes, size, smooth=True, fullest_node=fullest, nvls=nvls, key=priced(size)
        )

    @functools.lru_cache(maxsize=256)
    def passed_over(size: float) -> NcclChoice | None:
        # The family NCCL's own figures do not pick at this shape, on the calibrated ones: where those
        # price it cheaper NCCL still runs the other (src/enqueue.cc topoGetAlgoInfo, v2.30.7 lines
        # 2032-2044, takes the least of the table tuning.cc's own constants filled). None where NVLS is
        # not in play here (nothing else to pick), or the family has no algorithm at the shape.
        nvls = ran_nvls(machine, fit.op, world_size, nodes, size, fullest)
        if nvls is None:
            return None
        try:
            return nccl_choice(
                machine,
                fit.op,
                world_size,
                nodes,
                size,
                smooth=True,
                fullest_node=fullest,
                nvls=not nvls,
                key=priced(size),
            )
        except NotApplicableError:
            return None

    # NCCL enables LL128 only where every GPU of a node reaches the others over NVLink, and prices PCI
    # latencies otherwise (card_links.py): on PCIe cards that depends on the GPUs a node, at each shape,
    # and for two on a bridge, which the fit's own run of two on one node tells where it was one.
    pair_bus = (
        nccl_machine_for(fit, 1, arch, False, facts).bus_bw_gbps if (measured_nodes, per_node) == (1, 2) else None
    )
    links = card_links(fit.device, pair_bus) if nvlink and fit.device else None
    target_per_node = -(-world_size // nodes)
    own_nvlink = nvlink and (links is None or links.nvlink(per_node))
    target_nvlink = nvlink and (links is None or links.nvlink(target_per_node))
    own = nccl_machine_for(fit, measured_nodes, arch, own_nvlink, facts)
    machine = own if intra is None else intra
    if machine.nvlink != target_nvlink:
        machine = dataclasses.replace(machine, nvlink=target_nvlink)
    if network_unmeasured:
        # The NICs' parts stay NCCL's own: the latencies across nodes, and NVLS-tree's bandwidth between
        # them (its NVSwitch part keeps the scale the node measured).
        machine = dataclasses.replace(machine, net_latency_scale=1.0, nvls_net_scale=1.0)
    # The graphs NCCL's search finds at the shape asked: its channels, NVLS where NVLink SHARP is (the
    # NVLS heads of the node holding fewest ranks: ``fewest`` above).
    machine = with_topology(machine, target_node, nodes, collnet=facts.collnet, fewest_gpus=fewest)
    if nics_own and machine.topology_bus_bw_gbps is not None:
        machine = dataclasses.replace(machine, inter_bus_bw_gbps=machine.topology_bus_bw_gbps)
    if links is not None:
        notes.extend(
            f"{label(fit, shapes)}: {n}" for n in card_notes(links, fit.device, target_per_node, nodes, NCCL_SOURCE)
        )
    lo, hi = float(max(fit.min_bytes, 1)), float(max(fit.max_bytes, 1))
    nvls_in_play = own.nvls is not None or machine.nvls is not None

    def priced_nvls(size: float, nvls: bool | None) -> bool:
        """Whether the family priced at ``size`` is NVLS: ``nvls`` where given, else NCCL's pick there."""
        return choice(size).algo in NVLS_ALGORITHMS if nvls is None else nvls

    def carried(size: float, nvls: bool | None = None) -> bool:
        """Whether what the model missed at the measured size is carried: only to the family NCCL ran
        there (NVLS, or the ring and tree), whose links it measured. Beyond the measured sizes it is
        held from the nearest one where no NVLS is in play (the ring and tree only, at the measured
        shape and here), and not carried where it is: held, it would reach whichever family NCCL runs
        at the asked size, and a test at either size jumps where NCCL's family flips with the shape
        (at 8 B, a GB200 2-rack fit told its NICs carried x1.33 from 512 MiB to NVLS-tree on 7 racks
        and nothing to the tree NCCL runs on 8: 144 -> 122 us; tested at 64 MiB, an H100 2-node fit on
        one node carried x1.65 to the ring on 5 GPUs and nothing on 6, where NCCL runs NVLS at 64 MiB).
        ``nvls``: the family priced (default: the one NCCL runs at ``size``)."""
        family = priced_nvls(size, nvls)
        if bandwidth_own(size, family):
            return False
        if not lo <= size <= hi:
            return not nvls_in_play
        _, there = _residual(fit, measured_nodes, arch, own_nvlink, facts, size)
        return there == family

    def bandwidth_own(size: float, nvls: bool | None = None) -> bool:
        # What the model misses is a residual of the calibration: the fit's time over NCCL's model at the
        # fitted bandwidth. It is carried wherever the family NCCL runs is priced at that bandwidth, and at
        # no shape where NCCL's own figure stands in for it (the miss is then of a figure not priced).
        # Within one node from a fit across several, neither family's links were measured (tuning.cc
        # prices one node with no network term): NCCL's own NVLink figures, except the ring on the fitted
        # bus where that is higher. search.cc gives a ring one speed for bwIntra and bwInter (lines 1174,
        # 1246, 1272), so across nodes the measured ring crossed each node's NVLinks at its speed, which
        # one node's search (no NIC to pass) finds too: the measured ring bounds one node's from below,
        # NCCL's lower figure is refuted there, and the ring is the calibration's. Without the miss, a
        # GB200 2-rack fit put 41.06 ms at 69 ranks in one rack and 40.71 ms at 76 on two (16 GiB); with
        # it on the ring NCCL's own figures price, a GCP H100 2-node fit's x2.03 at 16 MiB made the ring
        # on 5 GPUs 224 us and NVLS on 6 103 us. ``nvls``: the family priced (default: NCCL's pick there).
        return intra is not None and not (intra.ring_measured and not priced_nvls(size, nvls))

    def residual(size: float, nvls: bool | None = None) -> float:
        missed, _ = _residual(fit, measured_nodes, arch, own_nvlink, facts, min(max(size, lo), hi))
        return missed if carried(size, nvls) else 1.0

    # NCCL's time is a latency term and a bandwidth term, each priced from its own figures (tuning.cc
    # line 653: lat * latCount + nBytes / (1000 * bw)), and the latency a sum of hops each priced by its
    # link class (lines 384-428). The miss is carried onto the terms priced from the fitted figures, and
    # none of NCCL's own that stand in for them:
    # - within one node from a fit across several whose latency scale is above 1, the latencies are NCCL's
    #   own (``_intra_node_machine``) while the ring's bandwidth may be the fitted bus: the bandwidth term
    #   only (a p5 2-node fit's, x2.83: at 32 KiB its x1.12 made 8 GPUs' ring, NCCL's own 15 us latency
    #   nearly all of it, 17.2 us);
    # - across nodes from a fit within one, the network's latencies (interLat, and the ring's steps within
    #   a node where its network overhead is what std::max takes, line 410: ``NcclChoice.net_latency_us``)
    #   are NCCL's own, which the fit never measured, and beyond 2 nodes, told the NICs, the ring's and
    #   tree's bandwidth term is too (NCCL's own bwInter, line 306; ``nics_own``): the base, the hops
    #   within a node and (up to 2 nodes, or the NICs not told) the bandwidth term take it.
    latency_own = (
        intra is not None
        and intra.latency_scale < nccl_machine_for(fit, measured_nodes, arch, nvlink, facts).latency_scale
    )

    def own_latency_us(c: NcclChoice) -> float:
        """The part of ``c``'s latency priced from NCCL's own figures where the fit's stand elsewhere."""
        if latency_own:
            return c.latency_us
        return c.net_latency_us if network_unmeasured else 0.0

    def missed_us(c: NcclChoice, size: float, nvls: bool | None = None, missed: float | None = None) -> float:
        missed = residual(size, nvls) if missed is None else missed
        own = own_latency_us(c)
        if nics_own and not priced_nvls(size, nvls):
            own += c.time_us - c.latency_us
        if missed == 1.0 or own == 0.0:
            return c.time_us * missed
        return own + (c.time_us - own) * missed

    def priced(size: float) -> Callable[[NcclChoice], float] | None:
        # A candidate's time as this model prices it, its family its own (NVLS or not); None where the
        # miss multiplies every candidate's whole time (their order is then the calibrated model's).
        if not (latency_own or network_unmeasured):
            return None
        missed: dict[bool, float] = {}

        def key(c: NcclChoice) -> float:
            family = c.algo in NVLS_ALGORITHMS
            if family not in missed:
                missed[family] = residual(size, family)
            return missed_us(c, size, family, missed[family])

        return key

    def passed_over_us(size: float) -> float | None:
        # The family NCCL passes over, priced as NCCL's pick is (what it missed carried by the same rule).
        other = passed_over(size)
        return None if other is None else missed_us(other, size, other.algo in NVLS_ALGORITHMS)

    def raw_us(size: float) -> float:
        return missed_us(choice(size), size)

    grid = [2.0 ** (i / _GRID_PER_DOUBLING) for i in range(int(math.log2(hi * 4)) * _GRID_PER_DOUBLING + 1)]
    envelope: list[float] = []
    for size in grid:
        envelope.append(max(raw_us(size), envelope[-1] if envelope else 0.0))

    def time_us(size: float) -> float:
        # Within the grid, the envelope joined by straight lines: non-decreasing at every size, where the
        # model's own time can dip between two grid points as NCCL's choice moves (a 64-rank, 64-node
        # H100 prediction fell 416.168 -> 416.164 us from 140,000 to 150,000 bytes under max(model,
        # envelope below)). Beyond it the model, held up to the envelope's last value.
        above = bisect.bisect_left(grid, size)
        if above == 0:
            return raw_us(size)
        if above == len(grid):
            return max(raw_us(size), envelope[-1])
        g0, g1 = grid[above - 1], grid[above]
        return envelope[above - 1] + (envelope[above] - envelope[above - 1]) * (size - g0) / (g1 - g0)

    def latency_us(size: float) -> float:
        c = choice(size)
        own = own_latency_us(c)
        return own + (c.latency_us - own) * residual(size)

    def fastest_us(size: float) -> float:
        other = passed_over_us(size)
        return time_us(size) if other is None else min(time_us(size), other)

    def cheaper_passed_over(size: float) -> str:
        # NCCL picks by its own figures; where this machine's price the family it passes over cheaper, the
        # prediction is NCCL's slower pick, and more ranks can then be faster where its own figures flip
        # (tuning.cc's log2i(nNodes) steps up NVLS-tree's latency more than the tree's at a power of two).
        other, there = passed_over(size), passed_over_us(size)
        if other is None or there is None or there >= raw_us(size):
            return ""
        measured = machine.nvls_measured if other.algo in NVLS_ALGORITHMS else machine.ring_measured
        return (
            f"; on these figures {other.algo}/{other.proto} would take {time_text(there)}"
            + ("" if measured else " (its bandwidth NCCL's own, unmeasured)")
            + ", but NCCL's own price it dearer here, so NCCL does not pick it"
        )

    channels = channels_text(machine, target_node, nodes)

    def basis(size: float) -> str:
        c = choice(size)
        inter = ""
        if machine.inter_bus_bw_gbps is not None and nics_own:
            bus = machine.inter_bus_bw_gbps
            inter = f"; beyond 2 nodes NCCL's own bus bandwidth between nodes, {bus:.3g} GB/s (unmeasured)"
        nvls = c.algo in NVLS_ALGORITHMS
        if carried(size):
            missed = f"x{residual(size):.3g} for what it misses"
            if latency_own:
                missed += " on its bandwidth term only (the latencies NCCL's own)"
            elif nics_own and not nvls:
                missed += " on its latencies within a node only (its bandwidth between nodes, NCCL's own)"
            if network_unmeasured:
                missed += ", not on the network's latencies (NCCL's own)"
        elif bandwidth_own(size):
            missed = "nothing carried of what it misses (the network's; these links were not measured)"
        elif lo <= size <= hi:
            missed = "nothing carried of what it misses (another algorithm ran)"
        else:
            missed = "nothing held of what it misses beyond the measured sizes (NVLS in play)"
        if intra is not None:
            bandwidth = (
                nvls_text(machine)
                if nvls
                else f"its bus bandwidth {machine.bus_bw_gbps:.4g} GB/s (its topology's NVLinks, or the fitted "
                "where higher)"
            )
            return (
                f"NCCL's model ({NCCL_SOURCE}, {arch}) picks {c.algo}/{c.proto} within one node: {bandwidth}; "
                f"latencies x{machine.latency_scale:.2g} (its own, or the fitted where lower), not the "
                f"{own.bus_bw_gbps:.3g} GB/s and x{own.latency_scale:.2g} fitted across {measured_nodes} nodes "
                f"(links within a node were not measured); {missed} there; {channels}{cheaper_passed_over(size)}"
            )
        held = "" if lo <= size <= hi else " (held from the nearest measured size)"
        # A fit whose smallest size is mostly bandwidth tells no latency scale: NCCL's own 1 stands.
        latencies = (
            f"latencies x{machine.latency_scale:.2g} (fitted)"
            if machine.latency_measured
            else "NCCL's own latencies (no size tells them)"
        )
        if machine.net_latency_scale is not None:
            within = latencies.replace("latencies", "latencies within a node", 1)
            latencies = f"{within}, " + ("network latencies NCCL's own (unmeasured)" if across is None else net_own)
        text = (
            f"NCCL's model ({NCCL_SOURCE}, {arch}) picks {c.algo}/{c.proto}; {latencies}, "
            f"{nvls_text(machine) if nvls else ring_text(machine)}{inter}; "
            f"{missed} at the measured shape{held}; {channels}{cheaper_passed_over(size)}"
        )
        if at_shape and lo <= size <= hi:
            return f"the fit itself at its measured shape, which is {text}"
        return text

    return Priced(fit, time_us, latency_us, basis, at_shape, None, fastest_us if nvls_in_play else None), notes


def _intra_node_machine(fit: Fit, shapes: Shapes, arch: Arch, nvlink: bool, facts: NodeFacts) -> NcclMachine:
    """NCCL's model for one node, from a fit measured across several: NCCL's own, with the bus bandwidth
    its topology search gives the GPU's NVLinks (``nccl_graph.ring_graph`` on one node; the fitted one
    where that is higher, as links the measured ring crossed carry at least what it measured) and its
    own NVLink latencies (the fitted scale where below 1); what the model misses at the measured shape
    is carried only where the ring runs on the fitted bus (``native_nccl``'s ``bandwidth_own``), so
    the time never falls as ranks cross to a second node there, and only to its bandwidth term where the
    fitted latency scale, above 1, gives way to NCCL's own (``native_nccl``'s ``latency_own``). The
    fitted figures are the network's (a GCP H100 2-node fit put 268 GB/s and latencies x5.4 inside a
    node, where NCCL's ring over 18 NVLink 4 links has 360 GB/s), and nothing of the links within a node
    was measured. Raises NotApplicableError where the fit's GPU and its NVLinks are not known."""
    measured_nodes = shapes.assumed_nodes(fit)
    node = node_of(fit.device, max(fit.world_size // measured_nodes, 1), facts) if nvlink else None
    if node is None:
        raise NotApplicableError(
            f"measured across {measured_nodes} nodes only, on a GPU whose NVLinks are not known here "
            f"({fit.device or 'none named'}): the links within one node were not measured; fit a run on one "
            "node beside it, or name the GPU (--gpu)"
        )
    bus = ring_graph(node, 1).bus_bw_gbps
    # The ring measured across nodes ran through each node's NVLinks too: they carry at least that,
    # and are not slower to start (a latency scale below NCCL's own is kept). NVLS keeps NCCL's own
    # figure: the NVSwitch's reduction bounds it, which no ring across nodes measured.
    fitted = nccl_machine_for(fit, measured_nodes, arch, nvlink, facts)
    scale = min(fitted.latency_scale, 1.0)
    return NcclMachine(
        bus_bw_gbps=max(bus, fitted.bus_bw_gbps),
        arch=arch,
        nvlink=nvlink,
        latency_scale=scale,
        topology_bus_bw_gbps=bus,
        ring_measured=fitted.bus_bw_gbps > bus,
        ll128_sm=fitted.ll128_sm,  # the GPU's, as the fit's machine has it (tuning.cc line 534)
    )


def ring_text(machine: NcclMachine) -> str:
    """Where the ring's and tree's bus bandwidth comes from, in a few words (predict's basis)."""
    bus = f"bus {machine.bus_bw_gbps:.3g} GB/s"
    if machine.ring_measured:
        return f"{bus} (fitted)"
    # "Unmeasured" also where NCCL ran them, but only at sizes whose time is latency (or LL's cap):
    # an H100 cluster's fits ran the tree at 1-8 MiB and NVLS-tree above (nccl_calibrate).
    return f"{bus}, NCCL's own figure, unmeasured (no size NCCL ran the ring or tree at tells its bandwidth)"


def nvls_text(machine: NcclMachine) -> str:
    """Where NVLS's bandwidth comes from, in a few words (predict's basis): fitted to times NCCL ran
    NVLS at, or NCCL's own tuning figure with no measurement behind it and its one published check."""
    if machine.nvls_measured:
        text = f"NVLS x{machine.nvls_scale:.3g} NCCL's figure (fitted to the sizes NCCL ran it at)"
        if machine.nvls_net_scale is not None:
            text += ", between nodes NCCL's own (unmeasured)"
        return text
    return (
        f"NVLS at NCCL's own tuning figure, unmeasured (no size NCCL ran NVLS at tells its bandwidth); "
        f"{NVLS_FIGURE_CHECK}"
    )


BARRIER_BYTES = 1.0
"""The all-reduce ``torch.distributed``'s NCCL barrier runs: one element of one byte
(``ProcessGroupNCCL::barrier``: "All reduce to achieve the barrier", an ``at::kByte`` tensor of 1)."""


def nccl_barrier(fit: Fit, world_size: int, nodes: int, shapes: Shapes, arch: Arch, nvlink: bool = True) -> Priced:
    """NCCL's native barrier at a shape: through ``torch.distributed`` it is an all-reduce of one byte,
    priced by NCCL's own model (``nccl_cost.py``) with its latencies scaled so that it takes the
    measured time at the measured shape. At one byte the time is latency (the bandwidth part is under
    a nanosecond at any bus bandwidth NCCL's model allows a GPU), so the scale is all the fit tells.
    """
    measured_nodes = shapes.assumed_nodes(fit)
    machine = NcclMachine(bus_bw_gbps=1.0, arch=arch, nvlink=nvlink, ll128_sm=ll128_sm(fit.device))
    here = nccl_choice(machine, Op.ALL_REDUCE, fit.world_size, measured_nodes, BARRIER_BYTES, smooth=True)
    measured = fit.predict_us(0.0)
    scale = measured / here.latency_us if here.latency_us > 0 else 0.0
    # Measured within one node, the scale is of that node's latencies: across nodes the network's stay
    # NCCL's own (as native_nccl prices a fit within one node).
    network_unmeasured = measured_nodes == 1 and nodes > 1
    scaled = dataclasses.replace(machine, latency_scale=scale, net_latency_scale=1.0 if network_unmeasured else None)
    there = nccl_choice(scaled, Op.ALL_REDUCE, world_size, nodes, BARRIER_BYTES, smooth=True)
    time_us = there.latency_us
    at_shape = fit.world_size == world_size and measured_nodes == nodes
    if at_shape:
        basis = "the fit itself, at the shape it was measured at; one measured point, with no error figure"
    else:
        basis = (
            "torch's NCCL barrier is an all-reduce of one byte (ProcessGroupNCCL::barrier): NCCL's model "
            f"({NCCL_SOURCE}) picks {there.algo}/{there.proto} at x{world_size} on {nodes} node"
            f"{'s' if nodes != 1 else ''}, its latencies{' within a node' if network_unmeasured else ''} scaled "
            f"x{scale:.3g} to the {measured:.4g} us measured at x{fit.world_size}"
            + (", network latencies NCCL's own (unmeasured)" if network_unmeasured else "")
        )
    return Priced(fit, lambda s: time_us, lambda s: time_us, lambda s: basis, at_shape, None)
