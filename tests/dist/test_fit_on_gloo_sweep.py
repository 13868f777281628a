"""Fits trained on half the sizes of a real gloo sweep predict the other half (median error < 10%).

On a small shared VM a call sometimes stalls for milliseconds (a scheduler tick when an idle vCPU
wakes, or another process's burst), and under load more than half of a point's iterations can stall,
so the point's median lands on the stall. That is true of the held-out points too, which are the
ground truth here. The fit sets a point aside only where its own rows mark it stalled
(``fit_points``), and a stalled *held-out* point would still count as a miss. So each point is
represented by its first quartile (the time fits and decisions use), and the sweep is repeated with
each size keeping the lowest: stalls only ever add time, so the least-disturbed figure estimates the
undisturbed time that the model describes. (The median of 20-odd iterations on this VM still
wandered by 30-50% between runs at small sizes, which is noise in the ground truth, not model error.)
collbench's own ``ring`` is used rather than gloo's native all-reduce: on this VM native's medians
land on a ~4 ms stall at more than half the sizes even on a quiet machine. The same rule applies to training and
held-out sizes, and the 10% bound is unchanged.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.models.fit import fit_results, median_abs_pct_error
from collbench.results.noise import decision_time_us
from collbench.results.row import ResultRow
from collbench.runtime.sweep.plan import SweepConfig
from collbench.runtime.sweep.run import run_sweep

pytestmark = pytest.mark.dist

REPEATS = 3


def test_fit_on_half_the_sizes_predicts_the_other_half(tmp_path: Path) -> None:
    best: dict[int, ResultRow] = {}
    for repeat in range(REPEATS):
        config = SweepConfig(
            world_size=2,
            backend="gloo",
            ops=("all-reduce",),
            algos=("ring",),
            min_bytes=1024,
            max_bytes=4 << 20,
            step_factor=2**0.5,  # 25 sizes: the held-out median is over 12 points, not 6
            iters=None,  # -n auto: until the median is known to 2%, or the budget runs out
            point_budget_s=0.3,
            warmup=3,
            timeout_s=120.0,
            stream=tmp_path / f"sweep{repeat}.jsonl",
        )
        for row in run_sweep(config):
            # The time fits and decisions use (a row's p25), smallest over the repeats, as fit_results
            # combines rows of one size itself: the ground truth is the same statistic.
            if row.size_bytes not in best or decision_time_us(row) < decision_time_us(best[row.size_bytes]):
                best[row.size_bytes] = row
    rows = list(best.values())
    sizes = sorted(best)
    assert len(sizes) == 25
    train_sizes = set(sizes[::2])
    train = [r for r in rows if r.size_bytes in train_sizes]
    held_out = [r for r in rows if r.size_bytes not in train_sizes]
    # Default fit: the transport switches regime for large messages, which the piecewise fit finds.
    (fit,) = fit_results(train).fits
    assert fit.algo == "ring" and fit.world_size == 2
    err = median_abs_pct_error(fit, held_out)
    assert err < 10.0, f"held-out median error {err:.1f}%; fit {fit.to_dict()}"
