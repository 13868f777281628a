"""A rule's gain over native is said with its standard error, as a check's regret is.

tune's table and the report printed 'vs native 1.27x' with no word of how sure it was, beside a check
that says 'regret 1.003±0.004 (± one standard error)'. Both are ratios of two measured points' times;
their error has one home (tuning.selection.ratio_error), and the gain's words one (profile.rules.gain_text).
"""

from __future__ import annotations

import datetime as dt
import io
import math
import re
from pathlib import Path

import yaml
from rich.console import Console

from collbench.cli.render.profile import render_rules
from collbench.profile.document import Profile
from collbench.profile.rules import GAIN_LEGEND, NATIVE
from collbench.report.page import ReportInputs, build_report
from collbench.results.io import read_rows
from collbench.results.row import ResultRow
from collbench.tuning.pipeline import TuneConfig, decide
from collbench.tuning.selection import measured_points

RESULTS = Path(__file__).resolve().parents[1] / "fixtures" / "golden" / "tune-quick-results.jsonl"
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _decided() -> tuple[Profile, list[ResultRow]]:
    rows = read_rows(RESULTS)
    return decide(TuneConfig(command="collbench tune"), rows, topology=None, layout=None, notes=[]).profile, rows


def test_a_measured_gain_carries_the_standard_error_of_its_two_points() -> None:
    profile, rows = _decided()
    points = measured_points(rows)
    gained = [r for r in profile.rules if r.algo != NATIVE]
    assert gained, "the committed tune chose an algorithm over native somewhere"
    for rule in gained:
        here = {v.algo: pts[rule.at_bytes] for v, pts in points[rule.op.value].items() if rule.at_bytes in pts}
        mine, native = here[rule.algo], here[NATIVE]
        expected = rule.gain_vs_native * math.hypot(mine.noise, native.noise)  # as check.regrets' error
        assert rule.gain_err is not None and math.isclose(rule.gain_err, expected, rel_tol=1e-3, abs_tol=1e-4)
    assert all(r.gain_err is None for r in profile.rules if r.algo == NATIVE)  # 1.00x by definition


def test_tunes_table_and_the_report_say_it_as_a_checks_regret() -> None:
    profile, rows = _decided()
    rule = next(r for r in profile.rules if r.gain_err is not None)
    shown = f"{rule.gain_vs_native:.2f}±{rule.gain_err:.2f}x"
    console = Console(width=80, file=io.StringIO(), no_color=True)
    console.print(render_rules(profile))
    table = console.file.getvalue()  # type: ignore[attr-defined]
    assert shown in table and GAIN_LEGEND in table, table
    assert all(len(line.rstrip()) <= 80 for line in table.splitlines())
    page = build_report(ReportInputs(rows=tuple(rows), profile=profile), now=NOW)
    assert f"<td>{shown}</td>" in page and "± one standard error" in page


def test_a_profile_from_before_shows_its_gain_as_before(tmp_path: Path) -> None:
    profile, _ = _decided()
    data = profile.to_dict()
    for rule_set in data["rule_sets"]:
        for rule in rule_set["rules"]:
            rule.pop("gain_err", None)
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump(data))
    loaded = Profile.load(old)
    console = Console(width=80, file=io.StringIO(), no_color=True)
    console.print(render_rules(loaded))
    table = console.file.getvalue()  # type: ignore[attr-defined]
    assert "±" not in table and GAIN_LEGEND not in table
    gains = [r.gain_vs_native for r in loaded.rules if r.algo != NATIVE]
    assert gains and all(re.search(rf"\b{g:.2f}x\b", table) for g in gains), table
    assert all(r.gain_err is None for r in loaded.rules)
