"""A results file given where a profile goes (export, report --profile, profile predict) is one line
that says so, exit 2: the rows were parsed as YAML and refused with "not YAML: expected '<document
start>', but found '{'", which told a user nothing about what to give instead. The file is named by
what it holds (filekinds.misfiled), whatever its name says."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import read_rows, write_rows

EXAMPLE_RESULTS = Path(__file__).resolve().parents[2] / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"


@pytest.mark.parametrize(
    "args",
    [
        ["export", "ompi-rules", "{rows}", "--from-other-backend"],
        ["export", "nccl-tuner", "{rows}", "--from-other-backend"],
        ["export", "env", "{rows}"],
        ["report", "{rows}", "--profile", "{rows}", "-O", "{dir}/page.html"],
        ["profile", "predict", "{rows}", "--ranks", "8", "-O", "{dir}/more.yaml"],
        ["profile", "predict", "{rows}", "--ranks", "8"],
    ],
    ids=lambda a: " ".join(a[:2]) + (" -O" if "-O" in a else ""),
)
@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_results_in_place_of_a_profile(args: list[str], suffix: str, tmp_path: Path) -> None:
    rows = tmp_path / f"rows{suffix}"
    if suffix == ".jsonl":
        shutil.copy(EXAMPLE_RESULTS, rows)
    else:
        write_rows(rows, read_rows(EXAMPLE_RESULTS))
    argv = [a.format(rows=rows, dir=tmp_path) for a in args]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    assert f"{rows}: this is collbench result rows (fit, report and compare read them), not a collbench profile" in (
        result.output
    ), result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "page.html").exists() and not (tmp_path / "more.yaml").exists()
    # Without -O the predicted profile's default name (rows.predicted.yaml) is no reason to refuse: the
    # input is named for what it is, not an -O the user never gave ('rows.predicted.jsonl: a profile is YAML').
    assert "-O/--output" not in result.output, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [rows.name], list(tmp_path.iterdir())
