"""Result rows with times from a known cost model, for the fit and predict CLI tests."""

from __future__ import annotations

import numpy as np

from collbench.models.costs import cost_terms
from collbench.runtime.results import ResultRow


def make_rows(algo: str, p: int, alpha: float, beta: float, *, noise: float, seed: int) -> list[ResultRow]:
    rng = np.random.default_rng(seed)
    rows = []
    for s in [2**k for k in range(3, 28)]:
        t = cost_terms("all-reduce", algo, p, s).time_us(alpha, beta, 0.0) * (1 + rng.uniform(-noise, noise))
        rows.append(
            ResultRow(
                op="all-reduce",
                algo=algo,
                backend="gloo",
                world_size=p,
                dtype="float32",
                redop="sum",
                in_place=False,
                size_bytes=s,
                count=s // 4,
                iters=10,
                time_us=t,
                time_us_mean=t,
                time_us_min=t,
                time_us_max=t,
                algbw_gbps=0.0,
                busbw_gbps=0.0,
                wrong=0,
            )
        )
    return rows
