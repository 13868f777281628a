"""The fixed rounds after the first measure only what is within reach of each size's fastest
(tuning/rounds.py ``within_reach``), and selection neither ties nor chooses what they left out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _launched_tune import SIZES, quick_tune_under_a_launcher
from synthetic_rows import point_row

from collbench.profile.rules import Variant
from collbench.results.row import ResultRow
from collbench.runtime.sweep import run as sweep_mod
from collbench.tuning.config import TuneConfig
from collbench.tuning.placement import Placement
from collbench.tuning.rounds import unsettled, within_reach
from collbench.tuning.selection import (
    Point,
    SelectionSettings,
    decide_at,
    in_round,
    measured_points,
)
from collbench.tuning.sweeps import fixed_rounds

TIMES = {
    # 1 KiB: tree fastest, ring 1% behind (a tie), rabenseifner 1.5x behind (close: its iterations
    # reach within 2x of tree's slowest), native and direct 5x behind (clearly: every iteration).
    ("tree", 1024): 50.0,
    ("ring", 1024): 50.5,
    ("rabenseifner", 1024): 75.0,
    ("native", 1024): 250.0,
    ("direct", 1024): 250.0,
    # 4 KiB: native fastest, every other within 2x of it.
    ("tree", 4096): 90.0,
    ("ring", 4096): 95.0,
    ("rabenseifner", 4096): 120.0,
    ("native", 4096): 80.0,
    ("direct", 4096): 150.0,
}


def _row(algo: str, size: int, t: float, spread: float = 0.05) -> ResultRow:
    return point_row(algo, size, t, iters=100, spread=spread)


def _round(index: int, pairs: Any = None) -> list[ResultRow]:
    keys = TIMES if pairs is None else [(a, s) for _, s, a in pairs]
    return in_round([_row(a, s, TIMES[a, s]) for a, s in keys], index)


def test_a_clearly_behind_algorithm_is_left_out_and_a_close_one_kept() -> None:
    (item,), left_out = within_reach(measured_points(_round(0)))
    assert item.op == "all-reduce"
    at_1k = {a for s, a in item.pairs if s == 1024}
    at_4k = {a for s, a in item.pairs if s == 4096}
    # 250 us * 0.95 = 237.5 > 2 * 52.5 (tree's slowest): out; 75 * 0.95 = 71.25 < 105: kept.
    assert at_1k == {"tree", "ring", "rabenseifner"}
    assert at_4k == {"tree", "ring", "rabenseifner", "native", "direct"}
    assert left_out == 2


def test_ties_are_still_within_reach() -> None:
    points = measured_points(_round(0))
    (tied,) = unsettled(points)
    (kept,), _ = within_reach(points)
    assert set(tied.pairs) <= set(kept.pairs)
    assert (1024, "ring") in tied.pairs and (1024, "tree") in tied.pairs


def test_a_stalled_or_wide_point_is_never_left_out() -> None:
    # Native's iterations span 0.2x..1.8x: its fastest (50 us) is not beyond 2x of tree's slowest.
    rows = in_round([_row("tree", 1024, 50.0), _row("native", 1024, 250.0, spread=0.8)], 0)
    _, left_out = within_reach(measured_points(rows))
    assert left_out == 0


def test_round_one_measures_only_the_pairs_within_reach(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []

    def fake_run_sweep(sweep: Any, progress: Any = None) -> list[ResultRow]:
        # Stands in for the ranks: every asked algorithm at every size, or the named points alone.
        calls.append(sweep)
        if sweep.only is None:
            return [_row(a, s, TIMES[a, s]) for a, s in TIMES if a in sweep.algos]
        return [_row(a, s, TIMES[a, s]) for _, s, a in sorted(sweep.only)]

    monkeypatch.setattr(sweep_mod, "run_sweep", fake_run_sweep)
    monkeypatch.setattr("collbench.tuning.sweeps.tune_candidates", lambda config, names: tuple(TIMES_ALGOS))
    config = TuneConfig(ranks=2, backend="gloo", quick=True, output=tmp_path / "p.yaml")
    notes: list[str] = []
    rows = fixed_rounds(config, Placement(), None, notes)
    assert calls[0].only is None  # round 0 measures everything
    for later in calls[1:]:
        assert later.only is not None
        assert ("all-reduce", 1024, "native") not in later.only
        assert ("all-reduce", 1024, "direct") not in later.only
        assert ("all-reduce", 1024, "rabenseifner") in later.only
        assert ("all-reduce", 4096, "direct") in later.only
    # Nothing measured is dropped: round 0's rows of native at 1 KiB stay.
    assert [r.tune_round for r in rows if (r.algo, r.size_bytes) == ("native", 1024)] == [0]
    rounds = config.depth.rounds
    assert any(f"left out {2 * (rounds - 1)} (size, algorithm) measurements" in n for n in notes), notes


TIMES_ALGOS = ("tree", "ring", "rabenseifner", "native", "direct")


def _point(t: float, by_round: dict[int, float], *, spread: float = 0.05, stalled: bool = False) -> Point:
    return Point(
        size_bytes=1024,
        time_us=t,
        time_us_min=t * (1 - spread),
        time_us_max=t * (1 + spread),
        iters=100,
        rounds=len(by_round),
        by_round=tuple(sorted(by_round.items())),
        stalled=stalled,
        between=1.5,  # rounds far apart: the bar is uncapped, past 5x
    )


def test_a_left_out_native_is_neither_tied_nor_chosen() -> None:
    """Native, 5x behind in round 0 and left out after, must not come back as the simpler choice of a
    tie when the fastest's later rounds are noisy enough to widen the bar past 5x."""
    ring = Variant("ring", None, "rank-order")
    native = Variant("native", None, "rank-order")
    here = {
        ring: _point(50.0, {0: 50.0, 1: 120.0, 2: 200.0}, spread=0.9, stalled=True),
        native: _point(250.0, {0: 250.0}),
    }
    chosen, tied = decide_at(here, None, SelectionSettings())
    assert chosen == ring and tied == ()


def test_a_variant_measured_in_every_round_is_tied_as_before() -> None:
    ring = Variant("ring", None, "rank-order")
    native = Variant("native", None, "rank-order")
    here = {
        ring: _point(50.0, {0: 50.0, 1: 120.0, 2: 200.0}, spread=0.9, stalled=True),
        native: _point(250.0, {0: 250.0, 1: 260.0, 2: 270.0}),
    }
    chosen, tied = decide_at(here, None, SelectionSettings())
    assert chosen == native and tied == (ring,)


def test_a_quick_tune_under_a_launcher_leaves_the_clearly_behind_out_and_keeps_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Native 6x behind rabenseifner, the others 3.6x. Round 1 (decided on rank 0 of a launcher's job
    and agreed) measures rabenseifner alone; the rows of round 0 stay in the results, and rabenseifner
    wins untied."""
    outcome, calls = quick_tune_under_a_launcher(tmp_path, monkeypatch)
    assert calls[0].only is None
    assert calls[1].only == {("all-reduce", s, "rabenseifner") for s in SIZES}
    algos = {r.algo for r in outcome.rows}
    assert {r.algo for r in outcome.rows if r.tune_round == 0} == algos  # nothing measured is dropped
    assert {r.algo for r in outcome.rows if r.tune_round == 1} == {"rabenseifner"}
    left_out = 2 * (len(algos) - 1)
    assert any(f"left out {left_out} (size, algorithm) measurements" in n for n in outcome.notes), outcome.notes
    for size in SIZES:
        rule = outcome.profile.select("all-reduce", size)
        assert rule.algo == "rabenseifner" and not rule.tie_with, rule
