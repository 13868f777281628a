"""What NCCL's topology search gives its cost model (``nccl_cost.py``), and a fit does not hold.

NCCL prices its algorithms (``src/graph/tuning.cc``, ``ncclTopoTuneModel``) from the graphs its
topology search found; a published log or a fit says none of it. Each such figure is a field of
:class:`NcclMachine`: the ring's bus bandwidth (``nChannels * bw``, the same for the tree graph), the
channels (``nccl_graph.py``: the ring graph's for the per-channel caps, the communicator's for the
ring's plateau; 16 where the GPU's links or, across nodes, the NICs are not known), the NVLS graph, the
GPU generation (``compCapIndex``), whether links within a node are NVLink, and whether LL128 is enabled;
and what a calibration fitted in their place (latency scales, bus bandwidths, the NVLS scale).
:func:`with_topology` fills in what the search finds on a known node; ``nccl_cost.py`` prices a machine.
``latency_scale`` multiplies every latency: 1 is NCCL's own model; a fitted value keeps NCCL's
structure with this machine's latencies.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from collbench.errors import ConfigError
from collbench.models.nccl_graph import Graph, NcclNode, comm_channels, nvls_graph_over, ring_graph
from collbench.topology.bandwidth import GpuLinks, compute_capability

Arch = Literal["volta", "ampere", "hopper", "blackwell"]
ARCHS: tuple[Arch, ...] = ("volta", "ampere", "hopper", "blackwell")

DEFAULT_CHANNELS = 16
"""Channels assumed for the per-channel caps and the ring's plateau test, where the topology is not known."""


DEFAULT_ARCH: Arch = "hopper"
"""The generation taken where the GPU is not known (no device name in the rows, or an unlisted one)."""


def _sm(gpu: GpuLinks | None, device_name: str) -> int:
    return gpu.sm if gpu is not None else compute_capability(device_name) if device_name else 0


def arch_assumed(gpu: GpuLinks | None, device_name: str = "") -> bool:
    """Whether :func:`arch_of` falls back to ``DEFAULT_ARCH``: the GPU is not known."""
    return _sm(gpu, device_name) <= 0


def arch_of(gpu: GpuLinks | None, device_name: str = "") -> Arch:
    """NCCL's compute-capability class of a GPU (tuning.cc, ``compCapIndex``: sm 100 and up Blackwell,
    90 Hopper, 80 Ampere, else Volta), from a listed board, else from the device name of a known PCIe
    card (``compute_capability``: an RTX 5090 is Blackwell, an RTX 2080 Ti Volta's class), or
    ``DEFAULT_ARCH`` where the GPU is not known."""
    sm = _sm(gpu, device_name)
    if sm <= 0:
        return DEFAULT_ARCH
    if sm >= 100:
        return "blackwell"
    if sm >= 90:
        return "hopper"
    return "ampere" if sm >= 80 else "volta"


LL128_MIN_SM = 70
"""NCCL turns LL128 off below compute capability 7.0 (NVIDIA/nccl v2.30.7 src/graph/tuning.cc line 534:
``pEnable &= !(minCompCap < 70 || ...)``), whatever the links: Pascal (P100, sm 6.0; GeForce 10, 6.1)."""


def ll128_sm(device_name: str) -> bool:
    """Whether NCCL enables LL128 on the GPU a device name names, by its compute capability (``LL128_MIN_SM``);
    True where the GPU is not known (``DEFAULT_ARCH``'s, as its other figures are)."""
    sm = compute_capability(device_name) if device_name else 0
    return sm <= 0 or sm >= LL128_MIN_SM


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclMachine:
    """What NCCL's topology search gives its cost model, and a fit does not hold."""

    bus_bw_gbps: float
    """The ring graph's bus bandwidth, ``nChannels * bw`` (the tree graph's taken the same)."""
    arch: Arch = "hopper"
    nvlink: bool = True
    """Links within a node are NVLink (else PCI): picks ``hwLatencies``' class, and enables LL128."""
    ll128_sm: bool = True
    """The GPUs' compute capability lets NCCL enable LL128 (``LL128_MIN_SM``); False below sm 7.0, where
    NCCL runs LL and Simple only even over NVLink."""
    channels: int = DEFAULT_CHANNELS
    amd_cpu: bool = False
    latency_scale: float = 1.0
    """Multiplies every latency (but the network's where ``net_latency_scale`` is given); 1 is NCCL's own."""
    latency_measured: bool = True
    """``latency_scale`` is fitted to measured times (or given); False: NCCL's own 1, where no measured size
    told it (even the smallest's time is mostly bandwidth: ``nccl_calibrate.LATENCY_SHARE_TO_FIT``)."""
    net_latency_scale: float | None = None
    """Multiplies NCCL's network latency terms alone (tuning.cc's ``interLat``, lines 386-391, and the
    ring's network overhead, lines 405-410), where the fit behind ``latency_scale`` did not measure them:
    1 (NCCL's own) for a fit within one node asked across nodes, whose scale is its NVLink (or PCI)
    latencies'. None: ``latency_scale`` scales them too, as a fit across nodes measured both mixed."""
    inter_bus_bw_gbps: float | None = None
    """The bus bandwidth NCCL uses beyond two nodes (``bwInter``); None: the same as ``bus_bw_gbps``."""
    comm_channels: int | None = None
    """The communicator's channels (``comm->nChannels``, the ring's plateau test); None: ``channels``."""
    topology_bus_bw_gbps: float | None = None
    """The ring's bus bandwidth as NCCL's topology search gives it at this shape (``nccl_graph.ring_graph``),
    where the machine is known: NCCL's own figure, which it chooses by (:meth:`own_figures`)."""
    ring_measured: bool = True
    """``bus_bw_gbps`` is fitted to times NCCL ran ring or tree at (or given); False: NCCL's own figure,
    which no measured size told."""
    nvls_scale: float = 1.0
    """NCCL's NVLS and NVLS-tree bandwidth (``nccl_switch``) times this: 1 is NCCL's own figure."""
    nvls_measured: bool = False
    """``nvls_scale`` is fitted to times NCCL ran NVLS at; False: NCCL's own figure (1)."""
    nvls_net_scale: float | None = None
    """Multiplies NVLS-tree's bandwidth between nodes alone (tuning.cc line 320, ``interBw``: the graph's
    ``bwInter``, which search.cc charges to the NICs, lines 145 and 726-741), where the fit behind
    ``nvls_scale`` did not measure it: 1 (NCCL's own) for a fit within one node asked across nodes,
    whose scale is the NVSwitch's reduction (``intraBw``). None: ``nvls_scale`` scales it too."""
    nvls: Graph | None = None
    """NCCL's NVLS graph (``nccl_graph.nvls_graph``): NVLink SHARP found; None: NVLS and NVLS-tree off."""
    collnet: bool = False
    """A CollNet plugin is loaded and enabled (``NCCL_COLLNET_ENABLE=1``); off by default, as in NCCL."""
    nvswitch: bool = False
    """The node's GPUs hang off an NVSwitch (``nvsCount``): CollNet-direct needs it."""
    x86: bool = True
    """The CPU is x86 (not Grace's ARM): NVLS-tree's size correction is x86's on Blackwell."""

    def __post_init__(self) -> None:
        if not self.bus_bw_gbps > 0 or not math.isfinite(self.bus_bw_gbps):
            raise ConfigError(f"NCCL's model needs a positive bus bandwidth, got {self.bus_bw_gbps}")
        if self.arch not in ARCHS:
            raise ConfigError(f"unknown GPU generation {self.arch!r}; known: {', '.join(ARCHS)}")
        net_scale = self.latency_scale if self.net_latency_scale is None else self.net_latency_scale
        if self.channels < 1 or not min(self.latency_scale, net_scale) >= 0 or (self.comm_channels or 1) < 1:
            raise ConfigError("NCCL's model needs at least one channel and a latency scale >= 0")
        if not self.nvls_scale > 0 or not (self.nvls_net_scale is None or self.nvls_net_scale > 0):
            raise ConfigError("NCCL's model needs a positive NVLS scale")

    def own_figures(self) -> NcclMachine | None:
        """The machine as NCCL itself prices it: its topology's bus bandwidth, its own latencies and NVLS
        figure; None where the topology is not known (then nothing here tells its figures apart)."""
        if self.topology_bus_bw_gbps is None:
            return None
        return dataclasses.replace(
            self,
            bus_bw_gbps=self.topology_bus_bw_gbps,
            latency_scale=1.0,
            latency_measured=False,
            net_latency_scale=None,
            nvls_scale=1.0,
            nvls_net_scale=None,
            inter_bus_bw_gbps=None,
        )


def with_topology(
    machine: NcclMachine, node: NcclNode | None, nodes: int, *, collnet: bool = False, fewest_gpus: int | None = None
) -> NcclMachine:
    """``machine`` with what NCCL's topology search finds on ``nodes`` nodes of ``node``: the ring's
    channels (``nccl_graph.ring_graph``) and the communicator's, the NVLS graph, an NVSwitch, the CPU;
    and ``collnet`` (a CollNet plugin), and the ring's bus bandwidth NCCL's search gives (its own).
    ``fewest_gpus``: the GPUs of a part-full last node, whose fewer NVLS heads every rank takes
    (``nccl_graph.nvls_graph_over``; its ring search finds no fewer channels). Where ``node`` is None
    (the GPU's links not known), or across nodes whose NICs are not known, the channels are
    ``DEFAULT_CHANNELS`` and NVLS is off."""
    if node is None or (nodes > 1 and not node.nic_known()):
        # Across nodes the search's channels hang on the NICs, and NVLS's heads are the GPUs with one
        # (nvls_graph): with them unknown, none is claimed. A machine calibrated on one node carried
        # its one-node graphs here: its NVLS graph enabled NVLS-tree on 2 and 20 GB200 racks (NVLS's
        # 32 heads, each 40 GB/s between racks) and its 32 channels were "assumed".
        return dataclasses.replace(
            machine,
            collnet=collnet,
            nvls=None,
            channels=DEFAULT_CHANNELS,
            comm_channels=None,
            topology_bus_bw_gbps=None,
        )
    ring = ring_graph(node, nodes)
    return dataclasses.replace(
        machine,
        channels=ring.channels,
        comm_channels=comm_channels(ring, node, nodes),
        topology_bus_bw_gbps=ring.bus_bw_gbps,
        nvls=nvls_graph_over(node, nodes, fewest_gpus),
        nvswitch=True,
        x86=node.x86,
        collnet=collnet,
    )


def channels_text(machine: NcclMachine, node: NcclNode | None, nodes: int) -> str:
    """The channels NCCL runs at this shape and why, in a few words (predict's basis)."""
    if node is None:
        return f"{machine.comm_channels or machine.channels} channels assumed (the GPU's links not known)"
    if nodes > 1 and not node.nic_known():
        return f"{machine.comm_channels or machine.channels} channels assumed (the NICs not known)"
    ring = ring_graph(node, nodes)
    text = f"{machine.comm_channels or machine.channels} channels (NCCL's search: {ring.why}, doubled to run)"
    if machine.nvls is not None:
        text += f"; {machine.nvls.why}"
    return text
