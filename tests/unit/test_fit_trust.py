"""A fit that does not explain its data is marked, and predict does not extrapolate it (issue 10)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import ConfigError
from collbench.models.fit import fit_results
from collbench.models.fitted import R2_MIN, Fit
from collbench.models.predict import predict
from tests.synthetic_rows import make_rows


def _good(algo: str = "ring") -> Fit:
    (fit,) = fit_results(make_rows(algo, 4, 20.0, 1e-4, noise=0.02, seed=1), crossovers=False).fits
    return fit


def test_a_fit_that_explains_its_data_is_trusted() -> None:
    fit = _good()
    assert fit.r2 >= R2_MIN
    assert fit.distrust() == ""


def test_low_r2_and_no_bandwidth_term_are_distrusted() -> None:
    fit = _good()
    assert "R^2 -0.69 is below" in dataclasses.replace(fit, r2=-0.69).distrust()
    # A fit no better than its mean, a hair below: no "-0.00".
    assert "R^2 0.00 is below" in dataclasses.replace(fit, r2=-0.001).distrust()
    assert "no bandwidth term" in dataclasses.replace(fit, beta_us_per_byte=0.0, segments=()).distrust()


def test_predict_leaves_out_distrusted_fits_and_names_them() -> None:
    good = _good("ring")
    bad = dataclasses.replace(_good("tree"), r2=0.1)
    report = predict([good, bad], 64, [1 << 20])
    assert {p.algo for p in report.predictions} == {"ring"}
    assert report.refused == ["all-reduce tree: R^2 0.10 is below 0.5"]
    assert report.to_dict()["refused"] == report.refused


def test_predict_refuses_when_no_fit_can_be_trusted() -> None:
    bad = dataclasses.replace(_good("tree"), r2=-2.2)
    with pytest.raises(ConfigError, match="no fit explains its data well enough"):
        predict([bad], 64, [1 << 20])


def test_the_refusal_names_each_fit_with_its_reasons_headline() -> None:
    # A 2-core sweep of four ops, 3 sizes each: 9 fits refused made an error line of 1,800 characters,
    # 'a fit needs at least 4 (two more than its parameters) to show its error; measure more sizes' five
    # times. Each reason is cut to its headline, fits sharing one named together, the fit tables pointed at.
    few = "3 points for 2 parameters: a fit needs at least 4 (two more than its parameters) to show its error"
    bad = [
        dataclasses.replace(_good("tree"), r2=-2.2),
        dataclasses.replace(_good("ring"), r2=-2.2),
        dataclasses.replace(_good("direct"), unusable_because=f"{few}; measure more sizes"),
    ]
    with pytest.raises(ConfigError) as refused:
        predict(bad, 64, [1 << 20])
    assert str(refused.value) == (
        "no fit explains its data well enough to extrapolate (all-reduce direct: 3 points for 2 parameters; "
        "all-reduce ring, all-reduce tree: R^2 -2.20 is below 0.5; the fit tables (`collbench fit`) say why "
        "in full); measure again on a quieter machine or with fewer ranks than cores"
    )


def test_predict_cli_warns_in_one_line(tmp_path: Path) -> None:
    import json

    good = _good("ring")
    bad = dataclasses.replace(_good("tree"), r2=0.1)
    path = tmp_path / "fits.json"
    path.write_text(json.dumps({"fits": [good.to_dict(), bad.to_dict()]}))
    result = CliRunner().invoke(app, ["predict", "--fits", str(path), "--ranks", "64", "--nodes", "1", "--sizes", "1M"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "not extrapolated" in line]
    assert len(lines) == 1
    assert "all-reduce tree: R^2 0.10 is below 0.5" in lines[0]
    only_bad = tmp_path / "bad.json"
    only_bad.write_text(json.dumps({"fits": [bad.to_dict()]}))
    refused = CliRunner().invoke(app, ["predict", "--fits", str(only_bad), "--ranks", "64", "--sizes", "1M"])
    assert refused.exit_code == 2
    assert "no fit explains its data" in refused.output
    assert "Traceback" not in refused.output


def test_predict_cli_says_each_fit_left_out_on_its_own_line(tmp_path: Path) -> None:
    """Each refusal holds its own '; ' clauses: joined into one note they read as one run-on (a new
    user's predict from a gloo sweep of four ops ran four fits into one 9-line sentence)."""
    import json

    fits = [_good("ring"), dataclasses.replace(_good("tree"), r2=0.1), dataclasses.replace(_good("two-tree"), r2=0.2)]
    path = tmp_path / "fits.json"
    path.write_text(json.dumps({"fits": [f.to_dict() for f in fits]}))
    result = CliRunner().invoke(app, ["predict", "--fits", str(path), "--ranks", "64", "--nodes", "1", "--sizes", "1M"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("not extrapolated: ")]
    assert lines == [
        "not extrapolated: all-reduce tree: R^2 0.10 is below 0.5",
        "not extrapolated: all-reduce two-tree: R^2 0.20 is below 0.5",
    ]


def test_predicted_shapes_leave_out_distrusted_fits() -> None:
    from collbench.profile.document import Profile, RuleSet
    from collbench.profile.rules import Rule
    from collbench.tuning.predicted_shapes import with_predictions
    from collbench.tuning.shape_args import Shape

    good, bad = _good("ring"), dataclasses.replace(_good("tree"), r2=-0.7)
    rules = (Rule("all-reduce", 0, None, "ring"),)

    def profile(*fits: Fit) -> Profile:
        return Profile("f", "h", "gloo", (RuleSet(4, 1, rules),), fits=fits)

    predicted = with_predictions(profile(good, bad), [Shape(64, None)])
    # 64 ranks keep the measured 4 a node: 16 nodes.
    assert {r.algo for r in predicted.rule_set(64, 16).rules} == {"ring"}
    with pytest.raises(ConfigError, match="no fit explains its data well enough to predict"):
        with_predictions(profile(bad), [Shape(64, None)])
