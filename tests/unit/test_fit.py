"""Fitting: recovery of known parameters, gamma, piecewise breakpoints, crossovers, round trips."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from synthetic_rows import make_rows

from collbench.errors import UserError
from collbench.models.costs import cost_terms
from collbench.models.crossover import fastest, find_crossovers
from collbench.models.fit import fit_results, median_abs_pct_error
from collbench.models.fitted import Fit
from collbench.results.row import ResultRow


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
    # The planted data jump up by 60% at 128 KiB; the model is continuous (piecewise.chain_pieces), so
    # a short piece may climb from the first regime to the second before the second's own slope.
    assert 2 <= len(fit.segments) <= 3
    assert fit.segments[1].min_bytes == 2**17
    assert fit.segments[0].to_dict()["beta_gbps"] == pytest.approx(2.0, rel=0.1)
    assert fit.segments[-1].to_dict()["beta_gbps"] == pytest.approx(11.0, rel=0.1)
    assert fit.median_abs_pct_error < 3


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
    assert fastest(report.fits, cross.size_bytes * 2).algo == "ring"
    assert fastest(report.fits, cross.size_bytes / 2).algo == "recursive-doubling"
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


def with_stalls(rows: list[ResultRow], share: float, seed: int) -> tuple[list[ResultRow], int]:
    """Rows with about ``share`` of them 10x slower (a scheduler stall), and how many were slowed."""
    from dataclasses import replace

    picked = set(np.random.default_rng(seed).choice(len(rows), round(share * len(rows)), replace=False).tolist())
    out = [replace(r, time_us=r.time_us * 10) if i in picked else r for i, r in enumerate(rows)]
    return out, len(picked)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("piecewise", [True, False])
def test_stalls_are_set_aside_and_counted(seed: int, piecewise: bool) -> None:
    alpha, beta = 12.0, 1e-3 / 3.5
    clean = make_rows("ring", 4, alpha, beta, 0.0, noise=0.05, seed=seed, in_place=(True,))
    rows, stalled = with_stalls(clean, 0.25, seed=100 + seed)
    (fit,) = fit_results(rows, piecewise=piecewise).fits
    assert fit.segments == ()  # no segment made up to chase the stalls
    assert fit.alpha_us == pytest.approx(alpha, rel=0.1)
    assert fit.beta_gbps == pytest.approx(3.5, rel=0.1)
    assert fit.outliers == stalled
    assert fit.to_dict()["outliers"] == stalled and Fit.from_dict(fit.to_dict()).outliers == stalled
    assert f"{stalled} of {len(rows)} points set aside as outliers" in fit.note
    # Quality figures are on all points: a stall (model / measured = 0.1: 90% off) is the worst error.
    assert fit.points == len(rows) and fit.max_abs_pct_error > 85


def test_repeated_rows_of_a_size_are_one_point_at_their_smallest_time() -> None:
    """Rounds and repeats of a size are one point, timed as selection times it (the smallest p25):
    a stalled round next to a clean one is not model error, and does not count as a point."""
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
    # The break lies between the last clean point of the first regime and the first clean one of
    # the second: stalled points there (set aside) cannot say where in that gap it is.
    clean = sorted(r.size_bytes for r, c in zip(rows, small + large, strict=True) if r.time_us == c.time_us)
    last_small = max(s for s in clean if s < 2**17)
    first_large = min(s for s in clean if s >= 2**17)
    assert last_small < fit.segments[1].min_bytes <= first_large
    assert fit.segments[0].to_dict()["beta_gbps"] == pytest.approx(2.0, rel=0.1)
    assert fit.segments[-1].to_dict()["beta_gbps"] == pytest.approx(11.0, rel=0.1)
    assert fit.outliers == stalled


def test_never_more_than_a_third_set_aside() -> None:
    clean = make_rows("ring", 4, 12.0, 1e-3 / 3.5, 0.0, noise=0.0, seed=0, in_place=(True,))
    rows, stalled = with_stalls(clean, 0.4, seed=11)
    assert stalled > len(rows) // 3
    (fit,) = fit_results(rows, piecewise=False).fits
    assert fit.outliers == len(rows) // 3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clean_data_sets_nothing_aside(seed: int) -> None:
    from collbench.models.piecewise import nnls_relative, nnls_trimmed

    rows = make_rows("ring", 4, 12.0, 1e-3 / 3.5, 0.0, noise=0.05, seed=seed, in_place=(True,))
    (fit,) = fit_results(rows).fits
    assert fit.outliers == 0 and "outlier" not in fit.note
    times = np.array([r.time_us for r in rows])
    terms = [cost_terms("all-reduce", "ring", 4, r.size_bytes) for r in rows]
    coef = np.array([(t.alpha, t.beta) for t in terms])
    plain, sse = nnls_relative(coef, times, times)
    trimmed = nnls_trimmed(coef, times, times)
    assert trimmed.outliers == 0 and trimmed.sse == pytest.approx(sse, rel=1e-12)
    assert np.array_equal(trimmed.x, plain) and (fit.alpha_us, fit.beta_us_per_byte) == tuple(plain)


def test_one_rank_groups_are_skipped_with_a_reason() -> None:
    four = make_rows("ring", 4, 10.0, 5.0, 0.0, noise=0.0, seed=0)
    # A one-rank run still takes time (a local copy), but no term of any cost model applies to it.
    rows = four + [dataclasses.replace(r, world_size=1) for r in four]
    report = fit_results(rows)
    assert [f.world_size for f in report.fits] == [4]
    assert any("x1" in s and "one rank" in s for s in report.skipped)
