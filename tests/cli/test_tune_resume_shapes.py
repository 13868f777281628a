"""`collbench tune --ranks 2,3 --resume` after a run that stopped in its second shape: the finished shape
is taken from its files, the stopped one resumes from its partial rows, and the profile has both.

The rows are measured by real gloo ranks; only the stop is staged: a rank "dies" (RankError) as the
3-rank shape starts its second round, after its first round streamed its rows to the partial file."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from small_tune import quick_made_small
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import ConfigError, RankError
from collbench.profile.document import Profile
from collbench.results.io import read_rows
from collbench.runtime.sweep import run as sweep_mod
from collbench.tuning.config import TuneConfig, partial_paths, shape_configs
from collbench.tuning.shape_resume import plan_shapes


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
@pytest.mark.dist
def test_resume_keeps_the_finished_shape_and_resumes_the_stopped_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    quick_made_small(monkeypatch)
    real = sweep_mod.run_sweep
    calls: list[tuple[int | None, str, bool]] = []

    def run_sweep(config: Any, progress: Any = None, *, die: bool = True) -> Any:
        calls.append((config.world_size, config.stream_path.name, config.resume))
        if die and config.world_size == 3 and ".partial-1." in config.stream_path.name:
            raise RankError(1, "localhost", "measuring", "killed")
        return real(config, progress)

    monkeypatch.setattr(sweep_mod, "run_sweep", run_sweep)
    out = tmp_path / "p.yaml"
    args = ["tune", "--ranks", "2,3", "--quick", "--backend", "gloo", "-O", str(out)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 3, first.output
    assert "the same tune with --resume continues from them" in " ".join(first.output.split())
    assert Profile.load(out).shapes == [(2, 1)]  # saved as soon as it finished
    two_rows = read_rows(tmp_path / "p-results-2ranks.jsonl")
    kept = read_rows(tmp_path / "p-results-3ranks.partial-0.jsonl")
    assert kept and {r.world_size for r in kept} == {3}

    # A plain re-run refuses to empty the kept rows; --resume continues.
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 2 and "add --resume to continue it" in " ".join(again.output.split())
    calls.clear()
    monkeypatch.setattr(sweep_mod, "run_sweep", lambda c, p=None: run_sweep(c, p, die=False))
    resumed = CliRunner().invoke(app, [*args, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert calls == [(3, "p-results-3ranks.partial-0.jsonl", True), (3, "p-results-3ranks.partial-1.jsonl", False)]
    said = " ".join(resumed.output.split())
    assert "2 ranks: finished before the interruption" in said
    assert f"results: {tmp_path / 'p-results-2ranks.jsonl'}" in said
    assert f"({len(two_rows)} points measured before the interruption)" in said
    # The resumed shape's count says which of its points the interrupted run measured: '(N points in
    # T s)' counted them as measured now.
    assert re.search(rf"\(\d+ points in \d+ s, {len(kept)} of them measured before the interruption\)", said), said
    profile = Profile.load(out)
    assert profile.shapes == [(2, 1), (3, 1)]
    assert {f.world_size for f in profile.fits} == {2, 3}
    assert read_rows(tmp_path / "p-results-2ranks.jsonl") == two_rows
    three = read_rows(tmp_path / "p-results-3ranks.jsonl")
    # The first round's rows, resumed, not measured again (marked as that round's in the results).
    assert all(dataclasses.replace(r, tune_round=0) in three for r in kept)
    assert len(three) == 2 * len(kept)
    assert not list(tmp_path.glob("*.partial-*"))
    page = (tmp_path / "p.html").read_text()
    assert "all-reduce, gloo, 2 ranks" in page and "all-reduce, gloo, 3 ranks" in page


def _configs(tmp_path: Path) -> list[Any]:
    base = TuneConfig(ranks=2, output=tmp_path / "p.yaml", quick=True, resume=True)
    return shape_configs(base, (2, 3, 4))


def _keep_rows(config: Any) -> None:
    partial_paths(config)[0].write_text('{"row": 1}\n')


def test_a_run_stopped_in_its_first_shape_resumes_it_and_starts_the_others_afresh(tmp_path: Path) -> None:
    configs = _configs(tmp_path)
    _keep_rows(configs[0])
    plans, notes = plan_shapes(configs)
    assert [(p.config.ranks, p.config.resume, p.finished) for p in plans] == [
        (2, True, None),
        (3, False, None),
        (4, False, None),
    ]
    assert notes == []


def test_a_finished_shape_whose_files_are_gone_is_measured_again_with_a_note(tmp_path: Path) -> None:
    configs = _configs(tmp_path)
    _keep_rows(configs[2])
    plans, notes = plan_shapes(configs)
    assert [(p.config.ranks, p.config.resume, p.finished) for p in plans] == [
        (2, False, None),
        (3, False, None),
        (4, True, None),
    ]
    assert notes == [
        f"2 ranks: finished before the interruption, but {tmp_path / 'p.yaml'} is gone; measured again",
        f"3 ranks: finished before the interruption, but {tmp_path / 'p.yaml'} is gone; measured again",
    ]


def test_resume_with_no_kept_rows_in_any_shape_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no rows of an interrupted tune to continue"):
        plan_shapes(_configs(tmp_path))
    # Without --resume nothing is planned differently.
    plain = [dataclasses.replace(c, resume=False) for c in _configs(tmp_path)]
    assert [p.config for p in plan_shapes(plain)[0]] == plain
