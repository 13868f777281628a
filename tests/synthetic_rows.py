"""Result rows whose times come from a known cost model, for the fit, predict and CLI tests."""

from __future__ import annotations

import numpy as np

from collbench.models.costs import cost_terms
from collbench.runtime.results import ResultRow

SIZES = [2**k for k in range(3, 28)]


def make_rows(
    algo: str,
    p: int,
    alpha: float,
    beta: float,
    gamma: float = 0.0,
    *,
    noise: float,
    seed: int,
    sizes: list[int] = SIZES,
    op: str = "all-reduce",
    in_place: tuple[bool, ...] = (False, True),
) -> list[ResultRow]:
    """One row per size and mode, timed by ``cost_terms`` with uniform relative noise of ``noise``."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in sizes:
        for mode in in_place:
            t = cost_terms(op, algo, p, s).time_us(alpha, beta, gamma) * (1 + rng.uniform(-noise, noise))
            rows.append(
                ResultRow(
                    op=op,
                    algo=algo,
                    backend="gloo",
                    world_size=p,
                    dtype="float32",
                    redop="sum",
                    in_place=mode,
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
