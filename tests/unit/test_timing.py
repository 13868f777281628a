"""Timing helpers: slowest rank per iteration, summaries, the median's interval, and -n auto decisions."""

from __future__ import annotations

import random

import pytest

from collbench.runtime.executor.timing import (
    AutoIters,
    CpuTimer,
    make_timer,
    median_ci,
    slowest_rank,
    summarize,
)


def test_slowest_rank_takes_the_max_per_iteration() -> None:
    assert slowest_rank([[1.0, 5.0, 2.0], [3.0, 1.0, 2.5]]) == [3.0, 5.0, 2.5]
    with pytest.raises(ValueError, match="different numbers"):
        slowest_rank([[1.0], [1.0, 2.0]])


def test_summarize_keeps_p50_mean_min_max_and_iterations() -> None:
    s = summarize([4.0, 1.0, 3.0, 2.0, 100.0])
    assert (s.iters, s.time_us, s.time_us_min, s.time_us_max) == (5, 3.0, 1.0, 100.0)
    assert s.time_us_mean == pytest.approx(22.0)
    with pytest.raises(ValueError):
        summarize([])


def test_median_interval_brackets_the_median_and_narrows_with_samples() -> None:
    rng = random.Random(0)
    small = [rng.lognormvariate(0, 0.3) for _ in range(30)]
    large = [rng.lognormvariate(0, 0.3) for _ in range(3000)]
    for xs in (small, large):
        lo, hi = median_ci(xs)
        med = sorted(xs)[len(xs) // 2]
        assert lo <= med <= hi
    assert median_ci(large)[1] - median_ci(large)[0] < median_ci(small)[1] - median_ci(small)[0]
    assert median_ci([5.0]) == (5.0, 5.0)


def test_auto_iters_stops_when_the_median_is_known() -> None:
    policy = AutoIters(budget_s=10.0)
    assert policy.next_batch([], 0.0) == policy.min_iters
    steady = [100.0] * 40
    assert policy.next_batch(steady, 0.004) == 0


def test_auto_iters_grows_batches_while_noisy_and_respects_the_budget() -> None:
    rng = random.Random(1)
    noisy = [rng.uniform(50.0, 150.0) for _ in range(10)]
    policy = AutoIters(budget_s=1.0, batch_s=0.2)
    batch = policy.next_batch(noisy, 0.001)
    assert batch == 10  # doubles the sample
    # Large messages: a batch never outruns the per-batch time or the budget.
    slow = [rng.uniform(50_000.0, 150_000.0) for _ in range(6)]
    assert 1 <= policy.next_batch(slow, 0.6) <= 2
    assert policy.next_batch(slow, 1.0) == 0
    assert AutoIters(max_iters=10).next_batch(noisy, 0.0) == 0


def test_auto_iters_gives_small_messages_many_iterations() -> None:
    rng = random.Random(2)
    policy = AutoIters(budget_s=0.5)
    samples: list[float] = []
    while (batch := policy.next_batch(samples, sum(samples) * 1e-6)) > 0:
        samples.extend(rng.lognormvariate(3.0, 0.5) for _ in range(batch))
    assert len(samples) > 1000 or policy.precise_enough(samples)
    assert policy.precise_enough(samples)


def test_cpu_timer_times_every_call() -> None:
    calls: list[int] = []
    times = CpuTimer().time_iterations(lambda: calls.append(1), 7)
    assert len(times) == 7 and len(calls) == 7
    assert all(t >= 0.0 for t in times)
    assert isinstance(make_timer("cpu"), CpuTimer)
