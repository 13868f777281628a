"""A log's node count, once settled, is not also said to be unknown.

`collbench import nccl-tests all_reduce_perf-dgx-a100-2node-k8s-legacy.log --ranks 16 --nodes 2` (the
flow of docs/models.md) printed 'node count left unknown (0)' above '60 rows: all-reduce, 16 ranks on
2 nodes', and `fit` of a GB200 log said both that and 'taken as 4 ranks a node': a new user read that
the count they gave was ignored.
"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.importers.nodes import NODES_LEFT_UNKNOWN

REAL = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "real"
DGX = REAL / "all_reduce_perf-dgx-a100-2node-k8s-legacy.log"  # names no host and no node count
GB200 = REAL / "all_reduce_perf-gb200-72rank-one-rank-line.log"  # one rank line: its devices say 4 a node


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "300"})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.output


def test_import_with_nodes_does_not_say_the_count_is_unknown(tmp_path: Path) -> None:
    code, output = _run(
        "import", "nccl-tests", str(DGX), "--ranks", "16", "--nodes", "2", "-O", str(tmp_path / "r.jsonl")
    )
    assert code == 0, output
    assert NODES_LEFT_UNKNOWN not in output, output
    assert "16 ranks on 2 nodes" in output, output


def test_without_nodes_the_unknown_count_is_said() -> None:
    code, output = _run("fit", str(DGX), "--ranks", "16")
    assert code == 0, output
    assert "the log names the host of 0 of 16 ranks" in output and NODES_LEFT_UNKNOWN in output, output


def test_fit_with_nodes_and_a_count_from_the_devices_say_it_once() -> None:
    code, output = _run("fit", str(DGX), "--ranks", "16", "--nodes", "2")
    assert code == 0, output
    assert NODES_LEFT_UNKNOWN not in output, output
    code, output = _run("fit", str(GB200))
    assert code == 0, output
    assert NODES_LEFT_UNKNOWN not in output and "taken as 4 ranks a node (72 ranks on 18 nodes)" in output, output
