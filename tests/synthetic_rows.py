"""Result rows whose times come from a known cost model, for the fit, predict and CLI tests."""

from __future__ import annotations

import numpy as np

from collbench.models.costs import cost_terms
from collbench.results.row import ResultRow

SIZES = [2**k for k in range(3, 28)]


def point_row(
    algo: str,
    size: int,
    time_us: float,
    *,
    iters: int = 10,
    spread: float = 0.0,
    world_size: int = 2,
    op: str = "all-reduce",
    in_place: bool = True,
    wrong: int = 0,
    **extra: object,
) -> ResultRow:
    """One float32 sum row at ``time_us`` (min and max ``spread`` below and above it)."""
    return ResultRow(
        op=op,
        algo=algo,
        backend="gloo",
        world_size=world_size,
        dtype="float32",
        redop="sum",
        in_place=in_place,
        size_bytes=size,
        count=size // 4,
        iters=iters,
        time_us=time_us,
        time_us_mean=time_us,
        time_us_min=time_us * (1 - spread),
        time_us_max=time_us * (1 + spread),
        algbw_gbps=0.0,
        busbw_gbps=0.0,
        wrong=wrong,
        **extra,  # type: ignore[arg-type]
    )


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
            rows.append(point_row(algo, s, t, world_size=p, op=op, in_place=mode))
    return rows
