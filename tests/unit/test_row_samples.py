"""A row's standard error divides its spread by the timed samples, not the iterations behind them.

GPU rows without graphs are timed in rounds of up to 20 iterations, one pair of CUDA events around
each round (runtime/cuda/timing.py, as nccl-tests' BenchTime times its loop): the row's min, p25 and
max are then over rounds, and dividing the spread by sqrt(iterations) would understate the noise by
up to sqrt(20) against what the rounds can tell.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from collbench.report.compare import combine
from collbench.results.fields import FieldError
from collbench.results.row import ResultRow
from collbench.tuning.selection.points import measured_points


def _row(**changes: object) -> ResultRow:
    row = ResultRow(
        op="all-reduce",
        algo="native",
        backend="nccl",
        world_size=2,
        dtype="float32",
        redop="sum",
        in_place=False,
        size_bytes=1024,
        count=256,
        iters=400,
        time_us=20.0,
        time_us_mean=20.5,
        time_us_min=16.0,
        time_us_max=30.0,
        algbw_gbps=0.05,
        busbw_gbps=0.05,
        wrong=0,
    )
    return dataclasses.replace(row, **changes)  # type: ignore[arg-type]


def test_samples_default_to_iterations_and_follow_rounds() -> None:
    assert _row().samples == 400
    assert _row(timed_samples=20).samples == 20


def test_selection_noise_is_over_rounds_for_rows_timed_in_rounds() -> None:
    per_iteration = measured_points([_row()])["all-reduce"]
    in_rounds = measured_points([_row(timed_samples=20)])["all-reduce"]
    (point_iters,) = (pts[1024] for pts in per_iteration.values())
    (point_rounds,) = (pts[1024] for pts in in_rounds.values())
    spread = (20.0 - 16.0) / 20.0
    assert point_iters.noise == pytest.approx(spread / math.sqrt(400))
    assert point_rounds.noise == pytest.approx(spread / math.sqrt(20))


def test_compare_within_run_noise_is_over_rounds() -> None:
    spread = (20.0 - 16.0) / 20.0
    assert combine([_row()]).rel_error == pytest.approx(spread / math.sqrt(400))
    assert combine([_row(timed_samples=20)]).rel_error == pytest.approx(spread / math.sqrt(20))


def test_timed_samples_read_back_checked() -> None:
    data = _row(timed_samples=20).to_dict()
    assert ResultRow.from_dict(data).timed_samples == 20
    data["timed_samples"] = 0
    with pytest.raises(FieldError, match="timed_samples"):
        ResultRow.from_dict(data)
