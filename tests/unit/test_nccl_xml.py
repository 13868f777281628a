"""NCCL topology XML: the published dump in tests/fixtures/topologies, and XML that is not one."""

from __future__ import annotations

from pathlib import Path

import pytest
from large_inputs import nccl_xml_of

from collbench.cli.render.topology import topology_summary
from collbench.errors import InputFileError
from collbench.topology import nccl_xml
from collbench.topology.model import MAX_MACHINE_DEVICES, LinkKind
from collbench.topology.nccl_xml import affinity_to_cpus, parse_nccl_xml, read_nccl_xml

SHARED = Path(__file__).resolve().parents[1] / "fixtures" / "topologies"
DUMP = SHARED / "nccl-topo-2xa100-nvswitch-cx6.xml"


@pytest.fixture()
def dump() -> Path:
    return DUMP


def test_two_a100_on_nvswitch_with_two_nics(dump: Path) -> None:
    topo = read_nccl_xml(dump)
    assert topo.source == "nccl-xml"
    assert [(g.id, g.bus_id) for g in topo.gpus] == [("GPU0", "0000:13:00.0"), ("GPU1", "0000:19:00.0")]
    g0 = topo.device("GPU0")
    assert g0.get("sm") == "80" and g0.get("nccl_rank") == "0"
    assert g0.get("nvswitch_links") == "12" and g0.get("nvlink_generation") == "3"
    assert g0.get("pcie_gen") == "4" and g0.get("pcie_width") == "16"
    # 6 switches x 2 links: every pair gets the GPU's 12 NVLink 3 links, 25 GB/s each.
    link = topo.link("GPU0", "GPU1")
    assert link is not None
    assert (link.kind, link.count, link.bandwidth_gbps) == (LinkKind.NVSWITCH, 12, 300.0)
    assert [(n.id, n.name, n.bus_id, n.get("speed_gbps")) for n in topo.nics] == [
        ("NIC0", "mlx5_bond_0", "0000:06:00.0", "25"),  # 200000 Mb/s
        ("NIC1", "mlx5_bond_1", "0000:1a:00.0", "25"),
    ]
    cpus = (*range(0, 32), *range(64, 96))  # affinity 00000000,ffffffff,00000000,ffffffff
    for d in topo.devices:
        assert d.numa_node == 0 and d.cpus == cpus


def test_pcie_levels_from_the_tree(dump: Path) -> None:
    topo = read_nccl_xml(dump)

    def kind(a: str, b: str) -> LinkKind:
        link = topo.link(a, b)
        assert link is not None
        return link.kind

    # NIC0 hangs off the CPU on its own root port: reaching it crosses the host bridge.
    assert kind("GPU0", "NIC0") == LinkKind.PHB
    assert kind("GPU1", "NIC0") == LinkKind.PHB
    # NIC1 shares the switch 0000:15 with GPU1 (one more bridge 0000:17 above GPU1), and 0000:0c with GPU0.
    assert kind("GPU1", "NIC1") == LinkKind.PXB
    assert kind("GPU0", "NIC1") == LinkKind.PXB
    pxb = topo.link("GPU0", "NIC1")
    assert pxb is not None and pxb.bandwidth_gbps == pytest.approx(1.97 * 16 * 0.9)


SIMPLE = """<system version="1">
  <cpu numaid="0" affinity="0000000f">
    <pci busid="0000:10:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:11:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="90" rank="0"><nvlink target="0000:21:00.0" count="4" tclass="0x030200"/></gpu>
      </pci>
      <pci busid="0000:12:00.0" class="0x020000" link_speed="32.0 GT/s PCIe" link_width="16">
        <nic><net name="mlx5_0" dev="0" speed="400000"/></nic>
      </pci>
    </pci>
  </cpu>
  <cpu numaid="1" affinity="000000f0">
    <pci busid="0000:21:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="1" sm="90" rank="1"><nvlink target="0000:11:00.0" count="4" tclass="0x030200"/></gpu>
    </pci>
    <pci busid="0000:22:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="2" sm="90" rank="2"/>
    </pci>
  </cpu>
</system>
"""


def test_direct_nvlink_pix_and_sys() -> None:
    topo = parse_nccl_xml(SIMPLE, "simple.xml")
    nv = topo.link("GPU0", "GPU1")
    assert nv is not None and (nv.kind, nv.count, nv.bandwidth_gbps) == (LinkKind.NVLINK, 4, 100.0)
    pix = topo.link("GPU0", "NIC0")
    assert pix is not None and pix.kind == LinkKind.PIX
    assert pix.bandwidth_gbps == pytest.approx(3.94 * 16)
    sys = topo.link("GPU0", "GPU2")
    assert sys is not None and sys.kind == LinkKind.SYS
    phb = topo.link("GPU1", "GPU2")
    assert phb is not None and phb.kind == LinkKind.PHB
    assert topo.device("GPU2").cpus == (4, 5, 6, 7) and topo.device("GPU2").numa_node == 1
    assert topo.device("NIC0").get("speed_gbps") == "50"


def test_affinity_masks() -> None:
    assert affinity_to_cpus("00000001,00000003") == (0, 1, 32)
    assert affinity_to_cpus("") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "the file is empty"),
        ("<system><cpu>", "x.xml:1: not XML"),
        ("<graphs version='1'/>", 'element <graphs version="1">: the root element is not <system>'),
        ('<system version="1"><cpu numaid="0"/></system>', "holds no <gpu>"),
        ('<system><cpu><gpu dev="0"/></cpu></system>', 'element <gpu dev="0">: is not inside a <pci'),
        ('<system><cpu><pci busid="0000:01:00.0"><gpu dev="x"/></pci></cpu></system>', "dev='x' is not a number"),
        ('<system><cpu affinity="zz"/></system>', "affinity is not a hex CPU mask"),
    ],
)
def test_not_an_nccl_topology(text: str, expected: str) -> None:
    with pytest.raises(InputFileError) as info:
        parse_nccl_xml(text, "x.xml")
    assert str(info.value).startswith("x.xml")
    assert expected in str(info.value)


def test_a_lone_class_only_gpu_is_said_in_the_singular_and_no_nic_is_named() -> None:
    text = (
        '<system version="1"><cpu numaid="0" affinity="000000ff">'
        '<pci busid="0000:11:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16"/>'
        "</cpu></system>"
    )
    notes: list[str] = []
    topo = parse_nccl_xml(text, "one.xml", notes)
    assert [g.id for g in topo.gpus] == ["GPU0"] and not topo.nics
    assert notes == [
        "one.xml: 1 GPU named only by PCI class and bus id (no <gpu>/<nic>, as cloud images ship"
        " NCCL_TOPO_FILE): numbered in bus-id order"
    ]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="no such file"):
        read_nccl_xml(tmp_path / "none.xml")


def test_an_xml_of_thousands_of_gpus_is_refused_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused once its devices are counted, before any per-pair work (numbering, links): how long that
    takes is benchmarks/bench_input_bounds.py's to say."""

    def per_pair_work(self: object) -> None:
        raise AssertionError("the refusal came after the per-device work began")

    monkeypatch.setattr(nccl_xml._Reader, "_number_by_class", per_pair_work)
    text = nccl_xml_of(5000)
    with pytest.raises(InputFileError, match=r"names 5000 GPUs and 0 NICs; one machine's topology holds at most"):
        parse_nccl_xml(text, "many.xml")


def test_the_largest_xml_allowed_reads_and_summarises() -> None:
    text = nccl_xml_of(MAX_MACHINE_DEVICES - 16, 16)
    topo = parse_nccl_xml(text, "largest.xml")
    lines = topology_summary(topo)
    assert (len(topo.gpus), len(topo.nics)) == (MAX_MACHINE_DEVICES - 16, 16)
    assert topo.link("GPU0", "GPU239").kind == LinkKind.NVSWITCH
    assert any("18 links per GPU through NVSwitch" in line for line in lines)
