"""`collbench import nccl-tests` in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import read_rows

FIX = Path(__file__).parents[1] / "fixtures" / "nccl_tests"


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_import_writes_rows(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"rows{suffix}"
    result = CliRunner().invoke(
        app,
        ["import", "nccl-tests", str(FIX / "reduce_scatter_perf_4gpu.json"), "--algo", "native:ring", "-O", str(out)],
    )
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert len(rows) == 28 and rows[0].algo == "native:ring" and rows[0].op == "reduce-scatter"


def test_import_to_stdout() -> None:
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(FIX / "broadcast_perf_4rank_unchecked.log")])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 30 and lines[0]["op"] == "broadcast"


def test_import_bad_inputs(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["import", "nccl-tests", str(tmp_path / "x.log")])
    assert missing.exit_code == 2 and "no such file" in missing.output
    bad_out = runner.invoke(app, ["import", "nccl-tests", str(FIX / "all_reduce_perf_8gpu.log"), "-O", "x.txt"])
    assert bad_out.exit_code == 2 and "unknown results format" in bad_out.output
