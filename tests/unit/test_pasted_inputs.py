"""What pasting does to the two texts users bring: whitespace, line ends, BOM, ANSI, launcher prefixes.

Each variant is made from a published paste in tests/fixtures/real and must read exactly like it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from collbench.errors import InputFileError
from collbench.importers.log_lines import nccl_line, plain_line
from collbench.importers.nccl_tests import read_nccl_tests
from collbench.results.row import NODES_UNKNOWN
from collbench.topology.cpu_list import MAX_CPU_LIST_ENTRIES, parse_cpu_list
from collbench.topology.model import Topology
from collbench.topology.nvidia_smi import parse_nvidia_smi_topo

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
A10 = (REAL / "a10-x4-sys-2nics.topo.txt").read_text()
LOG = (REAL / "all_reduce_perf-2080ti-x2-autodl.log").read_text()


def _same(a: Topology, b: Topology) -> None:
    assert a.links == b.links
    assert [(d.id, d.name, d.cpus, d.numa_node) for d in a.devices] == [
        (d.id, d.name, d.cpus, d.numa_node) for d in b.devices
    ]


def _tabs_then_spaces(text: str) -> str:
    lines = text.splitlines()
    return "\n".join(["\t\t" + lines[0].strip(), *lines[1:]]) + "\n"


@pytest.mark.parametrize(
    "variant",
    [
        pytest.param(lambda t: "\ufeff" + t, id="bom"),
        pytest.param(lambda t: t.replace("\n", "\r\n"), id="crlf"),
        pytest.param(lambda t: "".join("    " + line for line in t.splitlines(keepends=True)), id="indented"),
        pytest.param(_tabs_then_spaces, id="header-tabs-then-spaces"),
        pytest.param(lambda t: re.sub(r" {2,}", "\t\t\t", t), id="runs-of-tabs"),
        pytest.param(lambda t: re.sub(r" {2,}", lambda m: "\t " * (len(m.group()) // 4 + 1), t), id="mixed"),
        pytest.param(lambda t: t.replace(" X ", "\x1b[1m X \x1b[0m"), id="ansi"),
        pytest.param(lambda t: t.replace("\nGPU", "\n\nGPU"), id="blank-lines-between-rows"),
        pytest.param(lambda t: "$ nvidia-smi topo -m\n" + t, id="prompt-line-above"),
        pytest.param(
            lambda t: t.replace("Legend:", "Legend:\n  (wrapped legend text that goes on\n   and on)"), id="wrapped"
        ),
    ],
)
def test_topology_paste_variants_read_the_same(variant: object) -> None:
    assert callable(variant)
    _same(parse_nvidia_smi_topo(A10, "a10"), parse_nvidia_smi_topo(variant(A10), "a10"))


def test_old_soc_code_and_legacy_nic_names() -> None:
    text = (
        "        GPU0    GPU1    mlx4_0  CPU Affinity\n"
        "GPU0     X      SOC     PHB     0-9,20-29\n"
        "GPU1    SOC      X      SOC     10-19,30-39\n"
        "mlx4_0  PHB     SOC      X      \n"
    )
    topo = parse_nvidia_smi_topo(text, "old")
    assert topo.link("GPU0", "GPU1") is not None and topo.link("GPU0", "GPU1").kind.value == "sys"  # type: ignore[union-attr]
    assert [(n.id, n.name) for n in topo.nics] == [("NIC0", "mlx4_0")]


def test_absurd_cpu_range_is_a_note_not_gigabytes() -> None:
    notes: list[str] = []
    text = "        GPU0    GPU1    CPU Affinity\nGPU0     X      NV1     0-100000000\nGPU1    NV1      X      0-3\n"
    topo = parse_nvidia_smi_topo(text, "p", notes)
    assert topo.device("GPU0").cpus is None and topo.device("GPU1").cpus == (0, 1, 2, 3)
    assert len(notes) == 1 and "names more than" in notes[0] and notes[0].startswith("p:2:")
    with pytest.raises(ValueError, match="names more than"):
        parse_cpu_list(f"0-{MAX_CPU_LIST_ENTRIES}")
    assert len(parse_cpu_list(f"0-{MAX_CPU_LIST_ENTRIES - 1}") or ()) == MAX_CPU_LIST_ENTRIES


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("just some words\nand more\n", "no header line starting with GPU0"),
        ("        GPU0    GPU1    CPU Affinity\n", "column GPU0 has no row"),
        ("\ufeff\x1b[0m\r\n   \t  \r\n", "the input is empty"),
        # nvidia-smi's own failures, pasted or redirected where its matrix was expected (they said "no
        # header line starting with GPU0"): its words as it prints them (nvidia-smi, driver down or
        # mismatched, no GPU).
        (
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the"
            " latest NVIDIA driver is installed and running.\n",
            "paste.txt:1: this is nvidia-smi's failure (\"NVIDIA-SMI has failed because it couldn't communicate"
            ' with the NVIDIA driver"), not the matrix of `nvidia-smi topo -m`',
        ),
        ("No devices were found\n", "this is nvidia-smi's failure ('No devices were found')"),
        (
            "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 535.183\n",
            "this is nvidia-smi's failure ('Failed to initialize NVML: Driver/library version mismatch')",
        ),
    ],
)
def test_non_empty_paste_without_a_device_is_one_error(text: str, expected: str) -> None:
    with pytest.raises(InputFileError) as info:
        parse_nvidia_smi_topo(text, "paste.txt")
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_launcher_prefixes_come_off() -> None:
    assert plain_line("[1,12]<stdout>:#  Rank  0 Group  0 Pid") == "#  Rank  0 Group  0 Pid"
    assert plain_line(" 0: # nThread 1 nGpus 1") == "# nThread 1 nGpus 1"
    assert plain_line("12:     8     2   float") == "8     2   float"
    assert plain_line("2024-07-19T05:01:02.123456789Z [1,0]<stderr>:# Avg") == "# Avg"
    assert plain_line("[2024-07-19 05:01:02,123] 3: x") == "x"
    assert plain_line("     8    2  float  sum  -1[1,0]<stdout>:   85.14") == "8    2  float  sum  -1   85.14"
    info = nccl_line("node7:1234:1240 [3] NCCL INFO comm 0x1 rank 11 nRanks 16 nNodes 2 localRanks 8")
    assert info is not None and (info.host, info.rank, info.nranks, info.nnodes) == ("node7", 11, 16, 2)
    assert nccl_line("node7:1234:1240 [3] NCCL WARN NET/IB : Got async event") is not None
    assert nccl_line("#  Rank  0 Group  0 Pid") is None


@pytest.mark.parametrize(
    "wrap",
    [
        pytest.param(lambda i, line: f"{i % 2}: {line}", id="srun-label"),
        pytest.param(lambda i, line: f"2024-05-01T10:00:{i % 60:02d}.5Z {line}", id="timestamps"),
        pytest.param(lambda i, line: f"[1,0]<stdout>:{line}", id="mpirun-tag-output"),
        pytest.param(lambda i, line: f"    {line}", id="indented"),
    ],
)
def test_log_prefix_variants_read_the_same(tmp_path: Path, wrap: object) -> None:
    assert callable(wrap)
    lines = LOG.splitlines()
    # NCCL's own lines between the header and the table, as NCCL_DEBUG=INFO leaves them.
    noisy = [*lines[:6], "autodl:31706:31706 [0] NCCL INFO NCCL version 2.21.5+cuda12.4", *lines[6:]]
    noisy.insert(8, "autodl:31706:31720 [1] NCCL WARN Cuda failure 'peer access is not supported'")
    path = tmp_path / "wrapped.log"
    path.write_text("\n".join(wrap(i, line) for i, line in enumerate(noisy)) + "\n")
    plain = read_nccl_tests(REAL / "all_reduce_perf-2080ti-x2-autodl.log")
    wrapped = read_nccl_tests(path)
    keep = ("op", "size_bytes", "time_us", "in_place", "world_size", "nodes", "wrong", "host")
    assert [[getattr(r, k) for k in keep] for r in wrapped] == [[getattr(r, k) for k in keep] for r in plain]
    assert wrapped[0].backend_version == "2.21.5"


@pytest.mark.parametrize("bad", ["nan", "inf", "-12.25", "-inf"])
def test_a_bad_time_names_file_and_line(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "bad.log"
    path.write_text(LOG.replace("12.25", bad, 1))
    with pytest.raises(InputFileError) as info:
        read_nccl_tests(path)
    message = str(info.value)
    assert message.startswith(f"{path}:11:") and "not a time" in message and "\n" not in message


def test_partial_rank_lines_leave_nodes_unknown(tmp_path: Path) -> None:
    # A paste that kept one '# Rank' line of a 1440-rank run: 1440 ranks, node count not guessed.
    text = LOG.replace(
        "#  Rank  0 Group  0 Pid  31706 on autodl-container-xxxxx device  0",
        "#  Rank 1439 Group  0 Pid  1 on n180 device  7",
    )
    text = "\n".join(line for line in text.splitlines() if "Rank  1 " not in line) + "\n"
    path = tmp_path / "partial.log"
    path.write_text(text)
    notes: list[str] = []
    rows = read_nccl_tests(path, notes=notes)
    assert rows[0].world_size == 1440 and rows[0].nodes == NODES_UNKNOWN
    assert notes == [
        f"{path}: the log names the host of 1 of 1440 ranks and prints no node count; node count left unknown (0)"
    ]


def test_nnodes_from_nccl_info_lines(tmp_path: Path) -> None:
    text = LOG.replace(
        "#\n# Using devices",
        "#\nh1:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 2 localRanks 1\n# Using devices",
        1,
    )
    path = tmp_path / "nnodes.log"
    path.write_text(text)
    assert read_nccl_tests(path)[0].nodes == 2


def test_ranks_option_for_a_log_that_does_not_say(tmp_path: Path) -> None:
    # Broadcast's busbw equals its algbw whatever the ranks: nothing in this table says how many ran.
    lines = (REAL / "broadcast_perf-2080ti-x2-autodl.log").read_text().splitlines()
    path = tmp_path / "bcast.log"
    # Nor the command line (one process, -g2) or the nThread line (nGpus 2), which would say 2.
    keep = [line for line in lines if "Rank" not in line and "broadcast_perf -b" not in line and "nGpus" not in line]
    path.write_text("\n".join(keep) + "\n")
    with pytest.raises(InputFileError, match="cannot tell the number of ranks; pass --ranks N"):
        read_nccl_tests(path)
    rows = read_nccl_tests(path, ranks=4)
    assert rows[0].world_size == 4 and rows[0].op == "broadcast" and rows[0].nodes == NODES_UNKNOWN
    with pytest.raises(InputFileError, match="the log says 2 ranks, not 4"):
        read_nccl_tests(REAL / "broadcast_perf-2080ti-x2-autodl.log", ranks=4)


def test_inferred_ops_for_each_column_shape(tmp_path: Path) -> None:
    def unnamed(name: str) -> Path:
        text = (REAL / name).read_text()
        path = tmp_path / name
        path.write_text("\n".join(line for line in text.splitlines() if "_perf" not in line) + "\n")
        return path

    for name, op in [
        ("all_gather_perf-2080ti-x2-autodl.log", "all-gather"),
        ("broadcast_perf-2080ti-x2-autodl.log", "broadcast"),
        ("reduce_perf-2080ti-x2-autodl.log", "reduce"),
    ]:
        notes: list[str] = []
        assert {r.op for r in read_nccl_tests(unnamed(name), notes=notes)} == {op}
        assert len(notes) == 1 and f"took {op} from the columns" in notes[0]


def test_header_names_run_together_are_split_and_said() -> None:
    # A published DGX-1 paste (tests/fixtures/real/p100-dgx1-x8-nv1-soc-4nics-glued-header.topo.txt)
    # lost the separators between its header's GPU names: "GPU0GPU1...GPU7mlx5_0". GPU names can be
    # told apart without them (each starts with GPU), so the header reads, with one line saying so.
    glued = re.sub(r"GPU0\s+GPU1\s+GPU2\s+GPU3\s+NIC0", "GPU0GPU1GPU2GPU3NIC0", A10, count=1)
    assert glued != A10
    notes: list[str] = []
    _same(parse_nvidia_smi_topo(A10, "a10"), parse_nvidia_smi_topo(glued, "a10", notes))
    assert len(notes) == 1 and "'GPU0GPU1GPU2GPU3NIC0' as GPU0, GPU1, GPU2, GPU3, NIC0" in notes[0]


def test_one_gpu_name_with_many_digits_is_not_split() -> None:
    header = "        " + "".join(f"GPU{i:<6}" for i in range(12)) + "CPU Affinity\n"
    rows = "".join(
        f"GPU{i:<5}" + "".join(" X     " if i == j else "NV12   " for j in range(12)) + "0-7\n" for i in range(12)
    )
    notes: list[str] = []
    topo = parse_nvidia_smi_topo(header + rows, "t", notes)
    assert [g.id for g in topo.gpus] == [f"GPU{i}" for i in range(12)]
    assert not any("run together" in n for n in notes)
