"""Fits of every published nccl-tests log in tests/fixtures/real: every row nccl-tests did not find
wrong is data, and a usable fit is within 25% of every point (SOURCES.md says where each log was published).

nccl-tests rows carry no stall figures and no rounds, so nothing marks a point but its size: a call
of 0 bytes moves no data (NCCL returns at once for a count of 0) and is the only point left out. A
log whose curve no continuous, non-decreasing piecewise model follows within the bound must say so
(not usable, with the reason), never leave points out to get there.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from pathlib import Path

import pytest

from collbench.errors import UserError
from collbench.importers.nccl_tests import read_nccl_tests
from collbench.models.fit import SPARE_POINTS, fit_results, parameters
from collbench.models.fitted import MEDIAN_ERROR_BOUND_PCT, POINT_ERROR_BOUND_PCT
from collbench.results.noise import decision_time_us

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
LOGS = sorted(REAL.glob("*.log"))


@pytest.mark.parametrize("path", LOGS, ids=[p.name for p in LOGS])
def test_a_log_is_fitted_from_every_validated_row(path: Path) -> None:
    # The one excerpt whose columns fit scatter and gather alike is fitted as the op it was (SOURCES.md).
    op = "gather" if path.name == "gather_perf-a100-2node-issue-excerpt.log" else None
    rows = read_nccl_tests(path, strict_op=False, notes=[], op=op)
    # nccl-tests writes #wrong 0 for a checked row and N/A (-1) where it did not check (-c 0): both
    # are data; a row it found wrong is not.
    validated = [r for r in rows if r.wrong <= 0 and r.time_us > 0]
    if not validated:
        with pytest.raises(UserError, match="failed validation"):
            fit_results(rows)
        return
    if len({r.size_bytes for r in validated if r.size_bytes > 0}) < 2:
        # A paste that kept one size (the rest "truncated") has no curve to fit, and says so.
        with pytest.raises(UserError, match="needs at least 2 sizes to fit, has 1"):
            fit_results(rows)
        return
    best: dict[tuple[str, str, int], dict[int, float]] = defaultdict(dict)
    for r in validated:
        at = best[(r.op, r.algo, r.world_size)]
        at[r.size_bytes] = min(decision_time_us(r), at.get(r.size_bytes, float("inf")))
    report = fit_results(rows)
    assert report.fits
    for fit in report.fits:
        measured = best[(fit.op, fit.algo, fit.world_size)]
        moving = {size: time for size, time in measured.items() if size > 0}
        # Every size that moved data is a point of the fit; only the 0-byte call is set aside.
        assert fit.points == len(moving)
        assert fit.outliers == len(measured) - len(moving)
        assert (fit.min_bytes, fit.max_bytes) == (min(moving), max(moving))
        errors = sorted(100 * abs(fit.predict_us(size) - time) / time for size, time in moving.items())
        assert max(errors) == pytest.approx(fit.max_abs_pct_error, rel=1e-6, abs=1e-9)
        if fit.usable:
            assert max(errors) <= POINT_ERROR_BOUND_PCT
            assert fit.median_abs_pct_error <= MEDIAN_ERROR_BOUND_PCT
        elif fit.points < parameters(max(len(fit.segments), 1)) + SPARE_POINTS:
            # Two sizes for a line's two parameters (the all-to-all excerpts): it meets both at 0%,
            # which says nothing, so it is not usable (issue 32), and says why.
            assert "points for 2 parameters: a fit needs at least 4" in fit.distrust()
        else:
            assert max(errors) > POINT_ERROR_BOUND_PCT or fit.median_abs_pct_error > MEDIAN_ERROR_BOUND_PCT
            assert "bound" in fit.distrust() and "measured" in fit.distrust()
        for segment in fit.segments:
            assert segment.alpha_us >= 0 and segment.beta_us_per_byte >= 0 and segment.offset_us == 0


def test_the_published_h100_log_is_followed_at_every_size() -> None:
    """The 2-node H100 log (16 ranks, 8 B to 8 GiB): usable, every piece with a latency of its own."""
    rows = read_nccl_tests(REAL / "all_reduce_perf-h100-2node-mpirun-gcp.log", strict_op=False, notes=[])
    (fit,) = fit_results(rows).fits
    assert fit.usable, fit.distrust()
    assert len(fit.segments) > 1 and all(s.alpha_us > 0 for s in fit.segments)
    # Larger messages never come out faster, here or on 1,024 ranks.
    for world in (16, 1024):
        times = [fit.predict_us(2.0**k, world) for k in range(3, 34)]
        assert all(b >= a for a, b in itertools.pairwise(times))
