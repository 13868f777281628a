"""Result rows whose p50/min/max come from sampled iterations, for the compare tests."""

from __future__ import annotations

import numpy as np

from collbench.results.row import ResultRow

SIZES = [2**k for k in range(8, 25)]
SLOW_SIZES = {2**k for k in (12, 13, 14, 20, 21)}


def sampled_row(
    rng: np.random.Generator, size: int, base_us: float, *, iters: int = 50, jitter: float = 0.05, **kw: object
) -> ResultRow:
    """A row whose p50/min/max/mean come from ``iters`` samples with log-normal jitter, as a sweep
    would record them from its per-iteration times."""
    samples = base_us * np.exp(rng.normal(0.0, jitter, iters))
    fields: dict[str, object] = {
        "op": "all-reduce",
        "algo": "ring",
        "backend": "gloo",
        "world_size": 4,
        "dtype": "float32",
        "redop": "sum",
        "in_place": False,
        "size_bytes": size,
        "count": size // 4,
        "iters": iters,
        "time_us": float(np.median(samples)),
        "time_us_mean": float(samples.mean()),
        "time_us_min": float(samples.min()),
        "time_us_max": float(samples.max()),
        "algbw_gbps": 0.0,
        "busbw_gbps": 0.0,
        "wrong": 0,
    }
    fields.update(kw)
    return ResultRow(**fields)  # type: ignore[arg-type]


def two_runs(seed: int, slow: float = 1.10) -> tuple[list[ResultRow], list[ResultRow]]:
    rng = np.random.default_rng(seed)
    base, new = [], []
    for algo in ("ring", "recursive-doubling"):
        for s in SIZES:
            t = 20.0 + s / 2e3
            base.append(sampled_row(rng, s, t, algo=algo))
            factor = slow if (algo == "ring" and s in SLOW_SIZES) else 1.0
            new.append(sampled_row(rng, s, t * factor, algo=algo))
    return base, new
