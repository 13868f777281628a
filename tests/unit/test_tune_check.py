"""``tune --check``: regret per rule from re-measured rows, on a synthetic profile (no ranks run)."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

import pytest
from synthetic_rows import point_row
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.cli.render.check import retune_advice
from collbench.errors import ConfigError
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.results.row import ResultRow
from collbench.tuning import check as check_mod
from collbench.tuning import shapes
from collbench.tuning.check import check_sizes, geomean_regret, regrets
from collbench.tuning.config import TuneConfig


def _row(algo: str, size: int, t: float, spread: float = 0.02) -> ResultRow:
    return point_row(algo, size, t, iters=100, spread=spread)


def _profile() -> Profile:
    rules = (
        Rule("all-reduce", 0, 65535, "tree", at_bytes=4096),
        Rule("all-reduce", 65536, None, "native", at_bytes=1 << 20),
    )
    return Profile(fingerprint="f", host="h", backend="gloo", rule_sets=(RuleSet(2, 1, rules),))


def test_regret_is_chosen_over_fastest_with_an_uncertainty() -> None:
    rows = []
    for t_tree, t_ring, t_native in ((100.0, 150.0, 120.0), (102.0, 149.0, 118.0), (98.0, 151.0, 121.0)):
        rows += [_row("tree", 4096, t_tree), _row("ring", 4096, t_ring), _row("native", 4096, t_native)]
    for t_native, t_ring in ((1000.0, 800.0), (1010.0, 790.0), (990.0, 810.0)):
        rows += [_row("native", 1 << 20, t_native), _row("ring", 1 << 20, t_ring)]
    small, large = regrets(_profile(), rows)
    assert small.regret == pytest.approx(1.0)
    assert small.best_algo == "tree"
    assert small.regret_err is not None and 0 < small.regret_err < 0.05
    assert not small.faulted
    assert large.regret == pytest.approx(990.0 / 790.0)  # the rounds' fastest of each
    assert large.best_algo == "ring"
    assert large.faulted
    assert geomean_regret([small, large]) == pytest.approx((990.0 / 790.0) ** 0.5)


def test_the_times_shown_are_the_ones_the_regret_divides() -> None:
    # The defect of docs/tuning.md's check (one-shot shown at 83.1 us, native named fastest at 109.5 us,
    # regret 1.413): the regret divides times with every round at the fastest round's speed, the table
    # showed each point's smallest time as measured, which can come from a round of another speed.
    # Round 1 ran twice as slow (ring and tree, and the median of the four ratios, say so); one-shot's
    # best time is its round-0 one, native's its round-1 one, which is 54.75 us at round 0's speed.
    rows = []
    for index, times in enumerate(
        (
            {"one-shot": 83.0, "native": 130.0, "ring": 200.0, "tree": 210.0},
            {"one-shot": 200.0, "native": 109.5, "ring": 400.0, "tree": 420.0},
        )
    ):
        rows += [point_row(algo, 4096, t, iters=100, spread=0.02, tune_round=index) for algo, t in times.items()]
    rules = (Rule("all-reduce", 0, None, "one-shot", at_bytes=4096),)
    profile = Profile(fingerprint="f", host="h", backend="gloo", rule_sets=(RuleSet(2, 1, rules),))
    (check,) = regrets(profile, rows)
    assert check.best_algo == "native"
    assert check.regret == pytest.approx(83.0 / 54.75)
    assert check.chosen_us == pytest.approx(83.0) and check.best_us == pytest.approx(54.75)
    assert check.regret == pytest.approx(check.chosen_us / check.best_us)


def test_a_chosen_algorithm_not_measured_is_said_so() -> None:
    rows = [_row("ring", 4096, 100.0), _row("ring", 1 << 20, 800.0), _row("native", 1 << 20, 800.0)]
    small, _ = regrets(_profile(), rows)
    assert small.regret is None and small.chosen_us is None and small.best_algo == "ring"


def test_check_sizes_use_at_bytes_or_the_middle_of_the_range() -> None:
    rules = (Rule("all-reduce", 0, 4095, "tree"), Rule("all-reduce", 4096, None, "ring", at_bytes=65536))
    profile = Profile(fingerprint="f", host="h", backend="gloo", rule_sets=(RuleSet(2, 1, rules),))
    # sqrt(1 * 4095) = 63.99, rounded down to whole float32 elements: 60 bytes.
    assert [s for _, s in check_sizes(profile)] == [60, 65536]


def test_check_refuses_another_world_size(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="check it with --ranks 2"):
        check_mod.run_check(_profile(), world_size=4, stream_dir=tmp_path)


def test_tune_check_cli_prints_the_regret_per_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "p.yaml"
    _profile().save(path)
    measured = [_row("tree", 4096, 100.0), _row("native", 4096, 130.0)]
    measured += [_row("native", 1 << 20, 1000.0), _row("ring", 1 << 20, 800.0)]
    seen: dict[str, object] = {}

    def fake_run_check(profile: Profile, **kwargs: object) -> list[check_mod.RuleCheck]:
        # Stands in for the sweeps only: the regrets come from the real code on these rows.
        seen.update(kwargs)
        return regrets(profile, measured)

    monkeypatch.setattr(check_mod, "run_check", fake_run_check)
    result = CliRunner().invoke(app, ["tune", "--check", str(path)])
    assert result.exit_code == 0, result.output
    assert seen["world_size"] == 2
    assert "1.000±" in result.output
    assert "1.250±" in result.output
    assert "geometric-mean regret 1.118 over 2 rules; 1 beaten beyond the noise" in result.output
    # A beaten rule said no next step; now one line: the shape's tune again, into a new file.
    retuned = tmp_path / "p-retuned.yaml"
    command = f"collbench tune --ranks 2 --backend gloo -O {retuned}"
    assert result.output.splitlines()[-1] == (
        f"next: re-tune where a rule is beaten (all-reduce 64 KiB-∞): `{command}`, then check that profile "
        f"(`collbench tune --check {retuned}`)"
    )


def test_the_retune_command_is_one_tune_runs_and_keeps_what_was_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The profile's own tune, its files left where they are: a new profile, rows and plot beside them.
    recorded = "collbench tune --ranks 2 --quick -b 1024 --output p.yaml --results rows.jsonl --plot p.png"
    profile = dataclasses.replace(_profile(), command=recorded)
    rows = [_row("native", 1 << 20, t) for t in (1000.0, 1010.0, 990.0)]
    rows += [_row("ring", 1 << 20, t) for t in (800.0, 790.0, 810.0)]
    small, large = regrets(profile, [*rows, _row("tree", 4096, 100.0)])
    assert large.faulted and not small.faulted
    line = retune_advice(tmp_path / "p.yaml", profile, [(profile.default_set, large)])
    assert line is not None
    command = line.split("`")[1]
    new = tmp_path / "p-retuned.yaml"
    assert command == f"collbench tune --ranks 2 --quick -b 1024 -O {new}"
    seen: list[TuneConfig] = []

    class Stop(Exception):
        pass

    def stop(config: TuneConfig, *args: object, **kwargs: object) -> None:
        seen.append(config)  # what the tune would run: the command is one the CLI takes
        raise Stop

    monkeypatch.setattr(shapes, "check_shapes", stop)
    with pytest.raises(Stop):
        CliRunner().invoke(app, shlex.split(command)[1:], catch_exceptions=False)
    (config,) = seen
    assert config.output == new and config.quick and config.min_bytes == 1024
    assert config.rows_path == tmp_path / "p-retuned-results.jsonl" and config.png_path == new.with_suffix(".png")
    assert retune_advice(tmp_path / "p.yaml", profile, []) is None


def test_the_retune_line_names_each_shape_and_op_beaten() -> None:
    # A merged profile records no tune: the line builds one of the shapes and ops beaten.
    rules = tuple(
        Rule("all-gather", i * 1024, None if i == 4 else i * 1024 + 1023, "ring", at_bytes=i * 1024 + 512)
        for i in range(5)
    )
    two, four = RuleSet(2, 1, rules), RuleSet(4, 1, rules)
    profile = Profile(
        fingerprint="f", host="h", backend="gloo", rule_sets=(two, four), command="collbench profile merge"
    )
    checks = [check_mod.RuleCheck(r, 512, 2.0, "tree", 1.0, 2.0, 0.1, True) for r in rules]
    line = retune_advice(Path("m.yaml"), profile, [(two, c) for c in checks] + [(four, checks[0])])
    assert line is not None
    # Ranges as the check table shows them (its from and to columns), three an op and shape at most.
    assert "(2 ranks on 1 node, all-gather 0 B-1023 B, 1 KiB-2 KiB, 2 KiB-3 KiB, 2 more; " in line
    assert "4 ranks on 1 node, all-gather 0 B-1023 B)" in line
    assert "`collbench tune --ranks 2,4 --backend gloo --op all-gather -O m-retuned.yaml`" in line


def test_check_refuses_a_profile_of_one_rank(tmp_path: Path) -> None:
    one = Profile(fingerprint="f", host="h", backend="gloo", rule_sets=(RuleSet(1, 1, _profile().rules),))
    with pytest.raises(ConfigError, match=r"1 rank on 1 node.*at least 2 ranks"):
        check_mod.run_check(one, world_size=None, stream_dir=tmp_path)
