"""Every piecewise fit is continuous and non-decreasing in message size (models/piecewise.py, fit.py).

Real costs do not drop when a message grows, so whatever the data, even data that falls with size,
the fitted model must not fall, nor jump where the segments hand over: at its own world size and at
any other it is evaluated at (the hand-over moves with the bytes per step, ``Fit.own_size``). A fit
that is usable is within 25% of every point it was made from; the constrained solver it rests on is
checked against a general-purpose one.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collbench.models.fit import fit_results
from collbench.models.fitted import Fit
from collbench.models.piecewise import switch_point
from collbench.results.row import ResultRow


def _rows(algo: str, sizes: list[int], times: list[float]) -> list[ResultRow]:
    return [
        ResultRow(
            op="all-reduce",
            algo=algo,
            backend="gloo",
            world_size=4,
            dtype="float32",
            redop="sum",
            in_place=True,
            size_bytes=s,
            count=max(s // 4, 1),
            iters=10,
            time_us=t,
            time_us_mean=t,
            time_us_min=t,
            time_us_max=t,
            algbw_gbps=0.0,
            busbw_gbps=0.0,
            wrong=0,
        )
        for s, t in zip(sizes, times, strict=True)
    ]


def _fit(algo: str, sizes: list[int], times: list[float]) -> Fit:
    report = fit_results(_rows(algo, sizes, times), crossovers=False)
    (fit,) = report.fits
    return fit


def _grid(fit: Fit) -> np.ndarray:
    lo, hi = max(fit.min_bytes // 4, 1), fit.max_bytes * 4
    return np.unique(np.geomspace(lo, hi, 400).astype(np.int64))


def assert_continuous_and_non_decreasing(fit: Fit, world_size: int | None = None) -> None:
    values = [fit.predict_us(float(s), world_size) for s in _grid(fit)]
    for a, b in itertools.pairwise(values):
        assert b >= a * (1 - 1e-9), (a, b)
    # Where the segments hand over at this world size: own_size is proportional to the size.
    scale = fit.own_size(float(1 << 20), world_size) / float(1 << 20)
    for lower, upper in zip(fit.segments, fit.segments[1:], strict=False):
        at = math.sqrt(max(lower.max_bytes, 1) * max(upper.min_bytes, 1)) / scale
        left = fit.predict_us(at * (1 - 1e-9), world_size)
        right = fit.predict_us(at * (1 + 1e-9), world_size)
        assert math.isclose(left, right, rel_tol=1e-6), (at, left, right)


def test_a_drop_in_the_data_becomes_a_flat_stretch_not_a_drop() -> None:
    # Slow small messages, then a regime twice as fast from 64 KiB (the kind of data that made the
    # old fits jump down by 2x), then bandwidth-bound growth.
    sizes = [2**k for k in range(8, 25)]
    times = [400.0 + s / 1e3 if s < 65536 else 200.0 + s / 2e3 for s in sizes]
    fit = _fit("ring", sizes, times)
    assert_continuous_and_non_decreasing(fit)
    # Whether one line or a few joined pieces explain this best is chosen by BIC on the joined model;
    # either way the model never falls across the drop.
    assert fit.predict_us(65536) >= fit.predict_us(32768)


def test_a_real_protocol_switch_is_kept_and_joined() -> None:
    sizes = [2**k for k in range(8, 25)]
    times = [20.0 + s / 5e3 if s < 65536 else 60.0 + s / 1e3 for s in sizes]
    fit = _fit("ring", sizes, times)
    assert len(fit.segments) > 1
    assert_continuous_and_non_decreasing(fit)
    assert fit.median_abs_pct_error < 10.0


def test_switch_point_is_the_geometric_middle() -> None:
    from collbench.models.piecewise import Piece

    assert switch_point(Piece(1, 1024, (0.0,), 0.0, 1), Piece(4096, 8192, (0.0,), 0.0, 1)) == 2048.0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    algo=st.sampled_from(["ring", "recursive-doubling", "tree", "native"]),
    first=st.integers(min_value=3, max_value=12),
    count=st.integers(min_value=6, max_value=12),
    times=st.lists(st.floats(min_value=1.0, max_value=1e5), min_size=12, max_size=12),
)
def test_every_fit_is_continuous_and_non_decreasing(algo: str, first: int, count: int, times: list[float]) -> None:
    sizes = [2 ** (first + i) for i in range(count)]
    fit = _fit(algo, sizes, times[:count])
    assert_continuous_and_non_decreasing(fit)
    if fit.usable:
        for size, time in zip(sizes, times, strict=False):
            assert abs(fit.predict_us(size) - time) <= 0.25 * time * (1 + 1e-9), (size, time)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    algo=st.sampled_from(["ring", "recursive-doubling", "tree", "two-tree", "rabenseifner", "native"]),
    count=st.integers(min_value=9, max_value=16),
    knee=st.integers(min_value=3, max_value=6),
    world=st.integers(min_value=2, max_value=4096),
    jitter=st.lists(st.floats(min_value=-0.1, max_value=0.1), min_size=16, max_size=16),
)
def test_usable_fits_stay_continuous_and_non_decreasing_at_every_world_size(
    algo: str, count: int, knee: int, world: int, jitter: list[float]
) -> None:
    # Latency-bound, then a protocol switch to a higher latency and bandwidth, measured with jitter.
    sizes = [2 ** (6 + 2 * i) for i in range(count)]
    times = [
        (30.0 + s / 2e3 if i < knee else 90.0 + s / 2e4) * (1 + j)
        for i, (s, j) in enumerate(zip(sizes, jitter, strict=False))
    ]
    fit = _fit(algo, sizes, times)
    assert_continuous_and_non_decreasing(fit, world)
    assert_continuous_and_non_decreasing(fit)
    for segment in fit.segments:
        assert segment.alpha_us >= 0 and segment.beta_us_per_byte >= 0


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    rows=st.integers(min_value=5, max_value=12),
    cols=st.integers(min_value=2, max_value=4),
)
def test_lsq_inequality_matches_a_general_solver(seed: int, rows: int, cols: int) -> None:
    from scipy.optimize import minimize

    from collbench.models.piecewise import lsq_inequality

    rng = np.random.default_rng(seed)
    e = rng.normal(size=(rows, cols))
    f = rng.normal(size=rows)
    g = rng.normal(size=(cols + 2, cols))
    x = lsq_inequality(e, f, g)  # x = 0 is feasible, so a solution exists
    assert np.all(g @ x >= -1e-9)
    reference = minimize(
        lambda v: float(np.sum((e @ v - f) ** 2)),
        np.zeros(cols),
        jac=lambda v: 2 * e.T @ (e @ v - f),
        constraints=[{"type": "ineq", "fun": lambda v: g @ v, "jac": lambda v: g}],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    ours, theirs = float(np.sum((e @ x - f) ** 2)), float(np.sum((e @ reference.x - f) ** 2))
    assert ours <= theirs + 1e-7 * max(1.0, theirs)
