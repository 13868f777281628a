"""`collbench sweep --op scan,exscan --algo all` on real gloo ranks, and what cannot run refused in a line.

Every scan algorithm runs with each rank's prefix checked (wrong 0: exscan's rank 0 output must stay
untouched), at 3 ranks (odd) with sum and prod; torch.distributed has no scan, so native is skipped
saying so; avg is refused (no prefix form); no nccl-tests log can hold a scan.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import read_rows

pytestmark = pytest.mark.dist

RUNNER = CliRunner()
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "nccl_tests"


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
@pytest.mark.parametrize("redop", ["sum", "prod"])
def test_every_scan_algorithm_runs_checked_on_three_ranks(tmp_path: Path, redop: str) -> None:
    out = tmp_path / "rows.jsonl"
    args = ["sweep", "--ranks", "3", "--op", "scan,exscan", "--algo", "all", "-o", redop]
    args += ["-b", "4", "-e", "4K", "-f", "32", "-n", "3", "-w", "1", "--both", "--output", str(out)]
    result = RUNNER.invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    for op in ("scan", "exscan"):
        assert {r.algo for r in rows if r.op == op} == {"linear", "recursive-doubling", "blelloch"}, op
    assert rows and all(r.wrong == 0 and r.time_us > 0 for r in rows)
    # Scan runs in place or out of it; exscan keeps its input beside its output: out of place only.
    assert {r.in_place for r in rows if r.op == "scan"} == {False, True}
    assert {r.in_place for r in rows if r.op == "exscan"} == {False}
    assert "native scan, exscan: torch.distributed has no scan" in result.output


def test_what_cannot_run_is_one_line(tmp_path: Path) -> None:
    avg = RUNNER.invoke(app, ["sweep", "--ranks", "2", "--op", "scan", "-o", "avg", "-O", str(tmp_path / "a.jsonl")])
    assert avg.exit_code == 2 and "avg has no prefix form" in avg.output
    native = RUNNER.invoke(app, ["sweep", "--ranks", "2", "--op", "exscan", "--algo", "native"])
    assert native.exit_code == 2 and "torch.distributed has no scan" in native.output
    log = FIX / "all_reduce_perf_8gpu.log"
    imported = RUNNER.invoke(app, ["import", "nccl-tests", str(log), "--op", "scan", "-O", str(tmp_path / "s.jsonl")])
    assert imported.exit_code == 2 and "nccl-tests has no scan program" in imported.output
    assert "Traceback" not in avg.output + native.output + imported.output
