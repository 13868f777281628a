"""Fits trained on half the sizes of a real gloo sweep predict the other half (median error < 10%)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.models.fit import fit_results, median_abs_pct_error
from collbench.runtime.sweep import SweepConfig, run_sweep

pytestmark = pytest.mark.dist


def test_fit_on_half_the_sizes_predicts_the_other_half(tmp_path: Path) -> None:
    config = SweepConfig(
        world_size=2,
        backend="gloo",
        ops=("all-reduce",),
        algos=("native",),
        min_bytes=1024,
        max_bytes=4 << 20,
        step_factor=2.0,
        iters=20,
        warmup=3,
        timeout_s=120.0,
        stream=tmp_path / "sweep.jsonl",
    )
    rows = run_sweep(config)
    sizes = sorted({r.size_bytes for r in rows})
    assert len(sizes) == 13
    train_sizes = set(sizes[::2])
    train = [r for r in rows if r.size_bytes in train_sizes]
    held_out = [r for r in rows if r.size_bytes not in train_sizes]
    # Default fit: gloo switches regime for large messages, which the piecewise fit finds.
    (fit,) = fit_results(train).fits
    assert fit.algo == "native" and fit.world_size == 2
    assert median_abs_pct_error(fit, held_out) < 10.0
