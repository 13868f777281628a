"""`collbench compare` in-process: tables, --json, --fail-above's exit codes, bad input in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from sampled_rows import SIZES, SLOW_SIZES, sampled_row, two_runs
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import write_rows

FIX = Path(__file__).parents[1] / "fixtures" / "nccl_tests"


def _write(tmp_path: Path, seed: int = 0, slow: float = 1.10) -> tuple[Path, Path]:
    base, new = two_runs(seed, slow)
    write_rows(tmp_path / "base.jsonl", base)
    write_rows(tmp_path / "new.csv", new)
    return tmp_path / "base.jsonl", tmp_path / "new.csv"


def test_json_names_the_slow_points_and_fail_above_exits_1(tmp_path: Path) -> None:
    base, new = _write(tmp_path)
    result = CliRunner().invoke(app, ["compare", str(base), str(new), "--json", "--fail-above", "5%"])
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["matched"] == 2 * len(SIZES) and doc["failed"] is True
    assert {(p["algo"], p["size_bytes"]) for p in doc["regressions"]} == {("ring", s) for s in SLOW_SIZES}
    assert "sqrt(iters)" in doc["uncertainty"]
    ring = next(s for s in doc["summary"] if s["algo"] == "ring")
    assert ring["worst_size_bytes"] in SLOW_SIZES and ring["worst_beyond_noise"]


def test_a_threshold_above_the_slowdown_passes(tmp_path: Path) -> None:
    base, new = _write(tmp_path)
    result = CliRunner().invoke(app, ["compare", str(base), str(new), "--fail-above", "15%"])
    assert result.exit_code == 0, result.output
    assert "SLOWER" not in result.stdout and "slower" in result.stdout
    assert "no regression" in result.output


def test_tables_without_threshold(tmp_path: Path) -> None:
    base, new = _write(tmp_path)
    result = CliRunner().invoke(app, ["compare", str(base), str(new)])
    assert result.exit_code == 0, result.output
    assert "per op and algorithm" in result.stdout and "+10" in result.stdout and "noise" in result.stdout


def test_an_nccl_tests_log_against_itself_is_all_noise() -> None:
    log = FIX / "all_reduce_perf_8gpu.log"
    result = CliRunner().invoke(app, ["compare", str(log), str(log), "--json", "--fail-above", "1%"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["matched"] > 10 and not doc["failed"]
    assert all(p["ratio"] == 1.0 and not p["beyond_noise"] for p in doc["points"])


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    base, _new = _write(tmp_path)
    runner = CliRunner()
    missing = runner.invoke(app, ["compare", str(base), str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == 2 and "no such file (NEW)" in missing.output
    eight = tmp_path / "eight.jsonl"
    write_rows(eight, [sampled_row(np.random.default_rng(0), 1024, 5.0, world_size=8)])
    ws = runner.invoke(app, ["compare", str(base), str(eight)])
    assert ws.exit_code == 2 and "different world sizes" in ws.output
    assert len(ws.output.strip().splitlines()) == 1
    log = FIX / "all_reduce_perf_8gpu.log"
    nomatch = runner.invoke(app, ["compare", str(log), str(tmp_path / "base.jsonl")])
    assert nomatch.exit_code == 2 and ("no point matches" in nomatch.output or "world sizes" in nomatch.output)
    garbage = tmp_path / "g.jsonl"
    garbage.write_text("not json\n{}\n")
    bad = runner.invoke(app, ["compare", str(garbage), str(base)])
    assert bad.exit_code == 2 and "g.jsonl:1" in bad.output
    threshold = runner.invoke(app, ["compare", str(base), str(base), "--fail-above", "5"])
    assert threshold.exit_code == 2 and "write 5%" in threshold.output
