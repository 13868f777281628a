"""The report's curves and crossovers: only usable fits are drawn, and the crossovers marked are the
ones the profile's rules agree with, at the rules' boundary."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re

from synthetic_rows import make_rows

from collbench.models.crossover import find_crossovers
from collbench.report.page import ReportInputs, build_report
from collbench.results.row import ResultRow
from collbench.tuning.pipeline import TuneConfig, decide

NOW = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.timezone.utc)


def _two_algorithms() -> list[ResultRow]:
    # Recursive doubling (3 steps) is faster below ~430 KiB, the ring (14 steps, 1.75 n bytes) above.
    rows = make_rows("ring", 8, 10.0, 1e-3 / 5, 0.0, noise=0.0, seed=0)
    return rows + make_rows("recursive-doubling", 8, 10.0, 1e-3 / 5, 0.0, noise=0.0, seed=0)


def _crossover_items(html: str) -> list[tuple[str, int, str]]:
    return [
        (below, int(size), above)
        for below, size, above in re.findall(r"<li>([\w-]+) until [^(]+\((\d+) B\), then ([\w-]+)</li>", html)
    ]


def test_the_marked_crossover_is_the_profiles_boundary() -> None:
    rows = _two_algorithms()
    decided = decide(TuneConfig(command="collbench tune"), rows, topology=None, layout=None, notes=[])
    (low, high) = decided.profile.rules
    html = build_report(ReportInputs(rows=tuple(rows), profile=decided.profile), now=NOW)
    assert _crossover_items(html) == [(low.algo, high.min_bytes, high.algo)]
    assert "not marked" not in html


def test_a_crossover_the_rules_contradict_is_not_marked_and_said() -> None:
    rows = _two_algorithms()
    decided = decide(TuneConfig(command="collbench tune"), rows, topology=None, layout=None, notes=[])
    low, high = decided.profile.rules
    # Rules that switch two measured sizes later than the models cross.
    boundary = 4 * high.min_bytes
    moved = (dataclasses.replace(low, max_bytes=boundary - 1), dataclasses.replace(high, min_bytes=boundary))
    shape = dataclasses.replace(decided.profile.rule_sets[0], rules=moved)
    profile = dataclasses.replace(decided.profile, rule_sets=(shape,))
    html = build_report(ReportInputs(rows=tuple(rows), profile=profile), now=NOW)
    assert _crossover_items(html) == []
    assert "the crossing is not marked" in html and "switch from recursive-doubling to ring at" in html


def test_an_unusable_fit_draws_no_curve_and_places_no_crossover() -> None:
    rows = _two_algorithms()
    # Recursive doubling measured falling with size: no non-decreasing model follows it.
    rows = [
        dataclasses.replace(r, time_us=1e5 / (1 + r.size_bytes) ** 0.3) if r.algo == "recursive-doubling" else r
        for r in rows
    ]
    html = build_report(ReportInputs(rows=tuple(rows)), now=NOW)
    # One dashed model curve per chart (busbw and time): the ring's.
    assert html.count('class="model"') == 2
    assert _crossover_items(html) == []
    decided = decide(TuneConfig(command="collbench tune"), rows, topology=None, layout=None, notes=[])
    assert find_crossovers(decided.fits) and not find_crossovers([f for f in decided.fits if f.usable])
