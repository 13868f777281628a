"""Published NCCL topology files (tests/fixtures/real/*.topo.xml), read and checked against their facts.

Cloud images ship these for NCCL_TOPO_FILE: every GPU and NIC is a ``<pci busid class>`` leaf, with no
``<gpu>``, ``<nic>`` or ``<nvlink>`` element (NCCL fills those in from the driver). The facts below were
read by eye from each file; tests/fixtures/real/SOURCES.md says where each was published.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.errors import InputFileError
from collbench.topology.model import LinkKind
from collbench.topology.nccl_xml import read_nccl_xml

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
K = LinkKind

# file -> (GPUs, NICs, {pair: kind}, {GPU: bus id}, {device: NUMA node}, {device: CPU count})
FACTS = {
    "azure-ndv4-a100-x8-8ib-class-only.topo.xml": (
        8,
        8,
        {
            ("GPU0", "GPU1"): K.PIX,
            ("GPU2", "GPU3"): K.PIX,
            ("GPU0", "GPU2"): K.SYS,
            ("GPU6", "GPU7"): K.PIX,
            ("GPU0", "NIC0"): K.PIX,
            ("GPU0", "NIC1"): K.PIX,
            ("GPU0", "NIC2"): K.SYS,
            ("GPU7", "NIC7"): K.PIX,
        },
        {"GPU0": "0001:00:00.0", "GPU4": "000b:00:00.0", "GPU7": "000e:00:00.0"},
        {"GPU0": 1, "GPU2": 0, "GPU4": 3, "GPU6": 2, "NIC0": 1, "NIC2": 0, "NIC7": 2},
        {"GPU0": 24, "GPU2": 24, "GPU6": 24},
    ),
    "azure-ndv5-h100-x8-8ib-class-only.topo.xml": (
        8,
        8,
        {
            ("GPU0", "GPU1"): K.PHB,
            ("GPU0", "GPU3"): K.PHB,
            ("GPU0", "GPU4"): K.SYS,
            ("GPU0", "NIC0"): K.PIX,
            ("GPU0", "NIC1"): K.PHB,
            ("GPU3", "NIC3"): K.PIX,
            ("GPU7", "NIC7"): K.PIX,
            ("GPU7", "NIC0"): K.SYS,
        },
        {"GPU3": "0008:00:00.0", "GPU4": "0009:00:00.0"},
        {"GPU0": 0, "GPU4": 1, "NIC4": 1},
        {"GPU0": 48, "GPU7": 48},
    ),
    "aws-p4d-a100-x8-4efa-class-only-comments.topo.xml": (
        8,
        4,
        {
            ("GPU0", "GPU1"): K.PIX,
            ("GPU0", "GPU2"): K.PHB,
            ("GPU0", "GPU4"): K.SYS,
            ("GPU0", "NIC0"): K.PIX,
            ("GPU2", "NIC0"): K.PHB,
            ("GPU7", "NIC3"): K.PIX,
            ("GPU7", "NIC0"): K.SYS,
        },
        {"GPU0": "0000:10:1c.0", "GPU1": "0000:10:1d.0", "GPU7": "0000:a0:1d.0"},
        {"GPU0": 0, "GPU4": 1, "NIC3": 1},
        {"GPU0": 48, "GPU7": 48},
    ),
    "azure-ndv2-v100-x8-1ib-class-only.topo.xml": (
        8,
        1,
        {("GPU0", "GPU1"): K.PHB, ("GPU3", "GPU4"): K.SYS, ("GPU0", "NIC0"): K.PHB, ("GPU4", "NIC0"): K.SYS},
        {"GPU0": "0001:00:00.0", "GPU7": "0008:00:00.0"},
        {"GPU0": 0, "GPU4": 1, "NIC0": 0},
        {"GPU0": 20, "GPU4": 20},
    ),
}


@pytest.mark.parametrize("name", sorted(FACTS))
def test_cloud_topology_files_read_by_pci_class(name: str) -> None:
    gpus, nics, links, bus_ids, numa, cpus = FACTS[name]
    notes: list[str] = []
    topo = read_nccl_xml(REAL / name, notes)
    assert (len(topo.gpus), len(topo.nics)) == (gpus, nics)
    assert [g.id for g in topo.gpus] == [f"GPU{i}" for i in range(gpus)]
    for (a, b), kind in links.items():
        link = topo.link(a, b)
        assert link is not None and link.kind == kind, (a, b, link)
    # Every GPU pair has a PCIe level: the file says nothing of NVLink.
    assert not any(lk.kind.is_nvlink for lk in topo.links)
    assert len(topo.links) == gpus * (gpus - 1) // 2 + gpus * nics
    for dev, bus in bus_ids.items():
        assert topo.device(dev).bus_id == bus
    for dev, node in numa.items():
        assert topo.device(dev).numa_node == node
    for dev, count in cpus.items():
        assert len(topo.device(dev).cpus or ()) == count
    assert len(notes) == 2
    # The count said in English: "8 GPUs and 1 NIC", never "GPU(s)".
    nic_words = f"{nics} NIC" if nics == 1 else f"{nics} NICs"
    assert f": {gpus} GPUs and {nic_words} named only by PCI class" in notes[0]
    assert "no <nvlink>" in notes[1]


def test_pcie_generation_of_class_only_devices() -> None:
    topo = read_nccl_xml(REAL / "azure-ndv5-h100-x8-8ib-class-only.topo.xml")
    assert (topo.device("GPU0").get("pcie_gen"), topo.device("GPU0").get("pcie_width")) == ("5", "16")


def test_a_file_that_leaves_the_gpus_to_nccl_is_refused_saying_so() -> None:
    # AWS's p5 file names only PCIe switches and unclassed endpoints; NCCL finds the GPUs at run time.
    with pytest.raises(InputFileError, match=r"leaves the GPUs to NCCL's run-time detection"):
        read_nccl_xml(REAL / "aws-p5-no-gpus-nics-only.topo.xml")


def test_pcie_generation_of_p4d_devices() -> None:
    topo = read_nccl_xml(REAL / "aws-p4d-a100-x8-4efa-class-only-comments.topo.xml")
    assert (topo.device("NIC0").get("pcie_gen"), topo.device("NIC0").get("pcie_width")) == ("3", "16")
