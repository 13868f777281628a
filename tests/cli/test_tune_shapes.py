"""`collbench tune --ranks 2,3`: several shapes measured into one profile; `profile predict` (what
`tune --predict-ranks` runs after measuring) on a real measured profile's fits."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from small_tune import quick_made_small
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.profile.document import Profile
from collbench.results.io import read_rows


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
@pytest.mark.dist
def test_tune_several_shapes_into_one_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real pipeline, made small: every algorithm at 1 KiB and 4 KiB, short timing, one round.
    quick_made_small(monkeypatch, rounds=1, max_rounds=4)
    out = tmp_path / "p.yaml"
    args = ["tune", "--ranks", "2,3", "--quick", "-O", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    profile = Profile.load(out)
    assert profile.shapes == [(2, 1), (3, 1)]
    assert [s.predicted for s in profile.rule_sets] == [False, False]
    assert profile.command == f"collbench tune --ranks 2,3 --quick --output {out}"
    for world in (2, 3):
        rows = read_rows(tmp_path / f"p-results-{world}ranks.jsonl")
        assert {r.world_size for r in rows} == {world} and all(r.wrong == 0 for r in rows)
        assert (tmp_path / f"p-{world}ranks.png").exists()
        measured = {r.algo for r in rows}
        assert {r.algo for r in profile.rule_set(world).rules} <= measured
    assert {f.world_size for f in profile.fits} == {2, 3}
    assert "2 ranks on 1 node" in result.stdout and "3 ranks on 1 node" in result.stdout
    # One report beside the profile, of every shape.
    page = (tmp_path / "p.html").read_text()
    for section in ("all-reduce, gloo, 2 ranks", "all-reduce, gloo, 3 ranks"):
        assert section in page


EXAMPLE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "profiles" / "cpu-2core-gloo-4ranks.yaml"
"""The example profiles/ once held (4 ranks on 2 cores): some of its fits explain their data and
some do not, which is what predictions must tell apart."""


def _refitted(tmp_path: Path) -> Path:
    """The example profile with its fits made again from its results: the file's own predate the
    usability bound and each misses a point by 30-96%; made now, direct, native and tree follow every
    point and the others say they cannot."""
    from collbench.models.fit import fit_results

    results = EXAMPLE.parents[1] / "golden" / "example-results.jsonl"
    profile = Profile.load(EXAMPLE)
    path = tmp_path / "example.yaml"
    dataclasses.replace(profile, fits=tuple(f.as_stored() for f in fit_results(read_rows(results)).fits)).save(path)
    return path


def test_profile_predict_adds_predicted_shapes_from_trusted_fits(tmp_path: Path) -> None:
    out = tmp_path / "p.yaml"
    example = _refitted(tmp_path)
    result = CliRunner().invoke(app, ["profile", "predict", str(example), "--ranks", "8,64:8", "-O", str(out)])
    assert result.exit_code == 0, result.output
    profile = Profile.load(out)
    assert profile.shapes == [(4, 1), (8, 1), (64, 8)]
    assert [s.predicted for s in profile.rule_sets] == [False, True, True]
    # The example's fits for direct, native and tree follow their points; the others do not (they
    # miss a point by more than 25%) and are not extrapolated, which the notes say.
    for world in (8, 64):
        rules = profile.rule_set(world).rules
        assert {r.algo for r in rules} <= {"direct", "native", "recursive-doubling", "tree"}
        assert all(r.measured_us is None and r.predicted_us for r in rules)
    assert "not used for predictions: all-reduce ring: misses a point by 74% (bound 25%" in result.stderr
    assert "64 ranks on 8 nodes (predicted)" in result.stdout
    exported = CliRunner().invoke(app, ["export", "ompi-rules", str(out), "--from-other-backend"])
    assert "64 ranks on 8 nodes, predicted from the fitted models, not measured" in exported.stdout


def test_profile_predict_bad_input_is_one_line(tmp_path: Path) -> None:
    for args, message in [
        (["--ranks", "4"], "4 ranks on 1 node are measured already"),
        (["--ranks", "8:9"], "nodes must be 1..8"),
    ]:
        example = _refitted(tmp_path)
        result = CliRunner().invoke(app, ["profile", "predict", str(example), *args, "-O", str(tmp_path / "p.yaml")])
        assert result.exit_code == 2 and message in result.stderr, result.output
        assert result.stderr.strip().count("\n") == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ranks", "2,1"], "--ranks 1: tune needs at least 2 ranks"),
        (["--ranks", "2,2"], "given twice"),
        (["--ranks", "2", "--predict-ranks", "2"], "measured too"),
        (["--ranks", "2,3", "--check", "p.yaml"], "p.yaml: no such profile"),  # every shape is checked now
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
