"""`nvidia-smi topo -m` text: every published dump in tests/fixtures/topologies, variants, bad input."""

from __future__ import annotations

import re
from itertools import combinations
from pathlib import Path

import pytest

from collbench.errors import InputFileError
from collbench.topology.model import LinkKind, Topology
from collbench.topology.nvidia_smi import parse_nvidia_smi_topo, read_nvidia_smi_topo

SHARED = Path(__file__).resolve().parents[1] / "fixtures" / "topologies"


def _shared(name: str) -> Path:
    path = SHARED / name
    return path


def _pairs(topo: Topology) -> dict[tuple[str, str], tuple[LinkKind, int]]:
    return {(lk.a, lk.b): (lk.kind, lk.count) for lk in topo.links}


def _kind(topo: Topology, a: str, b: str) -> tuple[LinkKind, int] | None:
    link = topo.link(a, b)
    return (link.kind, link.count) if link else None


# Facts of each published dump, read by eye from the file (SOURCES.md describes the machines).
def _check_a100x4(topo: Topology) -> None:
    assert [g.id for g in topo.gpus] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    for a, b in combinations(range(4), 2):
        assert _kind(topo, f"GPU{a}", f"GPU{b}") == (LinkKind.NVLINK, 4)
    assert [(n.id, n.name) for n in topo.nics] == [(f"NIC{i}", f"mlx5_{i}") for i in range(4)]
    for gi in range(4):
        for n in range(4):
            assert _kind(topo, f"GPU{gi}", f"NIC{n}") == ((LinkKind.PXB, 1) if gi == n else (LinkKind.SYS, 1))
    for a, b in combinations(range(4), 2):
        assert _kind(topo, f"NIC{a}", f"NIC{b}") == (LinkKind.SYS, 1)
    for g in topo.gpus:
        assert g.cpus == (0,)
        assert g.numa_node is None  # NUMA affinity 0-1 is two nodes
        assert g.get("numa_affinity") == "0-1"
    assert all(n.cpus is None for n in topo.nics)


def _check_hgx_h100(topo: Topology) -> None:
    assert len(topo.gpus) == 8
    for a, b in combinations(range(8), 2):
        assert _kind(topo, f"GPU{a}", f"GPU{b}") == (LinkKind.NVSWITCH, 18)
    assert [n.id for n in topo.nics] == [f"NIC{i}" for i in range(10)]
    assert all(n.name is None for n in topo.nics)  # no NIC legend in this dump
    pix = {0: 0, 1: 1, 2: 2, 3: 5, 4: 6, 5: 7, 6: 8, 7: 9}
    for gi in range(8):
        for n in range(10):
            assert _kind(topo, f"GPU{gi}", f"NIC{n}") == ((LinkKind.PIX, 1) if pix[gi] == n else (LinkKind.SYS, 1))
    # Rows NIC3..NIC9 were cut from the published text: NIC-NIC links only where a row says so.
    assert _kind(topo, "NIC0", "NIC9") == (LinkKind.SYS, 1)
    assert _kind(topo, "NIC3", "NIC4") is None
    for g in topo.gpus:
        node = 0 if g.index < 4 else 1
        expected = [*range(0, 56), *range(112, 168)] if node == 0 else [*range(56, 112), *range(168, 224)]
        assert g.cpus == tuple(expected)
        assert g.numa_node == node
        assert g.get("gpu_numa_id") is None  # N/A


def _check_pcie8(topo: Topology) -> None:
    assert len(topo.gpus) == 8 and not topo.nics
    for a, b in combinations(range(8), 2):
        if a // 4 != b // 4:
            expected = LinkKind.SYS
        elif (a, b) in ((0, 1), (4, 5)):
            expected = LinkKind.PIX
        else:
            expected = LinkKind.PXB
        assert _kind(topo, f"GPU{a}", f"GPU{b}") == (expected, 1), (a, b)
    for g in topo.gpus:
        assert g.cpus == tuple(range(96))
        assert g.numa_node is None and g.get("numa_affinity") is None


EXPECTED = {
    "a100x4-nv4-nics.topo.txt": _check_a100x4,
    "hgx-h100x8-nv18-nics.topo.txt": _check_hgx_h100,
    "pcie8-pix-pxb.topo.txt": _check_pcie8,
}


def test_every_shared_dump_is_read_and_checked() -> None:
    dumps = sorted(p.name for p in SHARED.glob("*.topo.txt"))
    assert dumps, "no nvidia-smi dumps in the shared fixtures"
    # A new dump must come with its facts here, so that it is checked and not only parsed.
    assert set(dumps) == set(EXPECTED), f"add expectations for {set(dumps) - set(EXPECTED)}"
    for name in dumps:
        topo = read_nvidia_smi_topo(SHARED / name)
        assert topo.source == "nvidia-smi"
        EXPECTED[name](topo)
        gpus = topo.gpus
        # exactly one link per GPU pair
        assert (
            sum(1 for lk in topo.links if lk.a.startswith("GPU") and lk.b.startswith("GPU"))
            == len(gpus) * (len(gpus) - 1) // 2
        )


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_spaces_and_tabs_read_the_same(name: str) -> None:
    text = _shared(name).read_text()
    tabbed = re.sub(r" {2,}", "\t", text)
    spaced = text.replace("\t", "    ")
    a = parse_nvidia_smi_topo(text, name)
    for variant in (tabbed, spaced):
        b = parse_nvidia_smi_topo(variant, name)
        assert _pairs(a) == _pairs(b)
        assert [(d.id, d.name, d.cpus, d.numa_node) for d in a.devices] == [
            (d.id, d.name, d.cpus, d.numa_node) for d in b.devices
        ]


def test_without_legends_and_without_nic_rows() -> None:
    text = _shared("a100x4-nv4-nics.topo.txt").read_text()
    matrix = text.split("Legend:")[0]
    no_nic_rows = "\n".join(line for line in matrix.splitlines() if not line.startswith("NIC"))
    topo = parse_nvidia_smi_topo(no_nic_rows, "x")
    assert [n.name for n in topo.nics] == [None] * 4  # the legend named them; it is gone
    assert _kind(topo, "GPU2", "NIC2") == (LinkKind.PXB, 1)
    assert _kind(topo, "NIC0", "NIC1") is None
    assert _kind(topo, "GPU0", "GPU3") == (LinkKind.NVLINK, 4)


def test_legacy_nic_column_names_and_empty_affinity() -> None:
    text = (
        "\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\nGPU0\t X \tNV2\tPIX\t\nGPU1\tNV2\t X \tPHB\t0-7\nmlx5_0\tPIX\tPHB\t X \t\n"
    )
    topo = parse_nvidia_smi_topo(text, "old.txt")
    assert [(n.id, n.name) for n in topo.nics] == [("NIC0", "mlx5_0")]
    assert _kind(topo, "GPU1", "NIC0") == (LinkKind.PHB, 1)
    assert topo.device("GPU0").cpus is None
    assert topo.device("GPU1").cpus == tuple(range(8))


def test_space_separated_row_with_an_empty_affinity_column() -> None:
    text = (
        "        GPU0    GPU1    CPU Affinity    NUMA Affinity\n"
        "GPU0     X      SYS                     0\n"
        "GPU1    SYS      X      8-15            1\n"
    )
    topo = parse_nvidia_smi_topo(text, "x")
    assert topo.device("GPU0").cpus is None and topo.device("GPU0").numa_node == 0
    assert topo.device("GPU1").cpus == tuple(range(8, 16)) and topo.device("GPU1").numa_node == 1


def test_nvlink_bandwidth_defaults_are_ordered_above_pcie() -> None:
    topo = read_nvidia_smi_topo(_shared("hgx-h100x8-nv18-nics.topo.txt"))
    nv = topo.link("GPU0", "GPU1")
    pix, sys = topo.link("GPU0", "NIC0"), topo.link("GPU0", "NIC1")
    assert nv is not None and pix is not None and sys is not None
    assert nv.bandwidth_gbps == 18 * 25.0
    assert nv.bandwidth_gbps > pix.bandwidth_gbps > sys.bandwidth_gbps
    assert {lk.source for lk in topo.links} == {"default"}


GOOD = "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV1\tSYS\nGPU1\tNV1\t X \tSYS\nGPU2\tSYS\tSYS\t X \n"


@pytest.mark.parametrize(
    ("text", "where", "expected"),
    [
        ("", None, "empty"),
        ("hello\nworld\n", 1, "no header line"),
        (GOOD.replace("GPU1\tNV1\t X \tSYS", "GPU1\tNV1\t X"), 3, "ragged row GPU1"),
        (GOOD.replace("GPU2\tSYS\tSYS\t X \n", ""), 1, "column GPU2 has no row"),
        (GOOD + "GPU3\tSYS\tSYS\tSYS\n", 5, "row GPU3 has no column"),
        (GOOD.replace("GPU1\tNV1\t X \tSYS", "GPU1\tNV1\t X \tQPI"), 3, "unknown cell 'QPI'"),
        (GOOD.replace("GPU2\tSYS\tSYS\t X ", "GPU2\tSYS\tPHB\t X "), 4, "not symmetric"),
        (GOOD.replace("GPU0\t X \tNV1", "GPU0\tPIX\tNV1"), 2, "expected X on the diagonal"),
        (GOOD.replace("GPU1\tNV1\t X \tSYS", "GPU1\tNV1\t X \tX"), 3, "X off the diagonal"),
        (GOOD + "GPU1\tNV1\t X \tSYS\n", 5, "appears twice"),
    ],
)
def test_bad_input_names_file_line_and_expectation(text: str, where: int | None, expected: str) -> None:
    with pytest.raises(InputFileError) as info:
        parse_nvidia_smi_topo(text, "dump.txt")
    message = str(info.value)
    assert message.startswith(f"dump.txt:{where}:" if where else "dump.txt:")
    assert expected in message
    assert "\n" not in message


def test_ragged_space_separated_row() -> None:
    text = "        GPU0    GPU1    CPU Affinity\nGPU0     X      NV1     0-3\nGPU1    NV1     0-3\n"
    with pytest.raises(InputFileError, match=r"x.txt:3: ragged row GPU1: 1 matrix cells, expected 2"):
        parse_nvidia_smi_topo(text, "x.txt")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="no such file"):
        read_nvidia_smi_topo(tmp_path / "nope.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    with pytest.raises(InputFileError, match=r"empty.txt: the input is empty"):
        read_nvidia_smi_topo(empty)
