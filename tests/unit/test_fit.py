"""Fitting: recovery of known parameters, gamma, piecewise breakpoints, crossovers, round trips."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from synthetic_rows import make_rows

from collbench.errors import UserError
from collbench.models.costs import cost_terms
from collbench.models.crossover import find_crossovers
from collbench.models.fit import fit_results, median_abs_pct_error
from collbench.models.fitted import Fit
from collbench.results.row import ResultRow
from collbench.units import format_bytes


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovers_alpha_and_beta_with_5pct_noise(seed: int) -> None:
    alpha, beta = 12.0, 1e-3 / 3.5  # 12 us per step, 3.5 GB/s
    rows = make_rows("ring", 4, alpha, beta, 0.0, noise=0.05, seed=seed)
    (fit,) = fit_results(rows).fits
    assert fit.alpha_us == pytest.approx(alpha, rel=0.05)
    assert fit.beta_gbps == pytest.approx(3.5, rel=0.05)
    assert fit.gamma_folded and fit.gamma_gbps is None and "folded" in fit.note
    assert fit.segments == ()
    assert fit.median_abs_pct_error < 5 and fit.max_abs_pct_error < 12
    assert fit.r2 > 0.99


def test_gamma_is_told_apart_when_algorithms_differ() -> None:
    beta, gamma = 1e-3 / 10, 1e-3 / 20
    rows = make_rows("ring", 4, 20.0, beta, gamma, noise=0.02, seed=3)
    rows += make_rows("recursive-doubling", 4, 15.0, beta, gamma, noise=0.02, seed=4)
    report = fit_results(rows)
    assert len(report.fits) == 2
    for fit in report.fits:
        assert not fit.gamma_folded
        assert fit.gamma_gbps == pytest.approx(20, rel=0.15)
        assert fit.beta_gbps == pytest.approx(10, rel=0.1)


def test_piecewise_finds_a_planted_breakpoint() -> None:
    small = make_rows(
        "ring", 8, 3.0, 1e-3 / 2.0, 0.0, noise=0.02, seed=5, sizes=[2**k for k in range(3, 17)], in_place=(True,)
    )
    large = make_rows(
        "ring", 8, 12.0, 1e-3 / 11.0, 0.0, noise=0.02, seed=6, sizes=[2**k for k in range(17, 28)], in_place=(True,)
    )
    (fit,) = fit_results(small + large).fits
    # The planted data jump up by 60% at 128 KiB; the model is continuous and each piece spans at
    # least three sizes, so the hand-over lies between 64 KiB and 256 KiB and the model climbs through it.
    assert 2 <= len(fit.segments) <= 3
    assert 2**17 <= fit.segments[1].min_bytes <= 2**18
    assert fit.segments[0].to_dict()["beta_gbps"] == pytest.approx(2.0, rel=0.1)
    assert fit.segments[-1].to_dict()["beta_gbps"] == pytest.approx(11.0, rel=0.1)
    # Each piece has its own latency: the upper one's is the planted 12 us per step, not 0.
    assert fit.segments[0].alpha_us == pytest.approx(3.0, rel=0.1)
    assert fit.segments[-1].alpha_us == pytest.approx(12.0, rel=0.15)
    assert fit.median_abs_pct_error < 3 and fit.usable


def test_crossover_between_ring_and_recursive_doubling() -> None:
    alpha, beta = 10.0, 1e-3 / 5
    rows = make_rows("ring", 8, alpha, beta, 0.0, noise=0.0, seed=0)
    rows += make_rows("recursive-doubling", 8, alpha, beta, 0.0, noise=0.0, seed=0)
    report = fit_results(rows, piecewise=False)
    (cross,) = report.crossovers
    assert (cross.below, cross.above) == ("recursive-doubling", "ring")
    # Where 14 a + 1.75 n b == 3 a + 3 n b: n = 11 a / (1.25 b).
    expected = 11 * alpha / (1.25 * beta)
    assert cross.size_bytes == pytest.approx(expected, rel=0.02)
    by_algo = {f.algo: f for f in report.fits}
    for size, winner in ((cross.size_bytes * 2, "ring"), (cross.size_bytes / 2, "recursive-doubling")):
        assert min(by_algo, key=lambda algo: by_algo[algo].predict_us(size)) == winner
    assert find_crossovers(report.fits, world_size=64)[0].size_bytes != cross.size_bytes


def test_round_trip_and_prediction_at_another_world_size() -> None:
    rows = make_rows("ring", 4, 10.0, 1e-3 / 5, 0.0, noise=0.0, seed=0)
    (fit,) = fit_results(rows).fits
    again = Fit.from_dict(fit.to_dict())
    assert again.predict_us(1 << 20) == pytest.approx(fit.predict_us(1 << 20))
    expected = cost_terms("all-reduce", "ring", 64, 1 << 20).time_us(fit.alpha_us, fit.beta_us_per_byte, 0.0)
    assert fit.predict_us(1 << 20, world_size=64) == pytest.approx(expected)
    keys = set(fit.to_dict())
    assert {
        "op",
        "algo",
        "backend",
        "world_size",
        "alpha_us",
        "beta_gbps",
        "gamma_gbps",
        "r2",
        "median_abs_pct_error",
        "max_abs_pct_error",
        "min_bytes",
        "max_bytes",
        "segments",
    } <= keys
    assert median_abs_pct_error(fit, rows) < 1e-6


def test_a_stored_fit_is_what_its_file_form_reads_back() -> None:
    # Segments, a fitted gamma and a folded one: every per-byte cost a file holds as a bandwidth.
    low, high = [2**k for k in range(3, 17)], [2**k for k in range(17, 28)]
    rows = [
        *make_rows("ring", 4, 10.0, 1e-3 / 7, 1e-3 / 11, noise=0.01, seed=3),
        *make_rows("recursive-doubling", 4, 5.0, 1e-3 / 3, 1e-3 / 11, noise=0.01, seed=4),
        *make_rows("ring", 2, 10.0, 1e-3 / 7, 0.0, noise=0.01, seed=5, op="all-gather"),
        *make_rows("ring", 8, 3.0, 1e-3 / 2, noise=0.02, seed=5, sizes=low, op="all-gather"),
        *make_rows("ring", 8, 12.0, 1e-3 / 11, noise=0.02, seed=6, sizes=high, op="all-gather"),
    ]
    fits = fit_results(rows).fits
    assert any(f.segments for f in fits) and any(f.gamma_us_per_byte for f in fits)
    for fit in fits:
        stored = fit.as_stored()
        assert stored == Fit.from_dict(fit.to_dict())
        assert stored.to_dict() == fit.to_dict() and Fit.from_dict(stored.to_dict()) == stored


def test_groups_that_cannot_be_fitted() -> None:
    one_size = make_rows("ring", 4, 10.0, 1e-4, 0.0, noise=0.0, seed=0, sizes=[1024])
    with pytest.raises(UserError, match="at least 2 sizes"):
        fit_results(one_size)
    ok = make_rows("ring", 4, 10.0, 1e-4, 0.0, noise=0.0, seed=0)
    from dataclasses import replace

    odd = [replace(r, algo="mystery") for r in ok]
    report = fit_results(ok + odd)
    assert [f.algo for f in report.fits] == ["ring"]
    assert any("mystery" in s for s in report.skipped)


def with_stalls(rows: list[ResultRow], share: float, seed: int) -> tuple[list[ResultRow], set[int]]:
    """Rows with about ``share`` of them 10x slower and marked as their measurement marks a time among
    the stalls (60% of iterations >3x the fastest, which stays the undisturbed call's time: the p50 is
    a stall), and the sizes slowed."""
    from dataclasses import replace

    picked = set(np.random.default_rng(seed).choice(len(rows), round(share * len(rows)), replace=False).tolist())
    out = [
        replace(r, time_us=r.time_us * 10, time_us_min=r.time_us, stall_fraction=0.6)
        if i in picked
        else replace(r, stall_fraction=0.0)
        for i, r in enumerate(rows)
    ]
    return out, {rows[i].size_bytes for i in picked}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("piecewise", [True, False])
def test_stalled_points_are_set_aside_and_named(seed: int, piecewise: bool) -> None:
    alpha, beta = 12.0, 1e-3 / 3.5
    clean = make_rows("ring", 4, alpha, beta, 0.0, noise=0.05, seed=seed, in_place=(True,))
    rows, stalled = with_stalls(clean, 0.25, seed=100 + seed)
    (fit,) = fit_results(rows, piecewise=piecewise).fits
    assert fit.segments == ()  # no segment made up to chase the stalls
    assert fit.alpha_us == pytest.approx(alpha, rel=0.1)
    assert fit.beta_gbps == pytest.approx(3.5, rel=0.1)
    assert fit.outliers == len(stalled) and fit.points == len(rows) - len(stalled)
    assert fit.to_dict()["outliers"] == len(stalled) and Fit.from_dict(fit.to_dict()).outliers == len(stalled)
    said = (
        "1 point set aside as its own measurement marks it"
        if len(stalled) == 1
        else (f"{len(stalled)} points set aside as their own measurement marks them")
    )
    assert said in fit.note
    for size in stalled:
        stalled_note = "its only row stalled, the time among the stalls (at least 60% of iterations >3x the fastest)"
        assert f"{format_bytes(size)}: {stalled_note}" in fit.note
    # The figures are those of the points fitted, and they hold there.
    assert fit.max_abs_pct_error < 12 and fit.usable


def test_repeated_rows_of_a_size_are_one_point_at_their_smallest_time() -> None:
    """Rounds and repeats of a size are one point, timed as selection times it (the smallest p25):
    a slower round next to a clean one is not model error, and does not count as a point."""
    clean = make_rows("ring", 4, 12.0, 1e-3 / 3.5, 0.0, noise=0.0, seed=0, in_place=(True,))
    stalled = [dataclasses.replace(r, time_us=r.time_us * 10, in_place=False) for r in clean]
    (fit,) = fit_results(clean + stalled).fits
    (alone,) = fit_results(clean).fits
    assert fit.points == len(clean) and fit.outliers == 0
    assert (fit.alpha_us, fit.beta_us_per_byte) == pytest.approx((alone.alpha_us, alone.beta_us_per_byte))
    assert fit.median_abs_pct_error == pytest.approx(0.0, abs=1e-6)


def test_stalls_do_not_hide_a_planted_breakpoint() -> None:
    small = make_rows(
        "ring", 8, 3.0, 1e-3 / 2.0, 0.0, noise=0.02, seed=5, sizes=[2**k for k in range(3, 17)], in_place=(True,)
    )
    large = make_rows(
        "ring", 8, 12.0, 1e-3 / 11.0, 0.0, noise=0.02, seed=6, sizes=[2**k for k in range(17, 28)], in_place=(True,)
    )
    rows, stalled = with_stalls(small + large, 0.2, seed=7)
    (fit,) = fit_results(rows).fits
    clean = sorted({r.size_bytes for r in small + large} - stalled)
    last_small = max(s for s in clean if s < 2**17)
    first_large = min(s for s in clean if s >= 2**17)
    # The stalled points (set aside) cannot say where between the clean ones the regimes hand over.
    assert any(last_small < seg.min_bytes <= first_large for seg in fit.segments[1:])
    assert fit.segments[-1].to_dict()["beta_gbps"] == pytest.approx(11.0, rel=0.1)
    assert fit.outliers == len(stalled) and fit.usable
    for row in rows:
        if row.size_bytes not in stalled:
            assert fit.predict_us(row.size_bytes) == pytest.approx(row.time_us, rel=0.05)


def test_a_slow_point_whose_measurement_is_clean_is_data() -> None:
    """A point far above a line, but measured cleanly (no stall, rounds agreeing), is kept: the fit
    follows it or says it cannot, and never hides it by setting it aside."""
    from dataclasses import replace

    clean = make_rows("ring", 4, 12.0, 1e-3 / 3.5, 0.0, noise=0.0, seed=0, in_place=(True,))
    slow = {clean[i].size_bytes for i in (5, 11, 17)}
    rows = [replace(r, time_us=r.time_us * (10 if r.size_bytes in slow else 1), stall_fraction=0.0) for r in clean]
    (fit,) = fit_results(rows, piecewise=False).fits
    assert fit.outliers == 0 and fit.points == len(rows) and "set aside" not in fit.note
    assert not fit.usable and fit.max_abs_pct_error > 25
    assert "misses a point by" in fit.distrust() and "bound 25% at every point" in fit.distrust()
    assert fit.to_dict()["usable"] is False and fit.to_dict()["unusable_because"] == fit.distrust()
    assert Fit.from_dict(fit.to_dict()).distrust() == fit.distrust()


def test_the_bandwidth_regime_is_data_and_followed() -> None:
    """Two gloo ranks: ~180 us up to 128 KiB, then the memory-bound regime (650 us at 1 MiB, 1.25 ms at
    2 MiB), four rounds agreeing and no stall. Every point is kept, and the model is within 25% of each."""
    from synthetic_rows import point_row

    base = {512: 181, 1024: 178, 2048: 183, 4096: 185, 8192: 186, 16384: 190, 32768: 196, 65536: 205}
    base |= {131072: 228, 262144: 290, 524288: 402, 1048576: 652, 2097152: 1249}
    rows = [
        point_row("recursive-doubling", s, t * (1 + 0.02 * k), spread=0.05, stall_fraction=0.0, tune_round=k)
        for s, t in base.items()
        for k in range(4)
    ]
    (fit,) = fit_results(rows).fits
    assert fit.outliers == 0 and fit.points == len(base)
    assert fit.usable, fit.distrust()
    for size, time in base.items():
        assert abs(fit.predict_us(size) - time) <= 0.25 * time, size
    # The bandwidth in the largest messages is what they measure (about 2 GB/s), not 10-26 GB/s.
    assert fit.beta_gbps == pytest.approx(1e-3 / ((1249 - 652) / (2097152 - 1048576)), rel=0.25)


def test_an_unusable_fit_places_no_crossover() -> None:
    good = make_rows("ring", 8, 10.0, 1e-3 / 5, 0.0, noise=0.0, seed=0)
    # Falling with size: no non-decreasing model follows it.
    falling = [dataclasses.replace(r, algo="recursive-doubling", time_us=1e5 / (1 + r.size_bytes) ** 0.3) for r in good]
    report = fit_results(good + falling)
    by_algo = {f.algo: f for f in report.fits}
    assert by_algo["ring"].usable and not by_algo["recursive-doubling"].usable
    assert report.crossovers == []
    assert find_crossovers(report.fits) != []  # the unusable model would have crossed the usable one


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clean_data_sets_nothing_aside(seed: int) -> None:
    from collbench.models.piecewise import nnls_relative

    rows = make_rows("ring", 4, 12.0, 1e-3 / 3.5, 0.0, noise=0.05, seed=seed, in_place=(True,))
    (fit,) = fit_results(rows, piecewise=False).fits
    assert fit.outliers == 0 and "set aside" not in fit.note
    times = np.array([r.time_us for r in rows])
    terms = [cost_terms("all-reduce", "ring", 4, r.size_bytes) for r in rows]
    coef = np.array([(t.alpha, t.beta) for t in terms])
    plain, _ = nnls_relative(coef, times, times)
    assert (fit.alpha_us, fit.beta_us_per_byte) == tuple(plain)


def test_one_rank_groups_are_skipped_with_a_reason() -> None:
    four = make_rows("ring", 4, 10.0, 5.0, 0.0, noise=0.0, seed=0)
    # A one-rank run still takes time (a local copy), but no term of any cost model applies to it.
    rows = four + [dataclasses.replace(r, world_size=1) for r in four]
    report = fit_results(rows)
    assert [f.world_size for f in report.fits] == [4]
    assert any("x1" in s and "one rank" in s for s in report.skipped)
