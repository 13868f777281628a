"""Every published `nvidia-smi topo -m` paste in tests/fixtures/real, read and checked against its facts.

The facts below were read by eye from each file (tests/fixtures/real/SOURCES.md says where each was
published). The files are the owners' bytes, never edited to suit the parser.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from collbench.topology.model import LinkKind, Topology
from collbench.topology.nvidia_smi import read_nvidia_smi_topo

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
K = LinkKind


@dataclass(frozen=True)
class Facts:
    gpus: int
    nics: int
    links: dict[tuple[str, str], tuple[LinkKind, int] | None]
    """Pairs checked; None: the paste gives no link for that pair."""
    nic_names: tuple[str | None, ...] = ()
    cpus: dict[str, int | None] = field(default_factory=dict)
    """GPU -> how many CPUs its affinity names (None: unknown)."""
    numa: dict[str, int | None] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    """A fragment of each assumption the parser must announce, in order."""


FACTS: dict[str, Facts] = {
    "1080ti-x2-phb.topo.txt": Facts(
        2, 0, {("GPU0", "GPU1"): (K.PHB, 1)}, cpus={"GPU0": 12, "GPU1": 12}, numa={"GPU0": None}
    ),
    "2080ti-x2-pix-autodl.topo.txt": Facts(
        2, 0, {("GPU0", "GPU1"): (K.PIX, 1)}, cpus={"GPU0": 48, "GPU1": 48}, numa={"GPU0": 1, "GPU1": 1}
    ),
    "a10-x4-sys-2nics.topo.txt": Facts(
        4,
        2,
        {("GPU0", "GPU3"): (K.SYS, 1), ("GPU2", "NIC1"): (K.SYS, 1), ("NIC0", "NIC1"): (K.PIX, 1)},
        nic_names=("mlx5_0", "mlx5_1"),
        cpus={"GPU3": 128},
        numa={"GPU3": 0},
    ),
    "a100-x8-nv12-17nics.topo.txt": Facts(
        8,
        17,
        {
            ("GPU0", "GPU7"): (K.NVSWITCH, 12),
            ("GPU0", "NIC0"): (K.PXB, 1),
            ("GPU0", "NIC4"): (K.SYS, 1),
            ("GPU3", "NIC7"): (K.PXB, 1),
            ("GPU7", "NIC15"): (K.PXB, 1),
            ("GPU7", "NIC16"): (K.SYS, 1),
            ("NIC0", "NIC1"): (K.PIX, 1),
            ("NIC0", "NIC2"): (K.PXB, 1),
            ("NIC12", "NIC16"): (K.SYS, 1),
        },
        nic_names=(*(f"mlx5_{i}" for i in range(2, 18)), "mlx5_bond_0"),
        cpus={"GPU0": 104},
        numa={"GPU7": 0},
        notes=("NV12 between every pair of 8 GPUs",),
    ),
    "a800-x8-nv8-4nics.topo.txt": Facts(
        8,
        4,
        {
            ("GPU0", "GPU5"): (K.NVSWITCH, 8),
            ("GPU0", "NIC0"): (K.NODE, 1),
            ("GPU1", "NIC0"): (K.PIX, 1),
            ("GPU3", "NIC1"): (K.PIX, 1),
            ("GPU0", "NIC2"): (K.SYS, 1),
            ("GPU7", "NIC3"): (K.PIX, 1),
            ("NIC0", "NIC1"): (K.NODE, 1),
            ("NIC2", "NIC3"): (K.PIX, 1),
        },
        nic_names=("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"),
        cpus={"GPU0": 64, "GPU4": 64},
        numa={"GPU0": 0, "GPU4": 1},
        notes=("NV8 between every pair of 8 GPUs",),
    ),
    "h800-x8-nv8-cut-paste.topo.txt": Facts(
        8,
        4,
        {
            ("GPU2", "GPU6"): (K.NVSWITCH, 8),
            ("GPU1", "NIC0"): (K.PIX, 1),
            ("GPU0", "NIC0"): (K.NODE, 1),
            ("GPU3", "NIC1"): (K.PIX, 1),
            ("GPU0", "NIC3"): (K.SYS, 1),
            ("GPU7", "NIC2"): (K.PIX, 1),
            ("NIC0", "NIC1"): None,  # the NIC columns were cut from the paste
        },
        nic_names=("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"),
        # GPU0-3's "-31,64-95" lost its first digits in the paste; GPU7's "2-63,96-127" reads as given.
        cpus={"GPU0": None, "GPU3": None, "GPU4": 64, "GPU7": 94},
        numa={"GPU0": 0, "GPU7": 1},
        notes=(
            "GPU0's CPU Affinity '-31,64-95' is not usable",
            "GPU1's CPU Affinity",
            "GPU2's CPU Affinity",
            "GPU3's CPU Affinity",
            "NV8 between every pair of 8 GPUs",
            "rows NIC0, NIC1, NIC2, NIC3 have no column in the header",
        ),
    ),
    # DGX-1 (V100) hybrid cube-mesh, quoted in a Python test: the header line starts with the string's
    # opening; NIC columns carry their port names, out of order.
    "dgx1-v100-x8-hybrid-cube-mesh-in-python-string.topo.txt": Facts(
        8,
        4,
        {
            ("GPU0", "GPU1"): (K.NVLINK, 1),
            ("GPU0", "GPU3"): (K.NVLINK, 2),
            ("GPU0", "GPU4"): (K.NVLINK, 2),
            ("GPU0", "GPU5"): (K.SYS, 1),
            ("GPU3", "GPU7"): (K.NVLINK, 1),
            ("GPU0", "NIC0"): (K.PIX, 1),
            ("GPU0", "NIC2"): (K.PHB, 1),
            ("GPU4", "NIC1"): (K.PIX, 1),
            ("NIC0", "NIC2"): (K.PHB, 1),
            ("NIC0", "NIC1"): (K.SYS, 1),
        },
        nic_names=("mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"),
        cpus={"GPU0": 40, "GPU7": 40},
        numa={"GPU0": None},
        notes=("before GPU0 on the header line",),
    ),
    # Captured from a terminal: the header underlined with ANSI codes (ESC[4m ... ESC[0m).
    "gb10-x1-4nics-ansi.topo.txt": Facts(
        1,
        4,
        {("GPU0", "NIC0"): (K.NODE, 1), ("NIC0", "NIC1"): (K.PIX, 1), ("NIC1", "NIC2"): (K.NODE, 1)},
        nic_names=("rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1"),
        cpus={"GPU0": 20},
        numa={"GPU0": 0},
    ),
    "pcie-x8-node-phb-sys-ansi-benchmark-output.topo.txt": Facts(
        8,
        0,
        {
            ("GPU0", "GPU1"): (K.NODE, 1),
            ("GPU1", "GPU2"): (K.PHB, 1),
            ("GPU3", "GPU4"): (K.PHB, 1),
            ("GPU6", "GPU7"): (K.PHB, 1),
            ("GPU0", "GPU6"): (K.SYS, 1),
        },
        cpus={"GPU0": 32, "GPU7": 32},
        numa={"GPU0": 0, "GPU7": 1},
    ),
    # TensorFlow's GDR README: 4x Tesla K40m over two sockets, an old driver's `SOC` (now SYS), one NIC
    # named by its port in the header (no NIC legend), no NUMA column; the shell prompt above the header.
    "k40m-x4-soc-mlx4-tf-gdr.topo.txt": Facts(
        4,
        1,
        {
            ("GPU0", "GPU1"): (K.PHB, 1),
            ("GPU0", "GPU2"): (K.SYS, 1),
            ("GPU1", "GPU3"): (K.SYS, 1),
            ("GPU2", "GPU3"): (K.PHB, 1),
            ("GPU0", "NIC0"): (K.SYS, 1),
            ("GPU2", "NIC0"): (K.PHB, 1),
            ("GPU3", "NIC0"): (K.PHB, 1),
        },
        nic_names=("mlx4_0",),
        cpus={"GPU0": 6, "GPU2": 6},
        numa={"GPU0": None, "GPU3": None},
    ),
    # Two H100 PCIe cards joined by NVLink bridges (NV12 on the only pair: a direct link, no NVSwitch);
    # indented by six spaces in a Japanese blog page, the prompt line above the header.
    "h100pcie-x2-nv12-bridge-indented.topo.txt": Facts(
        2, 0, {("GPU0", "GPU1"): (K.NVLINK, 12)}, cpus={"GPU0": 64, "GPU1": 64}, numa={"GPU0": 1, "GPU1": 1}
    ),
    # ALCF Polaris node: 4x A100 all NV4, two NICs; the header has no leading tab and its last three
    # columns are separated by single spaces ("mlx5_1 CPU Affinity NUMA Affinity").
    "a100-x4-nv4-polaris-2nics-header-spaces.topo.txt": Facts(
        4,
        2,
        {
            ("GPU0", "GPU3"): (K.NVLINK, 4),
            ("GPU1", "GPU2"): (K.NVLINK, 4),
            ("GPU0", "NIC0"): (K.SYS, 1),
            ("GPU1", "NIC1"): (K.PHB, 1),
            ("GPU3", "NIC0"): (K.PHB, 1),
            ("GPU3", "NIC1"): (K.SYS, 1),
            ("NIC0", "NIC1"): (K.SYS, 1),
        },
        nic_names=("mlx5_0", "mlx5_1"),
        cpus={"GPU0": 16, "GPU3": 16},
        numa={"GPU0": 3, "GPU1": 2, "GPU2": 1, "GPU3": 0},
    ),
    # A GH200 quad node (4 superchips, NV6 on every pair: 18 links per GPU, direct, no NVSwitch) as a
    # PyTorch benchmark printed it; each GPU's NUMA affinity is a list of nodes ("0,5-11"), so no single node.
    "gh200-x4-nv6-numa-lists.topo.txt": Facts(
        4,
        0,
        {("GPU0", "GPU1"): (K.NVLINK, 6), ("GPU0", "GPU3"): (K.NVLINK, 6), ("GPU2", "GPU3"): (K.NVLINK, 6)},
        cpus={"GPU0": 72, "GPU3": 72},
        numa={"GPU0": None, "GPU3": None},
    ),
    # 3x RTX A6000: one NVLink-bridged pair (NV4), the third card on NODE; the header underlined with ANSI.
    "a6000-x3-nv4-pair-ansi.topo.txt": Facts(
        3,
        0,
        {("GPU0", "GPU1"): (K.NVLINK, 4), ("GPU0", "GPU2"): (K.NODE, 1), ("GPU1", "GPU2"): (K.NODE, 1)},
        cpus={"GPU0": 64, "GPU2": 64},
        numa={"GPU0": 0, "GPU2": 0},
    ),
    # 8x V100 hybrid cube-mesh as a Kubernetes KEP quoted it, "simplified" by its author: no affinity
    # columns at all, two blank lines before the legend.
    "v100-x8-nv1-nv2-no-affinity-kep.topo.txt": Facts(
        8,
        0,
        {
            ("GPU0", "GPU1"): (K.NVLINK, 1),
            ("GPU0", "GPU3"): (K.NVLINK, 2),
            ("GPU0", "GPU4"): (K.NVLINK, 2),
            ("GPU0", "GPU5"): (K.SYS, 1),
            ("GPU1", "GPU5"): (K.NVLINK, 2),
            ("GPU2", "GPU6"): (K.NVLINK, 1),
            ("GPU3", "GPU7"): (K.NVLINK, 1),
            ("GPU5", "GPU7"): (K.NVLINK, 1),
            ("GPU6", "GPU7"): (K.NVLINK, 2),
        },
        cpus={"GPU0": None, "GPU7": None},
        numa={"GPU0": None, "GPU7": None},
    ),
    # DGX-1 with P100 (NV1 only), 2017: `SOC`, four NICs named by port out of order, every GPU's CPU
    # affinity "1-1"; the header lost the separators between its GPU names ("GPU0GPU1...GPU7mlx5_0").
    "p100-dgx1-x8-nv1-soc-4nics-glued-header.topo.txt": Facts(
        8,
        4,
        {
            ("GPU0", "GPU1"): (K.NVLINK, 1),
            ("GPU0", "GPU4"): (K.NVLINK, 1),
            ("GPU0", "GPU5"): (K.SYS, 1),
            ("GPU1", "GPU5"): (K.NVLINK, 1),
            ("GPU3", "GPU7"): (K.NVLINK, 1),
            ("GPU0", "NIC0"): (K.PIX, 1),
            ("GPU0", "NIC1"): (K.SYS, 1),
            ("GPU0", "NIC2"): (K.PHB, 1),
            ("GPU4", "NIC1"): (K.PIX, 1),
            ("GPU6", "NIC1"): (K.PHB, 1),
            ("GPU7", "NIC3"): (K.PIX, 1),
            ("NIC0", "NIC1"): (K.SYS, 1),
            ("NIC0", "NIC2"): (K.PHB, 1),
            ("NIC1", "NIC3"): (K.PHB, 1),
        },
        nic_names=("mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"),
        cpus={"GPU0": 1, "GPU7": 1},
        numa={"GPU0": None},
        notes=("'GPU0GPU1GPU2GPU3GPU4GPU5GPU6GPU7mlx5_0' as GPU0, GPU1,",),
    ),
    # A do-it-yourself box of 7 GeForce cards (6x GTX 1070 + 1x 1080): two PCIe switches (PIX inside,
    # PHB between), one CPU; an odd GPU count, no legend in the quote.
    "gtx1070-x7-pix-phb-diy.topo.txt": Facts(
        7,
        0,
        {
            ("GPU0", "GPU1"): (K.PIX, 1),
            ("GPU0", "GPU3"): (K.PHB, 1),
            ("GPU2", "GPU6"): (K.PHB, 1),
            ("GPU3", "GPU6"): (K.PIX, 1),
            ("GPU5", "GPU6"): (K.PIX, 1),
        },
        cpus={"GPU0": 20, "GPU6": 20},
        numa={"GPU0": None},
    ),
    # An Azure NV12 VM (2x Tesla M60): SOC between the two GPUs although both report the same CPU
    # affinity; the header starts at the left margin like the rows.
    "m60-x2-soc-azure-nv12.topo.txt": Facts(
        2, 0, {("GPU0", "GPU1"): (K.SYS, 1)}, cpus={"GPU0": 12, "GPU1": 12}, numa={"GPU0": None, "GPU1": None}
    ),
    # 8x V100 cube-mesh (a numbering other than DGX-1's) on two sockets with 2 NICs; re-aligned by hand
    # in a README: runs of two tabs, tabs followed by spaces, cells that start with a space (" X ").
    "v100-x8-nv1-nv2-2nics-realigned-tabs.topo.txt": Facts(
        8,
        2,
        {
            ("GPU0", "GPU1"): (K.NVLINK, 1),
            ("GPU0", "GPU2"): (K.NVLINK, 2),
            ("GPU0", "GPU4"): (K.SYS, 1),
            ("GPU0", "GPU7"): (K.NVLINK, 2),
            ("GPU1", "GPU6"): (K.NVLINK, 2),
            ("GPU2", "GPU5"): (K.NVLINK, 1),
            ("GPU3", "GPU4"): (K.NVLINK, 1),
            ("GPU0", "NIC0"): (K.NODE, 1),
            ("GPU2", "NIC0"): (K.PIX, 1),
            ("GPU0", "NIC1"): (K.SYS, 1),
            ("GPU5", "NIC1"): (K.NODE, 1),
            ("GPU7", "NIC1"): (K.PIX, 1),
            ("NIC0", "NIC1"): (K.SYS, 1),
        },
        nic_names=("mlx5_0", "mlx5_1"),
        cpus={"GPU0": 48, "GPU7": 48},
        numa={"GPU0": 0, "GPU3": 0, "GPU4": 1, "GPU7": 1},
    ),
    # 8x V100 cube-mesh on one socket (Baidu X-Man 2.0): NODE where there is no NVLink, one NIC named
    # mlx5_0 in the header; header and legend at the left margin.
    "v100-x8-nv1-nv2-node-one-socket-paddle.topo.txt": Facts(
        8,
        1,
        {
            ("GPU0", "GPU1"): (K.NVLINK, 2),
            ("GPU0", "GPU3"): (K.NVLINK, 1),
            ("GPU0", "GPU5"): (K.NODE, 1),
            ("GPU1", "GPU5"): (K.NVLINK, 2),
            ("GPU2", "GPU6"): (K.NVLINK, 1),
            ("GPU3", "GPU7"): (K.NVLINK, 2),
            ("GPU4", "GPU7"): (K.NVLINK, 1),
            ("GPU0", "NIC0"): (K.NODE, 1),
            ("GPU7", "NIC0"): (K.NODE, 1),
        },
        nic_names=("mlx5_0",),
        cpus={"GPU0": 24, "GPU7": 24},
        numa={"GPU0": None},
    ),
    # Saved by vLLM's collect-env: the header starts with two spaces then a tab; CPU Affinity is a comma list.
    "l40s-x2-node-2nics-vllm-collect-env.topo.txt": Facts(
        2,
        2,
        {
            ("GPU0", "GPU1"): (K.NODE, 1),
            ("GPU0", "NIC0"): (K.SYS, 1),
            ("GPU1", "NIC1"): (K.SYS, 1),
            ("NIC0", "NIC1"): (K.PIX, 1),
        },
        nic_names=("mlx5_0", "mlx5_1"),
        cpus={"GPU0": 6, "GPU1": 6},
        numa={"GPU0": 0, "GPU1": 0},
    ),
    # The shell prompt and command stand above the header.
    "rtx6000ada-x4-node-sys-4nics-prompt.topo.txt": Facts(
        4,
        4,
        {
            ("GPU0", "GPU1"): (K.NODE, 1),
            ("GPU0", "GPU2"): (K.SYS, 1),
            ("GPU1", "GPU3"): (K.SYS, 1),
            ("GPU2", "GPU3"): (K.NODE, 1),
            ("GPU0", "NIC0"): (K.NODE, 1),
            ("GPU0", "NIC2"): (K.SYS, 1),
            ("GPU3", "NIC3"): (K.NODE, 1),
            ("NIC0", "NIC1"): (K.PIX, 1),
            ("NIC1", "NIC2"): (K.SYS, 1),
            ("NIC2", "NIC3"): (K.PIX, 1),
        },
        nic_names=("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"),
        cpus={"GPU0": 32, "GPU3": 32},
        numa={"GPU0": 0, "GPU1": 0, "GPU2": 1, "GPU3": 1},
    ),
    # A whole file saved from a terminal: ANSI-underlined header, tab-separated, NIC rows padded with empty tab cells.
    "h200-x8-nv18-10nics-saved-whole.topo.txt": Facts(
        8,
        10,
        {
            ("GPU0", "GPU7"): (K.NVSWITCH, 18),
            ("GPU0", "NIC0"): (K.NODE, 1),
            ("GPU0", "NIC3"): (K.PIX, 1),
            ("GPU0", "NIC6"): (K.SYS, 1),
            ("GPU3", "NIC0"): (K.PIX, 1),
            ("GPU3", "NIC2"): (K.PIX, 1),
            ("GPU4", "NIC7"): (K.PIX, 1),
            ("GPU5", "NIC9"): (K.PIX, 1),
            ("GPU7", "NIC6"): (K.PIX, 1),
            ("NIC0", "NIC1"): (K.PIX, 1),
            ("NIC0", "NIC3"): (K.NODE, 1),
            ("NIC0", "NIC6"): (K.SYS, 1),
            ("NIC6", "NIC9"): (K.NODE, 1),
        },
        nic_names=tuple(f"mlx5_{i}" for i in range(10)),
        cpus={"GPU0": 128, "GPU7": 128},
        numa={"GPU0": 0, "GPU3": 0, "GPU4": 1, "GPU7": 1},
        notes=("NV18 between every pair of 8 GPUs",),
    ),
    # V100 hybrid cube-mesh numbered unlike the DGX-1, 18 NICs by port name; in rows GPU0 and GPU1 the
    # cells under mlx5_12 and mlx5_13 have no space between them ("NODENODE").
    "v100-x8-nv1-nv2-18nics-glued-cells.topo.txt": Facts(
        8,
        18,
        {
            ("GPU0", "GPU1"): (K.NVLINK, 1),
            ("GPU0", "GPU2"): (K.NVLINK, 2),
            ("GPU0", "GPU4"): (K.SYS, 1),
            ("GPU0", "GPU7"): (K.NVLINK, 2),
            ("GPU1", "GPU6"): (K.NVLINK, 2),
            ("GPU2", "GPU5"): (K.NVLINK, 1),
            ("GPU3", "GPU4"): (K.NVLINK, 1),
            ("GPU0", "NIC12"): (K.NODE, 1),
            ("GPU0", "NIC13"): (K.NODE, 1),
            ("GPU1", "NIC13"): (K.NODE, 1),
            ("GPU2", "NIC0"): (K.PIX, 1),
            ("GPU4", "NIC17"): (K.SYS, 1),
            ("NIC0", "NIC17"): (K.PIX, 1),
        },
        nic_names=tuple(f"mlx5_{i}" for i in range(18)),
        cpus={"GPU0": 48, "GPU4": 48},
        numa={"GPU0": 0, "GPU3": 0, "GPU4": 1, "GPU7": 1},
        notes=("row GPU0: read 'NODENODE' as NODE NODE", "row GPU1: read 'NODENODE' as NODE NODE"),
    ),
}


def _kind(topo: Topology, a: str, b: str) -> tuple[LinkKind, int] | None:
    link = topo.link(a, b)
    return (link.kind, link.count) if link else None


def test_every_real_paste_has_its_facts() -> None:
    pastes = sorted(p.name for p in REAL.glob("*.topo.txt"))
    assert pastes == sorted(FACTS)


@pytest.mark.parametrize("name", sorted(FACTS))
def test_real_paste(name: str) -> None:
    facts = FACTS[name]
    notes: list[str] = []
    topo = read_nvidia_smi_topo(REAL / name, notes)
    assert [g.id for g in topo.gpus] == [f"GPU{i}" for i in range(facts.gpus)]
    assert [n.id for n in topo.nics] == [f"NIC{i}" for i in range(facts.nics)]
    if facts.nic_names:
        assert tuple(n.name for n in topo.nics) == facts.nic_names
    for (a, b), expected in facts.links.items():
        assert _kind(topo, a, b) == expected, (a, b)
    # Every GPU pair has exactly one link: the matrix is complete for GPUs in every paste.
    gpu_links = [lk for lk in topo.links if lk.a.startswith("GPU") and lk.b.startswith("GPU")]
    assert len(gpu_links) == facts.gpus * (facts.gpus - 1) // 2
    for gpu, count in facts.cpus.items():
        cpus = topo.device(gpu).cpus
        assert (None if cpus is None else len(cpus)) == count, gpu
    for gpu, node in facts.numa.items():
        assert topo.device(gpu).numa_node == node, gpu
    assert len(notes) == len(facts.notes), notes
    for note, fragment in zip(notes, facts.notes, strict=True):
        assert fragment in note and "\n" not in note


def test_crlf_paste_reads_like_its_lf_copy(tmp_path: Path) -> None:
    raw = (REAL / "a800-x8-nv8-4nics.topo.txt").read_bytes()
    assert b"\r\n" in raw  # published with CRLF line ends
    lf = tmp_path / "lf.txt"
    lf.write_bytes(raw.replace(b"\r\n", b"\n"))
    a, b = read_nvidia_smi_topo(REAL / "a800-x8-nv8-4nics.topo.txt"), read_nvidia_smi_topo(lf)
    assert a.links == b.links and a.devices == b.devices
