"""Ctrl-C says "what was measured so far is on disk" only where something was being measured.

`collbench report big.jsonl -O page.html` stopped with Ctrl-C said 'interrupted: what was measured
so far is on disk': report, fit, compare, predict and import measure nothing, and wrote nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import collbench.cli.compare as compare_module
import collbench.cli.fit as fit_module
import collbench.report.page as page_module
from collbench.cli.app import app

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"


def _stopped(*_args: object, **_kwargs: object) -> None:
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    "args",
    [["fit", str(RESULTS)], ["report", str(RESULTS), "-O", "page.html"], ["compare", str(RESULTS), str(RESULTS)]],
)
def test_a_command_that_measures_nothing_does_not_claim_measured_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(fit_module, "stream_results", _stopped)
    monkeypatch.setattr(compare_module, "stream_results", _stopped)
    monkeypatch.setattr(page_module, "write_report", _stopped)
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 130, result.output
    last = result.output.strip().splitlines()[-1]
    assert last == "interrupted", result.output
    assert not (tmp_path / "page.html").exists()


def test_a_sweep_or_tune_stopped_before_its_first_point_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C while the ranks started said "what was measured so far is on disk" over an empty stream.
    import collbench.runtime.sweep.run as run_module
    import collbench.tuning.shapes as shapes_module

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(run_module, "run_sweep", _stopped)
    monkeypatch.setattr(shapes_module, "run_tune_shapes", _stopped)
    for args in (["sweep", "--ranks", "2"], ["tune", "--quick", "--ranks", "2"]):
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
        assert result.exit_code == 130, result.output
        assert result.output.strip().splitlines()[-1] == "interrupted: before any point was measured", result.output
