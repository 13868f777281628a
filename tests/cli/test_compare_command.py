"""`collbench compare` in-process: tables, --json, --fail-above's exit codes, bad input in one line."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest
from sampled_rows import SIZES, SLOW_SIZES, sampled_row, two_runs
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import read_rows, write_rows

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
    regressed = {(p["algo"], p["size_bytes"]) for p in doc["regressions"]}
    assert regressed and regressed <= {("ring", s) for s in SLOW_SIZES}
    assert doc["run"]["divided_out"] and not doc["run_regressed"]
    assert "sqrt(iters)" in doc["uncertainty"]
    ring = next(s for s in doc["summary"] if s["algo"] == "ring")
    assert ring["worst_size_bytes"] in SLOW_SIZES and ring["worst_beyond_noise"]


def test_a_threshold_above_the_slowdown_passes(tmp_path: Path) -> None:
    base, new = _write(tmp_path)
    result = CliRunner().invoke(app, ["compare", str(base), str(new), "--fail-above", "15%"])
    assert result.exit_code == 0, result.output
    assert "SLOWER" not in result.stdout and "slower" in result.stdout
    assert "no point regressed" in result.output


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


def _scaled(path: Path, out: Path, factor: float) -> Path:
    """``path``'s rows with every time multiplied by ``factor``: a uniformly slower run."""
    rows = read_rows(path)
    scaled = [
        dataclasses.replace(
            r, time_us=r.time_us * factor, time_us_min=r.time_us_min * factor, time_us_max=r.time_us_max * factor,
            time_us_mean=r.time_us_mean * factor,
        )
        for r in rows
    ]  # fmt: skip
    write_rows(out, scaled)
    return out


def test_a_uniform_slowdown_fails_as_a_whole_run(tmp_path: Path) -> None:
    base, _new = _write(tmp_path)
    slower = _scaled(base, tmp_path / "slower.jsonl", 1.10)
    result = CliRunner().invoke(app, ["compare", str(base), str(slower), "--fail-above", "5%"])
    assert result.exit_code == 1, result.output
    assert "NEW is 10.0% slower than BASE overall" in result.output and "whole run is slower" in result.output
    assert "SLOWER" not in result.stdout
    same = CliRunner().invoke(
        app, ["compare", str(base), str(_scaled(base, tmp_path / "s.jsonl", 1.02)), "--fail-above", "5%"]
    )
    assert same.exit_code == 0, same.output


def test_other_backends_and_hosts_are_warned_about_in_one_line(tmp_path: Path) -> None:
    base, _new = _write(tmp_path)
    write_rows(base, [dataclasses.replace(r, host="here") for r in read_rows(base)])
    write_rows(tmp_path / "nccl.jsonl", [dataclasses.replace(r, backend="nccl", host="other") for r in read_rows(base)])
    result = CliRunner().invoke(app, ["compare", str(base), str(tmp_path / "nccl.jsonl")])
    assert result.exit_code == 0, result.output
    assert "warning: the runs differ in backend: BASE gloo, NEW nccl" in result.output
    assert "warning: the runs differ in host" in result.output


def test_a_fifo_or_a_device_is_one_line(tmp_path: Path) -> None:
    base, _new = _write(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for other in (fifo, Path("/dev/zero")):
        result = CliRunner().invoke(app, ["compare", str(base), str(other)])
        assert result.exit_code == 2, result.output
        assert "not a regular file" in result.output and len(result.output.strip().splitlines()) == 1


def _many_points(path: Path, points: int, factor: float) -> None:
    """``points`` one-row points as a sweep writes them, ~370 bytes a line, written without the row checks."""
    rng = np.random.default_rng(int(factor * 100))
    template = sampled_row(rng, 1024, 20.0).to_dict()
    with path.open("w") as f:
        for i in range(points):
            t = (20.0 + i / 100.0) * factor * float(np.exp(rng.normal(0.0, 0.01)))
            row = dict(template, size_bytes=1024 * (i + 1), count=256 * (i + 1), time_us=t, time_us_mean=t,
                       time_us_min=0.97 * t, time_us_max=1.2 * t)  # fmt: skip
            f.write(json.dumps(row) + "\n")


@pytest.mark.slow
def test_two_files_of_200k_points_compare_and_print_only_what_is_beyond_noise(tmp_path: Path) -> None:
    """Rows stream into per-point summaries and the table shows only what is beyond noise. Reading and
    checking 400,000 rows takes ~25 s of one idle core (before, compare held every row and printed every
    point, past 120 s): benchmarks/bench_compare_files.py measures its CPU time and memory."""
    base, new = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _many_points(base, 200_000, 1.0)
    _many_points(new, 200_000, 1.0)
    result = CliRunner().invoke(app, ["compare", str(base), str(new), "--fail-above", "5%"])
    assert result.exit_code == 0, result.output
    assert "200000 points matched" in result.output and "within noise not shown" in result.output
    assert len(result.stdout.splitlines()) < 100


@pytest.mark.parametrize(("zs", "said"), [((2.86, 2.94), "2.9"), ((2.9,), "2.9"), ((2.9, 3.0), "2.9-3.0")])
def test_the_noise_bar_is_a_range_only_where_its_ends_print_apart(zs: tuple[float, ...], said: str) -> None:
    # Two sweeps of the 2-core VM printed 'verdict noise: within 2.9-2.9 standard errors of no change'.
    from types import SimpleNamespace

    from collbench.cli.compare import _z_text

    comparison = SimpleNamespace(changes=[SimpleNamespace(z=z) for z in zs])
    assert _z_text(comparison) == said  # type: ignore[arg-type]
