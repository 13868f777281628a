"""`collbench fit` and `collbench predict` of the new ops, in-process: barrier in microseconds with no
bandwidth, all-to-all priced by each algorithm's structure at another world size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from new_op_rows import barrier_rows, data_op_rows, priced_pairs
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.models.costs import cost_terms
from collbench.results.io import write_rows
from collbench.schedules.ops import Op

BARRIER_ALGOS = priced_pairs(Op.BARRIER)
A2A_ALGOS = priced_pairs(Op.ALL_TO_ALL)


def _results(tmp_path: Path) -> Path:
    rows = [row for algo in BARRIER_ALGOS for row in barrier_rows(algo, 4, 30.0, named_sizes=(0, 1024))]
    for i, algo in enumerate(A2A_ALGOS):
        rows += data_op_rows(Op.ALL_TO_ALL, algo, 4, 20.0 + 5 * i, 1e-3 / (2.0 + i), seed=i, noise=0.0)
    path = tmp_path / "x.jsonl"
    write_rows(path, rows)
    return path


@pytest.mark.skipif(not BARRIER_ALGOS or not A2A_ALGOS, reason="no barrier or all-to-all formulas registered yet")
def test_fit_then_predict_barrier_and_all_to_all_at_64_ranks(tmp_path: Path) -> None:
    results = _results(tmp_path)
    runner = CliRunner()
    table = runner.invoke(app, ["fit", str(results)])
    assert table.exit_code == 0, table.output
    assert "barrier, gloo, 4 ranks: latency only" in table.stdout and "us/round" in table.stdout
    fitted = runner.invoke(app, ["fit", str(results), "--json"])
    assert fitted.exit_code == 0, fitted.output
    doc = json.loads(fitted.stdout)
    barriers = [f for f in doc["fits"] if f["op"] == "barrier"]
    assert {f["algo"] for f in barriers} == set(BARRIER_ALGOS)
    assert all(f["beta_gbps"] is None and f["usable"] and f["min_bytes"] == 0 for f in barriers)
    fits = tmp_path / "fits.json"
    fits.write_text(fitted.stdout)
    predicted = runner.invoke(app, ["predict", "--fits", str(fits), "--ranks", "64", "--nodes", "1", "--json"])
    assert predicted.exit_code == 0, predicted.output
    out = json.loads(predicted.stdout)
    for p in out["predictions"]:
        if p["op"] == "barrier":
            assert p["size_bytes"] == 0 and p["busbw_gbps"] is None and p["error_pct"] is None
        elif p["algo"] != "native":
            steps = cost_terms("all-to-all", p["algo"], 64, 1.0).alpha
            assert f"{steps:.0f} step" in p["basis"]
            assert p["busbw_gbps"] > 0
    assert sum(1 for c in out["choice"] if c["op"] == "barrier") == 1
    shown = runner.invoke(app, ["predict", "--fits", str(fits), "--ranks", "64", "--nodes", "1", "--op", "barrier"])
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    # The one op is said in each table's title, not in its rows.
    assert any(line.startswith("barrier, predicted at 64 ranks") for line in lines), shown.stdout
    assert "barrier: choice per size (fastest)" in lines, shown.stdout
    assert not [line for line in lines if line.startswith("barrier ")]
    rows = [line for line in lines if line.split()[:1] and line.split()[0] in BARRIER_ALGOS]
    choice = lines[lines.index("barrier: choice per size (fastest)") :]
    rows += [line for line in choice if line.startswith("- ")]  # the choice row: no size
    assert len(rows) == len(BARRIER_ALGOS) + 1  # a prediction row each, and the one choice row
    assert all(" - " in f" {line}" for line in rows)  # no size, no bandwidth


def test_predict_of_a_fit_whose_op_has_no_formula_is_one_line(tmp_path: Path) -> None:
    fit = {"op": "barrier", "algo": "ring", "backend": "gloo", "world_size": 4, "alpha_us": 10.0, "points": 1}
    if "ring" in BARRIER_ALGOS:
        pytest.skip("ring has a barrier formula")
    path = tmp_path / "fits.json"
    path.write_text(json.dumps({"fits": [fit]}))
    result = CliRunner().invoke(app, ["predict", "--fits", str(path), "--ranks", "64"])
    assert result.exit_code == 2
    assert "barrier ring: no cost formula for barrier" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"op": "all-to-none"}, "fit all-to-none/ring: unknown op 'all-to-none'; known: all-reduce, "),
        ({"algo": "teleport"}, "fit all-reduce/teleport: unknown algorithm 'teleport'; known: ring, "),
        ({"op": 7}, "fit 7/ring: op is 7, not a name"),
    ],
)
def test_a_stored_fit_of_an_unknown_op_or_algorithm_is_refused_as_a_row_is(
    tmp_path: Path, change: dict[str, object], said: str
) -> None:
    # It was kept, and predict said only 'no fit explains its data well enough to extrapolate (... known;
    # ...)': a row naming an unknown op is refused in one line listing the known ones, and so is a fit.
    fit = {"op": "all-reduce", "algo": "ring", "backend": "gloo", "world_size": 4, "alpha_us": 10.0,
           "beta_gbps": 1.0, "points": 8, **change}  # fmt: skip
    path = tmp_path / "fits.json"
    path.write_text(json.dumps({"fits": [fit]}))
    result = CliRunner().invoke(app, ["predict", "--fits", str(path), "--ranks", "64"], env={"COLUMNS": "400"})
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: {path}: {said}") and len(result.output.splitlines()) == 1, result.output
