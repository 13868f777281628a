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


def test_a_tune_stopped_with_rows_kept_says_where_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A tune stopped in its first round said 'note: the rows measured so far are in p-results.partial-0.jsonl;
    # the same tune with --resume continues from them' and then 'interrupted: what was measured so far is
    # on disk': two lines, the second vaguer than the first.
    import collbench.tuning.shapes as shapes_module

    def measured_then_stopped(config: object, *_args: object, **_kwargs: object) -> None:
        (tmp_path / "p-results.partial-0.jsonl").write_bytes(RESULTS.read_bytes().splitlines(keepends=True)[0])
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(shapes_module, "run_tune_shapes", measured_then_stopped)
    result = CliRunner().invoke(app, ["tune", "--quick", "--ranks", "2", "-O", "p.yaml"], env={"COLUMNS": "80"})
    assert result.exit_code == 130, result.output
    said = (
        "interrupted: the rows measured so far are in p-results.partial-0.jsonl; the same tune with --resume "
        "continues from them"
    )
    lines = result.output.strip().splitlines()
    # One message, at 80 columns wrapped at words (as a note is), each line within them.
    assert " ".join(line.strip() for line in lines) == said and all(len(line) <= 80 for line in lines), lines


PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"


def test_a_tune_stopped_after_saving_its_profile_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The partial rows are deleted once the profile is saved, so a Ctrl-C while the plot or report was
    # drawn said "before any point was measured" over a saved profile of 278 rows.
    import shutil

    import collbench.tuning.shapes as shapes_module

    def saved_then_stopped(config: object, *_args: object, **_kwargs: object) -> None:
        shutil.copyfile(PROFILE, config.output)  # type: ignore[attr-defined]
        raise KeyboardInterrupt

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(shapes_module, "run_tune_shapes", saved_then_stopped)
    result = CliRunner().invoke(app, ["tune", "--quick", "--ranks", "2", "-O", "p.yaml"], env={"COLUMNS": "200"})
    assert result.exit_code == 130, result.output
    last = result.output.strip().splitlines()[-1]
    assert last == "interrupted: the profile of what was measured before it is in p.yaml", result.output
    # A profile already there that this tune did not get to replace is not claimed as its own.
    monkeypatch.setattr(shapes_module, "run_tune_shapes", _stopped)
    args = ["tune", "--quick", "--ranks", "2", "-O", "p.yaml", "--overwrite"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 130, result.output
    assert result.output.strip().splitlines()[-1] == "interrupted: before any point was measured", result.output


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
@pytest.mark.dist
def test_a_real_tune_stopped_while_plotting_keeps_and_names_its_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from small_tune import quick_made_small

    import collbench.tuning.pipeline as pipeline_module
    from collbench.profile.document import Profile
    from collbench.results.io import read_rows

    quick_made_small(monkeypatch, rounds=1, max_rounds=1)
    monkeypatch.setattr(pipeline_module, "_plot", _stopped)
    out = tmp_path / "p.yaml"
    result = CliRunner().invoke(app, ["tune", "--ranks", "2", "--quick", "-O", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 130, result.output
    last = result.output.strip().splitlines()[-1]
    assert last == f"interrupted: the profile of what was measured before it is in {out}", result.output
    rows = read_rows(tmp_path / "p-results.jsonl")
    assert {r.size_bytes for r in rows} == {1024, 4096}
    assert {r.world_size for r in Profile.load(out).rule_sets} == {2}
    assert not (tmp_path / "p.png").exists()


def test_a_sweep_or_tune_stopped_while_torch_loads_says_nothing_was_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C in the seconds torch takes to import (10 s at load 10) fell outside the commands' own
    # handlers: 'interrupted: what was measured so far is on disk', before any rank had started.
    import builtins

    real_import = builtins.__import__

    def loading(name: str, *args: object, **kwargs: object) -> object:
        if name in ("collbench.runtime.launch.ranks", "collbench.tuning.shapes"):
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(builtins, "__import__", loading)
    for args in (["sweep", "--ranks", "2"], ["tune", "--quick", "--ranks", "2"]):
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
        assert result.exit_code == 130, result.output
        assert result.output.strip().splitlines()[-1] == "interrupted: before any point was measured", result.output
