"""A fit that misses because its measured times fall as the size grows says where they fall.

The figures are a real sweep's (the 2-core development VM, 2 gloo ranks, ``collbench sweep --ranks 2
--algo ring,one-shot,native -b 16K -e 512K -f 2 --in-place``, 2026-11-29): one-shot's first quartiles,
the times fits use. Gloo's point-to-point exchanges of up to 64 KiB mostly took its slower path there
(benchmarks/README.md, bench_gloo_sweep section), so 128 KiB ran faster than 64 KiB.
"""

from __future__ import annotations

import numpy as np

from collbench.models.fit import fit_results, largest_fall
from tests.synthetic_rows import point_row

ONE_SHOT_P25_US = {
    16 << 10: 96.526,
    32 << 10: 89.222,
    64 << 10: 97.009,
    128 << 10: 61.714,
    256 << 10: 92.016,
    512 << 10: 176.757,
}


def _rows(times: dict[int, float], algo: str = "one-shot") -> list:
    return [point_row(algo, size, t, time_us_p25=t, stall_fraction=0.0) for size, t in times.items()]


def test_the_measured_fall_is_named_in_the_reason() -> None:
    (fit,) = fit_results(_rows(ONE_SHOT_P25_US), crossovers=False).fits
    assert not fit.usable
    why = fit.distrust()
    assert why.startswith("misses a point by")
    # 97.009 / 61.714 = 1.572: the time at 128 KiB is 36% below the one at 64 KiB.
    assert why.endswith(
        "; the measured time falls 36% as the size grows, from 97.01 us at 64 KiB to 61.71 us at 128 KiB"
    )
    # The miss is still reported as a miss: the fall explains it, and hides nothing.
    assert fit.max_abs_pct_error > 25 and fit.to_dict()["unusable_because"] == why


def test_a_miss_without_a_fall_says_nothing_of_one() -> None:
    # A step no single line follows, with times that never fall.
    step = {s: (40.0 if s < (128 << 10) else 160.0) for s in ONE_SHOT_P25_US}
    (fit,) = fit_results(_rows(step), crossovers=False, piecewise=False).fits
    assert not fit.usable
    assert "misses a point by" in fit.distrust() and "falls" not in fit.distrust()


def test_the_largest_fall_is_from_the_slowest_smaller_size() -> None:
    sizes = np.array([1, 2, 4, 8, 16], dtype=np.float64) * 1024
    times = np.array([10.0, 50.0, 45.0, 20.0, 60.0])
    assert largest_fall(sizes, times) == (
        "; the measured time falls 60% as the size grows, from 50 us at 2 KiB to 20 us at 8 KiB"
    )


def test_falls_within_the_median_bound_are_not_named() -> None:
    sizes = np.array([1, 2, 4], dtype=np.float64) * 1024
    assert largest_fall(sizes, np.array([10.0, 9.2, 30.0])) == ""  # 10.0 / 9.2 = 1.087 < 1.1
    assert largest_fall(sizes, np.array([10.0, 20.0, 30.0])) == ""
    assert largest_fall(sizes[:1], np.array([10.0])) == ""
