"""Large `nvidia-smi topo -m` matrices: bounded work, one clear line past the bound.

Every pair of devices gets a link, so reading is quadratic in the device count by nature; what must not
happen is work beyond that (a summary that scans every link per GPU is cubic) or hours spent on a
matrix no single machine prints.
"""

from __future__ import annotations

import pytest
from large_inputs import smi_matrix_of

from collbench.cli.render.topology import topology_summary
from collbench.errors import InputFileError
from collbench.topology import nvidia_smi
from collbench.topology.model import MAX_MACHINE_DEVICES, LinkKind
from collbench.topology.nvidia_smi import parse_nvidia_smi_topo


def test_a_matrix_of_2049_gpus_is_refused_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused at its header, before any row is read: how long that takes is
    benchmarks/bench_input_bounds.py's to say."""

    def read_row(self: object, line: str, lineno: int) -> None:
        raise AssertionError(f"line {lineno} was read after a header naming 2049 devices")

    monkeypatch.setattr(nvidia_smi._Parser, "row", read_row)
    n = 2049
    row = "\t".join(["SYS"] * n)
    text = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\n"
    text += "".join(f"GPU{i}\t{row[: 4 * i]}X{row[4 * i + 3 :]}\t0-63\n" for i in range(n))
    with pytest.raises(InputFileError, match=rf"names {n} GPUs and NICs; one machine's matrix holds at most"):
        parse_nvidia_smi_topo(text, "big.txt")


def test_the_largest_matrix_allowed_reads_and_summarises() -> None:
    text = smi_matrix_of(MAX_MACHINE_DEVICES - 16, 16)
    topo = parse_nvidia_smi_topo(text, "largest.txt")
    lines = topology_summary(topo)
    assert (len(topo.gpus), len(topo.nics)) == (MAX_MACHINE_DEVICES - 16, 16)
    assert topo.link("GPU0", "GPU7").kind == LinkKind.NVLINK and topo.link("GPU0", "GPU8").kind == LinkKind.SYS
    assert "NVLink: version unknown, 28 links per GPU" in lines


def test_more_than_sixteen_nics_are_read_and_the_summary_says_the_matrix_shows_sixteen() -> None:
    topo = parse_nvidia_smi_topo(smi_matrix_of(8, 20), "nics.txt")
    assert len(topo.nics) == 20 and topo.link("GPU0", "NIC19") is not None
    assert "(the matrix shows 16 of 20 NICs; --json lists all)" in topology_summary(topo)
