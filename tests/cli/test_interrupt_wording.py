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
