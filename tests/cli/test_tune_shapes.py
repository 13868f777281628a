"""`collbench tune --ranks 2,3 --predict-ranks 8`: several shapes measured into one profile, one predicted."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.runtime.results import read_rows
from collbench.tuning import pipeline
from collbench.tuning.profile import Profile


@pytest.mark.dist
def test_tune_several_shapes_into_one_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real pipeline, made small: every algorithm at 1 KiB and 4 KiB, short timing, one round.
    monkeypatch.setattr(pipeline, "QUICK", pipeline.Depth(1024, 4096, 4.0, 0.01, 0, None, rounds=1))
    out = tmp_path / "p.yaml"
    args = ["tune", "--ranks", "2,3", "--predict-ranks", "8", "--quick", "-o", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    profile = Profile.load(out)
    assert profile.shapes == [(2, 1), (3, 1), (8, 1)]
    assert [s.predicted for s in profile.rule_sets] == [False, False, True]
    assert profile.command == f"collbench tune --ranks 2,3 --quick -o {out} --predict-ranks 8"
    for world in (2, 3):
        rows = read_rows(tmp_path / f"p-results-{world}ranks.jsonl")
        assert {r.world_size for r in rows} == {world} and all(r.wrong == 0 for r in rows)
        assert (tmp_path / f"p-{world}ranks.png").exists()
        measured = {r.algo for r in rows}
        assert {r.algo for r in profile.rule_set(world).rules} <= measured
    assert {f["world_size"] for f in profile.fits} == {2, 3}
    assert all(r.measured_us is None for r in profile.rule_set(8).rules)
    assert "8 on 1 node(s) predicted" in result.stdout
    # One report beside the profile, of every shape: both measured ones and the predicted one.
    page = (tmp_path / "p.html").read_text()
    for section in ("all-reduce, gloo, 2 ranks", "all-reduce, gloo, 3 ranks", "8 ranks, 1 node(s): predicted"):
        assert section in page


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ranks", "2,1"], "whole number of ranks, at least 2"),
        (["--ranks", "2,2"], "given twice"),
        (["--ranks", "2", "--predict-ranks", "2"], "measured too"),
        (["--ranks", "2", "--predict-ranks", "8:9"], "nodes must be 1..8"),
    ],
)
def test_bad_shape_options_are_one_line_exit_2(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["tune", "--quick", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "collbench-profile.yaml").exists()
