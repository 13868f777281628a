"""Fits of the new ops: barrier as a latency per round from its one 0-byte point, the data-moving ops
as alpha-beta lines, and an algorithm without a formula for an op skipped in one line."""

from __future__ import annotations

import dataclasses
import io

import pytest
from new_op_rows import DATA_OPS, barrier_rows, data_op_rows, priced_pairs, unpriced_pair
from rich.console import Console
from synthetic_rows import make_rows, point_row

from collbench.cli.render.models import render_fits
from collbench.errors import UserError
from collbench.models.costs import cost_terms
from collbench.models.fit import fit_results
from collbench.models.fit_points import PointSummaries
from collbench.models.fitted import Fit
from collbench.schedules.ops import Op

BARRIER_ALGOS = priced_pairs(Op.BARRIER)
DATA_PAIRS = [(op, algo) for op in DATA_OPS for algo in priced_pairs(op)]


def test_barrier_rows_are_one_point_at_0_bytes_and_it_is_data() -> None:
    """A barrier moves nothing whatever size a sweep names: its rows are one point of 0 bytes, whose
    time is the fastest row's, and that point is fitted (a 0-byte call of any other op is not)."""
    rows = barrier_rows("native", 4, 30.0, named_sizes=(0, 1024, 1 << 20))
    (point,) = PointSummaries().extend(rows).points()
    assert (point.op, point.size_bytes, point.rows, point.set_aside) == ("barrier", 0, 3, "")
    assert point.time_us == 30.0


def test_a_0_byte_call_of_an_op_that_moves_data_is_still_set_aside() -> None:
    (point,) = PointSummaries().extend([point_row("native", 0, 12.0, op="all-to-all", world_size=4)]).points()
    assert "0 bytes moves no data" in point.set_aside


def test_an_algorithm_without_a_formula_for_the_op_is_skipped_in_one_line() -> None:
    pair = unpriced_pair()
    if pair is None:
        pytest.skip("every algorithm has a formula for every op")
    op, algo = pair
    rows = [point_row(algo, size, 10.0 + size / 1e3, op=op.value, world_size=4) for size in (1024, 4096, 16384)]
    with pytest.raises(UserError, match=f"{op.value} {algo} gloo x4: no cost formula for {op.value}"):
        fit_results(rows)
    ring = make_rows("ring", 4, 10.0, 1e-3 / 5, noise=0.0, seed=1, in_place=(True,))
    report = fit_results(rows + ring)
    assert [f.algo for f in report.fits] == ["ring"]
    assert any(line.startswith(f"{op.value} {algo} gloo x4: no cost formula") for line in report.skipped)


@pytest.mark.parametrize("algo", BARRIER_ALGOS)
def test_a_barrier_fit_is_microseconds_per_round_and_claims_no_bandwidth(algo: str) -> None:
    rows = barrier_rows(algo, 8, 42.0, named_sizes=(0, 4096))
    (fit,) = fit_results(rows).fits
    rounds = cost_terms("barrier", algo, 8, 0.0).alpha
    assert rounds >= 1
    assert fit.alpha_us == pytest.approx(42.0 / rounds)
    assert fit.predict_us(0) == pytest.approx(42.0)
    assert fit.beta_gbps is None and fit.gamma_gbps is None
    assert (fit.min_bytes, fit.max_bytes, fit.points) == (0, 0, 1)
    assert fit.usable, fit.distrust()
    assert "latency only" in fit.note and "one point" in fit.note
    stored = fit.to_dict()
    assert stored["beta_gbps"] is None and stored["usable"] is True
    assert Fit.from_dict(stored).predict_us(0) == pytest.approx(42.0)


@pytest.mark.parametrize("algo", BARRIER_ALGOS)
def test_a_barrier_whose_only_point_is_stalled_is_skipped_saying_why(algo: str) -> None:
    (row,) = barrier_rows(algo, 4, 20.0)
    with pytest.raises(UserError, match=r"its one point is set aside .*stalled"):
        fit_results([dataclasses.replace(row, stall_fraction=0.5)])


@pytest.mark.parametrize("algo", BARRIER_ALGOS)
def test_a_barrier_fit_table_shows_microseconds_and_no_bandwidth(algo: str) -> None:
    report = fit_results(barrier_rows(algo, 4, 25.0))
    out = io.StringIO()
    Console(file=out, width=100, color_system=None).print(render_fits(report))
    text = out.getvalue()
    assert "barrier, gloo, 4 ranks: latency only" in text
    assert "us/round" in text and "GB/s" not in text.split("fitted cost models")[1].split("no crossovers")[0]


@pytest.mark.skipif(len(BARRIER_ALGOS) < 2, reason="fewer than two barrier algorithms registered yet")
def test_barrier_algorithms_are_compared_by_time_with_no_crossover() -> None:
    rows = [row for i, algo in enumerate(BARRIER_ALGOS) for row in barrier_rows(algo, 8, 20.0 + 5 * i)]
    report = fit_results(rows)
    assert sorted(f.algo for f in report.fits) == sorted(BARRIER_ALGOS)
    assert report.crossovers == []
    out = io.StringIO()
    Console(file=out, width=100, color_system=None).print(render_fits(report))
    assert "crossover" not in out.getvalue()


@pytest.mark.parametrize(("op", "algo"), DATA_PAIRS)
def test_a_data_op_fit_finds_the_latency_and_bandwidth_its_rows_were_timed_with(op: Op, algo: str) -> None:
    alpha, beta = 15.0, 1e-3 / 4.0
    (fit,) = fit_results(data_op_rows(op, algo, 4, alpha, beta, seed=5), piecewise=False).fits
    assert fit.usable, fit.distrust()
    assert fit.gamma_us_per_byte is None and not fit.gamma_folded
    assert fit.beta_us_per_byte == pytest.approx(beta, rel=0.05)
    assert fit.alpha_us == pytest.approx(alpha, rel=0.25)
