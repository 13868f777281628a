"""A point's samples are, per iteration, the slowest rank's, alike on every rank: over 3 gloo processes,
each timing its own iterations (a fake timer: rank r's iteration i takes a time set by r and i), through
the real control group's MAX all-reduce (timed._slowest_per_iteration, which replaced an all-gather of
every rank's samples to every rank)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from collbench.runtime.launch.ranks import RankContext, launch
from collbench.runtime.sweep import timed

pytestmark = pytest.mark.dist

ITERS = 6


class _RankTimer:
    """Rank r's iteration i lasts 100 + 10 * ((r + i) % 3) us: the slowest rank differs per iteration."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def sample_iters(self, iters: int) -> list[int]:
        return [1] * iters

    def time_iterations(self, fn: Callable[[], object], iters: int) -> list[float]:
        return [100.0 + 10.0 * ((self.rank + i) % 3) + self.rank * 0.5 for i in range(iters)]

    def release(self) -> None:
        pass


def _worker(ctx: RankContext, _payload: object) -> list[float]:
    point = timed.time_point(ctx, lambda: None, _RankTimer(ctx.rank), ITERS, 10.0)  # type: ignore[arg-type]
    return list(point.samples_us)


def test_every_rank_holds_the_slowest_ranks_time_per_iteration() -> None:
    results = launch(3, _worker, None, backend="gloo", timeout_s=120)
    expected = [max(100.0 + 10.0 * ((r + i) % 3) + r * 0.5 for r in range(3)) for i in range(ITERS)]
    assert results == [expected] * 3
