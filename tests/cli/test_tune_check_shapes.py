"""`collbench tune --check PROFILE` on a profile of several shapes: every shape this machine can run is
re-measured (real gloo ranks, one size per shape, one short round), every other one is one skipped line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.tuning import check
from collbench.tuning.check_shapes import Machine, why_skipped

RULES = (Rule("all-reduce", 0, None, "ring", at_bytes=1024),)
LOCAL = Machine(None, 4, "CPU ranks here: at most max(4, 2 usable cores)")


def _profile() -> Profile:
    sets = (
        RuleSet(2, 1, RULES),
        RuleSet(3, 1, (Rule("all-reduce", 0, None, "native", at_bytes=1024),)),
        RuleSet(8, 1, RULES, predicted=True),
        RuleSet(16, 2, RULES),
        RuleSet(64, 1, RULES),
    )
    return Profile(fingerprint="f", host="h", backend="gloo", rule_sets=sets)


def test_each_shape_that_cannot_run_here_says_why() -> None:
    two, three, predicted, two_nodes, many = _profile().rule_sets
    assert why_skipped(two, LOCAL, None) == "" and why_skipped(three, LOCAL, None) == ""
    assert "predicted from the fitted models" in why_skipped(predicted, LOCAL, None)
    assert "this machine is one node" in why_skipped(two_nodes, LOCAL, None)
    assert "more ranks than this machine starts" in why_skipped(many, LOCAL, None)
    assert why_skipped(many, LOCAL, (64,)) == ""  # asked for by --ranks: runs, oversubscribed
    assert "not asked for (--ranks 2)" in why_skipped(three, LOCAL, (2,))
    # Under a launcher only the job's own shape can be measured.
    job = Machine((16, 2), 16, "the torchrun job's world")
    assert why_skipped(two_nodes, job, None) == ""
    assert "this job is 16 ranks on 2 nodes" in why_skipped(two, job, None)


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
@pytest.mark.dist
def test_check_re_measures_every_shape_it_can_run_and_lists_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Real ranks and sweeps, made small: one round of 10 ms per point (the default is 3 of 100 ms).
    monkeypatch.setattr(check, "CHECK_ROUNDS", 1)
    monkeypatch.setattr(check, "CHECK_BUDGET_S", 0.01)
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "p.yaml"
    _profile().save(path)
    result = CliRunner().invoke(app, ["tune", "--check", str(path), "--backend", "gloo"])
    assert result.exit_code == 0, result.output
    out = result.output
    for shape in ("2 ranks on 1 node", "3 ranks on 1 node"):
        assert f"{shape}, all-reduce re-measured: regret" in out
        assert f"{shape}: geometric-mean regret" in out and "over 1 rule" in out
    skipped = [line for line in out.splitlines() if line.startswith("skipped: ")]
    assert len(skipped) == 3, out
    assert skipped[0].startswith("skipped: 8 ranks on 1 node (predicted): predicted")
    assert skipped[1].startswith("skipped: 16 ranks on 2 nodes: this machine is one node")
    assert skipped[2].startswith("skipped: 64 ranks on 1 node: more ranks than this machine starts")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ranks", "5"], "--ranks 5: the profile has no measured rules for that; it has: 2 ranks on 1 node"),
        (["--ranks", "8"], "--ranks 8: the profile has no measured rules"),  # predicted only
        (["--ranks", "16"], "no rule set of the profile can be re-measured here: 2 ranks on 1 node: not asked"),
    ],
)
def test_check_shapes_that_cannot_be_checked_are_one_line_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    path = tmp_path / "p.yaml"
    _profile().save(path)
    result = CliRunner().invoke(app, ["tune", "--check", str(path), *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()) and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["-O", "new.yaml"], "-O"),
        (["--quick", "--results", "r.jsonl"], "--quick, --results"),
        (["--op", "all-to-all", "-b", "1K", "--predict-ranks", "8"], "--op, -b, --predict-ranks"),
    ],
)
def test_check_refuses_the_options_it_would_ignore(
    tmp_path: Path, args: list[str], named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """'tune --check P -O new.yaml' ran the whole check, wrote no new.yaml and said nothing of it."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "p.yaml"
    _profile().save(path)
    result = CliRunner().invoke(app, ["tune", "--check", str(path), *args])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        "error: --check re-measures the profile's own rules at their own sizes and writes no file: leave out "
        f"{named} (it takes --ranks, --backend and --timeout)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]
