"""A fit needs two points more than its parameters to be usable (issue 32, item 1): with no spare
point it meets every point whatever the machine did, and its 0% error says nothing."""

from __future__ import annotations

from synthetic_rows import make_rows

from collbench.models.fit import SPARE_POINTS, fit_results, parameters


def test_a_line_through_three_sizes_is_not_usable_and_four_are() -> None:
    three = make_rows("ring", 4, 10.0, 1e-4, noise=0.0, seed=0, sizes=[1 << 10, 1 << 14, 1 << 18])
    (fit,) = fit_results(three).fits
    assert fit.points == 3 and fit.max_abs_pct_error < 1e-6
    assert not fit.usable
    assert fit.distrust().startswith("3 points for 2 parameters: a fit needs at least 4")
    four = make_rows("ring", 4, 10.0, 1e-4, noise=0.0, seed=0, sizes=[1 << 10, 1 << 14, 1 << 18, 1 << 22])
    (fit,) = fit_results(four).fits
    assert fit.usable, fit.distrust()


def test_segments_are_chosen_with_points_to_spare() -> None:
    # Six sizes allow piecewise candidates; a two-segment model (4 parameters) would need 6 points and
    # has them, a three-segment one (6 parameters) would need 8 and is never chosen.
    rows = make_rows("ring", 4, 10.0, 1e-4, noise=0.05, seed=3, sizes=[1 << k for k in range(10, 22, 2)])
    (fit,) = fit_results(rows).fits
    assert fit.points >= parameters(max(len(fit.segments), 1)) + SPARE_POINTS
    assert len(fit.segments) <= 2
