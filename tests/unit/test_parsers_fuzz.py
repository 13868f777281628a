"""Both text parsers on random pastes: a topology or a result list, or InputFileError; nothing else.

The texts are built from the pieces real pastes are made of (device names, cell codes, affinity lists,
whitespace of every kind, launcher tags, NCCL lines, numbers), so most of them get deep into the
parsers. Hypothesis' deadline bounds each example's time: a range like 0-100000000 must not expand.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collbench.errors import InputFileError
from collbench.importers.nccl_tests import read_nccl_tests
from collbench.topology.model import Topology
from collbench.topology.nvidia_smi import parse_nvidia_smi_topo

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"

_TOPO_WORDS = st.sampled_from(
    [
        "GPU0", "GPU1", "GPU2", "NIC0", "NIC1", "mlx5_0", "X", " X ", "NV1", "NV12", "NV18", "SYS", "SOC",
        "NODE", "PHB", "PXB", "PIX", "CPU", "Affinity", "NUMA", "ID", "N/A", "0-11", "0-100000000", "-31",
        "0", "1", "Legend:", "NIC0:", "\ufeff", "\x1b[1m", "???", "GPU",
    ]
)  # fmt: skip
_SPACE = st.sampled_from([" ", "  ", "\t", "\t\t", "    ", "\n", "\r\n", "\n\n"])


def _paste(words: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.lists(st.tuples(words, _SPACE), max_size=120).map(lambda pairs: "".join(w + s for w, s in pairs))


def _mutated_real(name: str) -> st.SearchStrategy[str]:
    text = (REAL / name).read_text(encoding="utf-8")
    lines = text.splitlines()
    return st.lists(st.integers(0, len(lines) - 1), max_size=6).flatmap(
        lambda drop: st.sampled_from(["", " ", "\t", "X", "NV4", "nan", "-1", "[1,0]<stdout>:"]).map(
            lambda junk: "\n".join(junk + line if i in drop else line for i, line in enumerate(lines))
        )
    )


@settings(max_examples=150, deadline=2000)
@given(st.one_of(_paste(_TOPO_WORDS), _mutated_real("a10-x4-sys-2nics.topo.txt"), st.text(max_size=300)))
def test_nvidia_smi_parser_never_raises_anything_else(text: str) -> None:
    notes: list[str] = []
    try:
        topo = parse_nvidia_smi_topo(text, "fuzz.txt", notes)
    except InputFileError as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(topo, Topology) and topo.gpus
    assert all("\n" not in note for note in notes)


_LOG_WORDS = st.sampled_from(
    [
        "#", "# nThread 1 nGpus 1 iters: 20", "#  Rank  0 Group  0 Pid 1 on h device  0 [0x1] GPU", "size",
        "redop", "root", "8", "2", "float", "half", "sum", "none", "-1", "0", "12.5", "N/A", "nan", "1e-07",
        "[1,0]<stdout>:", "0:", "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2", "all_reduce_perf", "alltoall_perf",
        "2024-01-01T00:00:00Z",
    ]
)  # fmt: skip


@settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_paste(_LOG_WORDS), _mutated_real("all_reduce_perf-h100-2node-mpirun-gcp.log")))
def test_nccl_tests_reader_never_raises_anything_else(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.log"
        path.write_text(text, encoding="utf-8")
        notes: list[str] = []
        try:
            rows = read_nccl_tests(path, notes=notes)
        except InputFileError as exc:
            assert "\n" not in str(exc)
            return
    assert rows
    for row in rows:
        assert row.world_size >= 1 and row.time_us >= 0 and row.time_us == row.time_us
