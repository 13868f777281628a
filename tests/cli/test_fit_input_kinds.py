"""fit, report and compare take collbench results or nccl-tests logs: a file that is neither says so.

`collbench fit empty.log` said 'unknown results format; use .jsonl, .csv or .parquet', though fit
reads nccl-tests logs (its --help says so) and the user gave one, empty; and telling a log from
results read the whole file into memory to look at its first 20,000 characters.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from refused import refused_line

from collbench.importers.nccl_tests import looks_like_nccl_tests

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("empty.log", b"", "empty"),
        ("notes.txt", b"these are my notes on the cluster\n", "nccl-tests"),
        ("garbage.log", bytes(range(256)) * 4, "nccl-tests"),
    ],
)
@pytest.mark.parametrize("command", ["fit", "report", "compare"])
def test_a_file_that_is_neither_results_nor_a_log_says_what_is_read(
    tmp_path: Path, name: str, content: bytes, says: str, command: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    args = {"fit": [str(path)], "report": [str(path), "-O", str(tmp_path / "r.html")]}.get(
        command, [str(path), str(RESULTS)]
    )
    line = refused_line([command, *args])
    assert str(path) in line and says in line, line
    assert "use .jsonl, .csv or .parquet" not in line


def test_telling_a_log_from_results_reads_only_the_head(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_bytes(b"x" * (32 << 20))  # 32 MiB, no nccl-tests marker
    tracemalloc.start()
    try:
        assert not looks_like_nccl_tests(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < (1 << 20), f"peak {peak / 2**20:.1f} MiB"


@pytest.mark.parametrize("command", ["fit", "report"])
def test_one_file_given_twice_is_refused(tmp_path: Path, command: str) -> None:
    """'report rows.jsonl rows.jsonl' drew 1,688 rows of 844, and fit took every point twice, as if each had
    been measured in two rounds; a link to the file is the same file. compare's BASE and NEW may be one."""
    link = tmp_path / "link.jsonl"
    link.symlink_to(RESULTS)
    out = ["-O", str(tmp_path / "r.html")] if command == "report" else []
    line = refused_line([command, str(RESULTS), str(RESULTS), *out])
    assert line == f"error: {RESULTS} is one file given twice: its rows would count twice; give each once"
    line = refused_line([command, str(RESULTS), str(link), *out])
    assert line == f"error: {RESULTS} and {link} are one file given twice: its rows would count twice; give each once"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.jsonl"]
