"""compare: a known 10% slowdown at some sizes is found; pure noise at the others is not."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sampled_rows import SIZES, SLOW_SIZES, sampled_row, two_runs

from collbench.errors import UserError
from collbench.report.compare import combine, compare_rows, parse_threshold


@pytest.mark.parametrize("seed", range(8))
def test_the_slowdown_is_found_and_the_noise_is_not(seed: int) -> None:
    base, new = two_runs(seed)
    result = compare_rows(base, new)
    assert len(result.changes) == 2 * len(SIZES) and result.only_base == result.only_new == 0
    flagged = {(c.algo, c.size_bytes) for c in result.changes if c.beyond_noise}
    assert flagged == {("ring", s) for s in SLOW_SIZES}
    regressed = {(c.algo, c.size_bytes) for c in result.regressions(0.05)}
    assert regressed == {("ring", s) for s in SLOW_SIZES}
    # A 10% slowdown does not fail a 15% threshold, however certain.
    assert result.regressions(0.15) == []
    for c in result.changes:
        if c.size_bytes in SLOW_SIZES and c.algo == "ring":
            assert abs(c.ratio - 1.10) < 3 * c.rel_error


def test_summary_per_op_and_algorithm() -> None:
    base, new = two_runs(0)
    summaries = {s.algo: s for s in compare_rows(base, new).summaries()}
    ring, rd = summaries["ring"], summaries["recursive-doubling"]
    assert ring.points == rd.points == len(SIZES)
    assert ring.worst.size_bytes in SLOW_SIZES and ring.worst.beyond_noise
    expected = 1.10 ** (len(SLOW_SIZES) / len(SIZES))
    assert abs(ring.geomean_ratio - expected) < 0.01
    assert abs(rd.geomean_ratio - 1.0) < 0.01 and rd.beyond_noise == 0


def test_combine_uncertainty_from_spread_and_repeats() -> None:
    rng = np.random.default_rng(3)
    one = sampled_row(rng, 1024, 100.0, iters=64)
    point = combine([one])
    assert point.time_us == one.time_us
    assert point.rel_error == pytest.approx((one.time_us - one.time_us_min) / one.time_us / 8.0)
    exact = [sampled_row(rng, 1024, t, jitter=0.0, iters=1) for t in (90.0, 100.0, 110.0)]
    repeated = combine(exact)
    assert repeated.time_us == pytest.approx(100.0)
    assert repeated.rel_error == pytest.approx(10.0 / 100.0 / math.sqrt(3))


def test_points_match_on_dtype_and_ranks_and_wrong_data_counts() -> None:
    rng = np.random.default_rng(5)
    base = [sampled_row(rng, s, 50.0) for s in (1024, 2048)]
    new = [sampled_row(rng, 1024, 50.0, wrong=3), sampled_row(rng, 2048, 50.0, dtype="float16")]
    result = compare_rows(base, new)
    assert [c.size_bytes for c in result.changes] == [1024]
    assert result.only_base == 1 and result.only_new == 1
    assert result.changes[0].newly_wrong and result.regressions(0.05) == list(result.changes)


def test_bad_inputs_are_user_errors() -> None:
    rng = np.random.default_rng(1)
    four = [sampled_row(rng, 1024, 50.0)]
    eight = [sampled_row(rng, 1024, 50.0, world_size=8)]
    with pytest.raises(UserError, match="different world sizes: BASE 4 ranks, NEW 8 ranks"):
        compare_rows(four, eight)
    other = [sampled_row(rng, 1024, 50.0, op="broadcast")]
    with pytest.raises(UserError, match="no point matches"):
        compare_rows(four, other)


@pytest.mark.parametrize(("text", "value"), [("5%", 0.05), (" 12.5% ", 0.125), ("0.05", 0.05)])
def test_threshold_parses(text: str, value: float) -> None:
    assert parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["5", "five", "-3%", "0%", "nan%", "2000%"])
def test_threshold_rejects(text: str) -> None:
    with pytest.raises(UserError, match="--fail-above"):
        parse_threshold(text)
