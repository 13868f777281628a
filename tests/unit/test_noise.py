"""The stall detector and the candidate statistics (results/noise.py) on synthetic samples."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from synthetic_rows import point_row

from collbench.results.noise import (
    detect_stalls,
    min_of_medians,
    quantile,
    row_stalled,
    stall_fraction,
    trimmed_mean,
    two_modes,
)
from collbench.results.row import ResultRow
from collbench.runtime.sweep.stalls import stall_report


def make_row(algo: str, size: int, time_us: float, **extra: object) -> ResultRow:
    return point_row(algo, size, time_us, **extra)


def _samples(n: int, stalled: int, seed: int = 0) -> list[float]:
    """``n`` calls around 100 us (+-20%), ``stalled`` of them waiting a 4 ms scheduler tick on top."""
    rng = random.Random(seed)
    fast = [100.0 * (1.0 + 0.2 * rng.random()) for _ in range(n - stalled)]
    slow = [4000.0 + 100.0 * rng.random() for _ in range(stalled)]
    mixed = fast + slow
    rng.shuffle(mixed)
    return mixed


@pytest.mark.parametrize("stalled", [0, 1, 5, 37, 60, 90])
def test_stall_fraction_recovers_the_known_fraction(stalled: int) -> None:
    samples = _samples(100, stalled, seed=stalled)
    assert stall_fraction(samples) == pytest.approx(stalled / 100)


def test_jitter_within_three_times_is_not_a_stall() -> None:
    samples = [100.0, 150.0, 250.0, 290.0, 120.0] * 20
    verdict = detect_stalls(samples)
    assert verdict.fraction == 0.0
    assert not verdict.stalled


def test_stall_regime_is_marked_from_five_percent() -> None:
    assert not detect_stalls(_samples(100, 4)).stalled
    assert detect_stalls(_samples(100, 5)).stalled


def test_two_modes_found_with_a_gap_and_enough_on_each_side() -> None:
    # 30% at 2.5x the rest: no iteration reaches 3x the fastest, but the times are two groups.
    samples = [100.0] * 70 + [250.0] * 30
    assert stall_fraction(samples) == 0.0
    assert two_modes(samples)
    assert detect_stalls(samples).stalled
    # One lone slow call is a tail, not a mode.
    assert not two_modes([100.0] * 99 + [250.0])
    # A smooth spread has no gap.
    assert not two_modes([100.0 + i for i in range(100)])


@given(st.lists(st.floats(min_value=1.0, max_value=1e6), min_size=1, max_size=200))
def test_stall_fraction_is_a_fraction_and_never_counts_the_fastest(samples: list[float]) -> None:
    fraction = stall_fraction(samples)
    assert 0.0 <= fraction < 1.0


def test_statistics_on_a_known_sample() -> None:
    xs = [float(v) for v in range(1, 11)]  # 1..10
    assert quantile(xs, 0.5) == pytest.approx(5.5)
    assert quantile(xs, 0.25) == pytest.approx(3.25)
    assert quantile(xs, 0.0) == 1.0
    assert quantile(xs, 1.0) == 10.0
    assert trimmed_mean(xs, 0.2) == pytest.approx(5.5)  # 3..8
    assert trimmed_mean([1.0, 1.0, 1.0, 1.0, 100.0], 0.2) == pytest.approx(1.0)
    assert min_of_medians([[5.0, 6.0, 7.0], [1.0, 2.0, 30.0], []]) == 2.0
    with pytest.raises(ValueError):
        quantile([], 0.5)
    with pytest.raises(ValueError):
        quantile(xs, 1.5)


def test_lower_quantile_ignores_stalls_that_move_the_median() -> None:
    samples = _samples(200, 90, seed=3)  # 45% stalled: the median sits near the stall mode's edge
    assert quantile(samples, 0.25) < 130.0
    assert quantile(samples, 0.5) > 115.0


def test_stall_report_names_the_worst_points() -> None:
    rows = [
        make_row("ring", 16384, 100.0, stall_fraction=0.37),
        make_row("ring", 1024, 50.0, stall_fraction=0.01),
        make_row("native", 16384, 90.0, stall_fraction=0.0, bimodal=True),
    ]
    assert [row_stalled(r) for r in rows] == [True, False, True]
    lines = stall_report(rows)
    assert lines[0].startswith("2 of 3 points stalled")
    assert lines[1] == "most stalled (share of iterations >3x the fastest): all-reduce ring at 16 KiB (in place): 37%"
    assert "two modes" in lines[2]
    assert stall_report([rows[1]]) == []
