"""Spec bandwidth figures, GB/s per direction (10^9 bytes per second), for the topology sources.

Every source that knows a link's generation and width (NVML, NCCL XML) prices it here, so that the
same machine gets the same figures whichever way it was described.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.topology.model import DEFAULT_NVLINK_GBPS_PER_LINK, LinkKind

# Per NVLink link and direction, by NVLink generation: NVLink 1 (P100) 20 GB/s; NVLink 2 (V100),
# 3 (A100) and 4 (H100) 25 GB/s (NVLink 3 and 4 halved the lanes per link and doubled the rate,
# keeping 25 GB/s per link); NVLink 5 (B200/GB200) about 50 GB/s.
NVLINK_GBPS_PER_LINK: dict[int, float] = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}

# nvmlDeviceGetNvLinkVersion answers an enum, not the generation: 1=1.0, 2=2.0, 3=2.2, 4=3.0,
# 5=3.1, 6=4.0, 7=5.0. Map it to (generation, label).
NVML_NVLINK_VERSIONS: dict[int, tuple[int, str]] = {
    1: (1, "1.0"),
    2: (2, "2.0"),
    3: (2, "2.2"),
    4: (3, "3.0"),
    5: (3, "3.1"),
    6: (4, "4.0"),
    7: (5, "5.0"),
}

# NVLink generation by CUDA compute capability major version (NCCL XML gives `sm`, not the version):
# sm 6x P100, 7x V100 (sm 75 Turing has NVLink 2 bridges too), 8x A100/GA10x, 9x H100, 10x+ Blackwell.
_NVLINK_GEN_BY_SM_MAJOR: dict[int, int] = {6: 1, 7: 2, 8: 3, 9: 4}

# PCIe per lane and direction after line coding: gen1 0.25, gen2 0.5 (8b/10b); gen3 0.985, gen4 1.97,
# gen5 3.94 (128b/130b); gen6 about 7.9 (PAM4, FLIT).
PCIE_GBPS_PER_LANE: dict[int, float] = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.97, 5: 3.94, 6: 7.9}

# The share of the raw PCIe link rate that a peer-to-peer transfer gets on each kind of path. A modelling
# choice, not a measurement: through one switch (PIX) or a tree of switches (PXB) traffic stays in the
# switch fabric and runs near the link rate; through the host bridge (PHB) the root complex costs some;
# between host bridges of one socket (NODE) more; across sockets (SYS) the SMP interconnect (UPI/xGMI)
# roughly halves it, and NCCL also prices SYS paths lowest. Keeps nvlink > pix > pxb > phb > node > sys.
PCIE_LEVEL_SHARE: dict[LinkKind, float] = {
    LinkKind.PIX: 1.0,
    LinkKind.PXB: 0.9,
    LinkKind.PHB: 0.8,
    LinkKind.NODE: 0.7,
    LinkKind.SYS: 0.5,
}

# NVML's nvmlDeviceGetTopologyCommonAncestor levels. 0 (internal: two GPUs on one board, such as a K80)
# crosses at most the board's own switch, so it reads as PIX.
NVML_TOPOLOGY_LEVELS: dict[int, LinkKind] = {
    0: LinkKind.PIX,
    10: LinkKind.PIX,
    20: LinkKind.PXB,
    30: LinkKind.PHB,
    40: LinkKind.NODE,
    50: LinkKind.SYS,
}


def nvlink_gbps(generation: int | None, count: int) -> float:
    """Bandwidth of ``count`` bonded NVLinks of a generation, GB/s per direction.

    An unknown generation is priced at the documented default per link (25 GB/s).
    """
    per_link = NVLINK_GBPS_PER_LINK.get(generation or 0, DEFAULT_NVLINK_GBPS_PER_LINK)
    return round(per_link * count, 3)


def nvlink_generation_for_sm(sm: int | None) -> int | None:
    """The NVLink generation of a GPU with compute capability ``sm`` (80 for 8.0); None when unknown."""
    if sm is None or sm <= 0:
        return None
    major = sm // 10
    if major >= 10:
        return 5
    return _NVLINK_GEN_BY_SM_MAJOR.get(major)


def pcie_gbps(generation: int | None, width: int | None, kind: LinkKind) -> float | None:
    """Bandwidth of a PCIe-level path (PIX..SYS), GB/s per direction, or None when gen or width is unknown."""
    if generation is None or width is None or generation not in PCIE_GBPS_PER_LANE or width <= 0:
        return None
    share = PCIE_LEVEL_SHARE.get(kind)
    if share is None:
        return None
    return round(PCIE_GBPS_PER_LANE[generation] * width * share, 3)


def pcie_generation_for_speed(speed: str | None) -> int | None:
    """The PCIe generation of a link speed as NCCL writes it (``"16 GT/s"``, ``"8.0 GT/s PCIe"``)."""
    if not speed:
        return None
    try:
        rate = float(speed.split()[0])
    except (ValueError, IndexError):
        return None
    # Transfer rates per generation: 2.5, 5, 8, 16, 32, 64 GT/s.
    for gen, gts in ((6, 64.0), (5, 32.0), (4, 16.0), (3, 8.0), (2, 5.0), (1, 2.5)):
        if rate >= gts * 0.99:
            return gen
    return None


@dataclass(frozen=True, slots=True)
class GpuLinks:
    """What a GPU's name tells of its generation and its links to the other GPUs of its node."""

    name: str
    """The model as matched (``H100``), for notes."""
    sm: int
    """CUDA compute capability x10 (90 for 9.0); 0 for a GPU that is not NVIDIA's."""
    nvlink_gbps: float | None
    """All its NVLinks together, GB/s per direction (its NVLink generation's figure per link times its
    links); None where it has none (a PCIe card), whose peers are then reached over PCIe."""
    nvswitch_reduction: bool
    """Whether its NVSwitch systems reduce in the switch (NVLink SHARP, what NCCL's NVLS uses):
    NVSwitch 3 and later, Hopper and Blackwell SXM boards."""
    vendor: str = "NVIDIA"
    nvlink_domain: int = 0
    """The GPUs one NVLink domain joins across the hosts of a rack (multi-node NVLink: 72 in a GB200 or
    GB300 NVL72, 18 trays of 4), which NCCL counts as one node; 0 where NVLink stays within a host."""


# Datacenter GPUs by the name nvidia-smi and nccl-tests print, most specific first. Links per GPU from
# NVIDIA's data sheets: P100 SXM2 4 NVLink 1 (160 GB/s both ways); V100 SXM2 6 NVLink 2 (300 GB/s both
# ways); A100 SXM 12 NVLink 3 (600 GB/s); H100/H200 SXM and GH200 18 NVLink 4 (900 GB/s); B200, B300,
# GB200 and GB300 18 NVLink 5 (1.8 TB/s). A PCIe card of the same chip has no NVSwitch (and at most a
# bridge): not listed, so no figure is claimed for it. AMD's MI300X names its vendor so that NCCL's
# model is never applied to RCCL's runs.
_GPUS: tuple[tuple[str, GpuLinks], ...] = (
    ("GB300", GpuLinks("GB300", 103, NVLINK_GBPS_PER_LINK[5] * 18, True, nvlink_domain=72)),
    ("B300", GpuLinks("B300", 103, NVLINK_GBPS_PER_LINK[5] * 18, True)),
    ("GB200", GpuLinks("GB200", 100, NVLINK_GBPS_PER_LINK[5] * 18, True, nvlink_domain=72)),
    ("B200", GpuLinks("B200", 100, NVLINK_GBPS_PER_LINK[5] * 18, True)),
    ("GH200", GpuLinks("GH200", 90, NVLINK_GBPS_PER_LINK[4] * 18, True)),
    ("H200", GpuLinks("H200", 90, NVLINK_GBPS_PER_LINK[4] * 18, True)),
    ("H100", GpuLinks("H100", 90, NVLINK_GBPS_PER_LINK[4] * 18, True)),
    ("A100", GpuLinks("A100", 80, NVLINK_GBPS_PER_LINK[3] * 12, False)),
    ("V100", GpuLinks("V100", 70, NVLINK_GBPS_PER_LINK[2] * 6, False)),
    ("P100", GpuLinks("P100", 60, NVLINK_GBPS_PER_LINK[1] * 4, False)),
    ("MI300X", GpuLinks("MI300X", 0, None, False, vendor="AMD")),
    ("MI325X", GpuLinks("MI325X", 0, None, False, vendor="AMD")),
    ("MI355X", GpuLinks("MI355X", 0, None, False, vendor="AMD")),
)


_CARD_WORDS = frozenset({"PCIE", "GEFORCE", "RTX", "TITAN", "QUADRO", "T4", "L4", "L40", "L40S", "A10", "A16", "A40"})
"""Words of a device name that make it a PCIe card (a PCIe data-center board, a GeForce, RTX, TITAN or
Quadro card, an inference card): its NVLink, where it has any, is a bridge joining two GPUs."""

_NVL = "NVL"
"""The word of an NVL board's name (``NVIDIA H100 NVL``): a PCIe card whose NVLink is a bridge, no
NVSwitch, so never the SXM board of its chip in ``_GPUS`` (it was read as H100 SXM, NVLink SHARP and all)."""
_NVL_CARDS = (("H100", _NVL),)
"""NVL boards bridged in pairs, as ``_CARD_WORDS``' cards are (NVIDIA's H100 product page, the H100 NVL
column: PCIe Gen5 128 GB/s, NVLink 600 GB/s, a bridge joining two cards). H200 NVL is not listed: its
bridge joins two or four cards, which the pairs this module knows do not describe, so nothing is claimed."""


def _words(device_name: str) -> set[str]:
    return set(device_name.upper().replace("-", " ").split())


def pcie_card(device_name: str) -> bool:
    """Whether a device name names a PCIe card (``_CARD_WORDS``, ``_NVL_CARDS``): at most pairs of its
    GPUs are joined by NVLink (a bridge), so a node of three or more reaches its peers over PCIe."""
    words = _words(device_name)
    return not _CARD_WORDS.isdisjoint(words) or any(words.issuperset(card) for card in _NVL_CARDS)


_CARD_SM: tuple[tuple[tuple[str, ...], int], ...] = (
    *((("RTX", m), 120) for m in ("5090", "5080", "5070", "5060")),
    *((("RTX", m), 89) for m in ("4090", "4080", "4070", "4060")),
    (("RTX", "6000", "ADA"), 89),
    (("L40S",), 89),
    (("L40",), 89),
    (("L4",), 89),
    *((("RTX", m), 86) for m in ("3090", "3080", "3070", "3060", "A6000", "A5000", "A4000")),
    (("A40",), 86),
    (("A10",), 86),
    (("A16",), 86),
    (("H100", "PCIE"), 90),
    (("H100", _NVL), 90),
    (("H200", _NVL), 90),
    (("A100", "PCIE"), 80),
    *((("RTX", m), 75) for m in ("2080", "2070", "2060")),
    (("TITAN", "RTX"), 75),
    (("T4",), 75),
    (("V100", "PCIE"), 70),
    (("P100", "PCIE"), 60),
    *((("GTX", m), 61) for m in ("1080", "1070", "1060", "1050")),
)
"""Compute capability x10 of PCIe cards by the words of their device names (NVIDIA's CUDA GPUs table,
developer.nvidia.com/cuda-gpus: GeForce RTX 50 12.0; RTX 40, L4, L40, L40S and RTX 6000 Ada 8.9; RTX
30, RTX A4000-A6000, A10, A16 and A40 8.6; H100 PCIe, H100 NVL and H200 NVL 9.0; A100 PCIe 8.0; RTX 20,
TITAN RTX and T4 7.5; V100 PCIe 7.0; GeForce GTX 1050-1080 6.1; P100 PCIe 6.0), every word of an entry in
the name; the SXM boards are ``_GPUS``."""


@dataclass(frozen=True, slots=True)
class NvlinkBridge:
    """The NVLink bridge a PCIe card takes, joining it to one other card, and the PCIe it has besides."""

    name: str
    bridge_gbps: float
    """The bridge's NVLink, GB/s a direction (half the total NVIDIA's spec sheets give)."""
    pcie_generation: int
    """The card's PCIe generation (x16)."""

    @property
    def pcie_x16_gbps(self) -> float:
        """What the card's PCIe x16 carries at most, GB/s a direction: no ring over PCIe goes faster."""
        return PCIE_GBPS_PER_LANE[self.pcie_generation] * 16


_BRIDGED_CARDS: tuple[tuple[tuple[str, ...], NvlinkBridge], ...] = (
    (("2080", "TI"), NvlinkBridge("RTX 2080 Ti", 50.0, 3)),
    (("2080",), NvlinkBridge("RTX 2080", 25.0, 3)),
    (("2070", "SUPER"), NvlinkBridge("RTX 2070 SUPER", 25.0, 3)),
    (("TITAN", "RTX"), NvlinkBridge("TITAN RTX", 50.0, 3)),
    (("QUADRO", "RTX", "8000"), NvlinkBridge("Quadro RTX 8000", 50.0, 3)),
    (("QUADRO", "RTX", "6000"), NvlinkBridge("Quadro RTX 6000", 50.0, 3)),
    (("QUADRO", "RTX", "5000"), NvlinkBridge("Quadro RTX 5000", 25.0, 3)),
    (("3090",), NvlinkBridge("RTX 3090", 56.25, 4)),
    (("A6000",), NvlinkBridge("RTX A6000", 56.25, 4)),
    (("A5500",), NvlinkBridge("RTX A5500", 56.25, 4)),
    (("A5000",), NvlinkBridge("RTX A5000", 56.25, 4)),
    (("A4500",), NvlinkBridge("RTX A4500", 56.25, 4)),
    (("A40",), NvlinkBridge("A40", 56.25, 4)),
    (("A100", "PCIE"), NvlinkBridge("A100 PCIe", 300.0, 4)),
    (("A800", "PCIE"), NvlinkBridge("A800 PCIe", 200.0, 4)),
    (("H100", "PCIE"), NvlinkBridge("H100 PCIe", 300.0, 5)),
    (("H100", _NVL), NvlinkBridge("H100 NVL", 300.0, 5)),
)
"""The PCIe cards that take an NVLink bridge, by the words of their device names (most specific first),
with the bridge's bandwidth from NVIDIA's spec sheets (total, both directions: RTX 2080 Ti, TITAN RTX,
Quadro RTX 6000/8000 100 GB/s; RTX 2080, 2080 SUPER, 2070 SUPER, Quadro RTX 5000 50 GB/s; RTX 3090,
RTX A4500-A6000, A40 112.5 GB/s; A100 PCIe, H100 PCIe and H100 NVL 600 GB/s, A800 PCIe 400 GB/s, over
three bridges). Every
other PCIe card (``pcie_card``: RTX 40 and 50 series, RTX 6000 Ada, L4, L40, L40S, T4, A10, A16, the
GTX cards, V100 PCIe) has no NVLink: its GPUs reach each other over PCIe. Each bridge carries more than
its card's PCIe x16, so a ring of two cards faster than that crossed a bridge."""


def nvlink_bridge(device_name: str) -> NvlinkBridge | None:
    """The NVLink bridge a PCIe card of this device name takes, or None where it takes none (or the name
    is not a PCIe card's)."""
    if not pcie_card(device_name):
        return None
    words = _words(device_name)
    return next((bridge for needed, bridge in _BRIDGED_CARDS if words.issuperset(needed)), None)


def compute_capability(device_name: str) -> int:
    """A device's compute capability x10, from the listed SXM boards or the PCIe cards (``_CARD_SM``);
    0 where the name is not known."""
    board = gpu_links(device_name)
    if board is not None:
        return board.sm
    words = _words(device_name)
    return next((sm for needed, sm in _CARD_SM if words.issuperset(needed)), 0)


def gpu_links(device_name: str) -> GpuLinks | None:
    """The GPU a device name names (``NVIDIA H100 80GB HBM3``, ``NVIDIA GB200``), or None where it is
    not one of the listed SXM boards (a PCIe card, a consumer GPU, an unknown name)."""
    words = _words(device_name)
    if "PCIE" in words or _NVL in words:
        return None
    for key, links in _GPUS:
        if key in words:
            return links
    return None
