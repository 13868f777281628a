"""Cells a paste glued together ("NODENODE"): split where nothing else gives the row its header's width.

Two published pastes lose the padding between two cells where a two-digit NIC column starts: the
V100 dump in tests/fixtures/real (rows GPU0 and GPU1 under mlx5_12/mlx5_13) and an H20 paste with
36 NICs in an sglang issue ("NODENODE", "SYSSYS", "NODEPIX" under NIC12/NIC13 and NIC34/NIC35).
"""

from __future__ import annotations

import pytest

from collbench.errors import InputFileError
from collbench.topology.model import LinkKind
from collbench.topology.nvidia_smi import parse_nvidia_smi_topo

HEADER = "        GPU0    GPU1    NIC0    NIC1    CPU Affinity    NUMA Affinity\n"
NIC_ROWS = "NIC0    SYS     NODE     X      PIX\nNIC1    SYS     PIX     PIX      X\n"


def test_glued_cells_are_split_and_said() -> None:
    text = (
        HEADER
        + "GPU0     X      SYS     SYSSYS          0-31    0\n"
        + "GPU1    SYS      X      NODEPIX         32-63   1\n"
        + NIC_ROWS
    )
    notes: list[str] = []
    topo = parse_nvidia_smi_topo(text, "p.txt", notes)
    assert topo.link("GPU0", "NIC1") is not None and topo.link("GPU0", "NIC1").kind == LinkKind.SYS
    assert topo.link("GPU1", "NIC0").kind == LinkKind.NODE and topo.link("GPU1", "NIC1").kind == LinkKind.PIX
    assert topo.device("GPU1").numa_node == 1 and topo.device("GPU1").cpus == tuple(range(32, 64))
    assert notes == [
        "p.txt:2: row GPU0: read 'SYSSYS' as SYS SYS (cells with no space between them)",
        "p.txt:3: row GPU1: read 'NODEPIX' as NODE PIX (cells with no space between them)",
    ]


def test_glued_nvlink_cells() -> None:
    text = (
        "        GPU0    GPU1    GPU2    CPU Affinity\n"
        "GPU0     X      NV4NV4  0-7\n"
        "GPU1    NV4      X      SYS     0-7\n"
        "GPU2    NV4     SYS      X      0-7\n"
    )
    notes: list[str] = []
    topo = parse_nvidia_smi_topo(text, "p.txt", notes)
    assert topo.link("GPU0", "GPU2").kind == LinkKind.NVLINK and topo.link("GPU0", "GPU2").count == 4
    assert len(notes) == 1 and "'NV4NV4' as NV4 NV4" in notes[0]


def test_a_row_with_all_its_cells_is_left_alone() -> None:
    # A well-formed row is never re-read, whatever its words look like.
    notes: list[str] = []
    parse_nvidia_smi_topo(
        HEADER
        + "GPU0     X      SYS     SYS     SYS     0-31    0\n"
        + "GPU1    SYS      X      NODE    PIX     0-31    0\n"
        + NIC_ROWS,
        "p.txt",
        notes,
    )
    assert notes == []


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        # Split, this row would have a cell too many: it is not read that way and stays short.
        ("GPU1    SYS      X      NODEPIXPIX      0-31    0", "ragged row GPU1: 3 matrix cells, expected 4"),
        # A word that is not made of whole cell codes is never split.
        ("GPU1    SYS      X      NODEPIK         0-31    0", "ragged row GPU1: 3 matrix cells, expected 4"),
    ],
)
def test_glued_words_that_do_not_fit_stay_errors(row: str, expected: str) -> None:
    text = HEADER + "GPU0     X      SYS     SYS     SYS     0-31    0\n" + row + "\n" + NIC_ROWS
    with pytest.raises(InputFileError, match=expected):
        parse_nvidia_smi_topo(text, "p.txt")
