"""Timing of collective calls: per-iteration times, how many iterations, and the point's summary.

Conventions (nccl-tests' src/common.cu; docs/measuring.md says where collbench differs): warm-up is
not timed; ranks meet at a barrier before timing;
every rank times every iteration; an iteration's time is its slowest rank's (the collective is done
when the last rank is done); a point keeps p50, mean, min and max over iterations. A timer may time
several iterations as one sample (the CUDA timer's rounds): then a sample is their mean, its time the
slowest rank's mean, and the statistics are over samples (``IterationTimer.sample_iters``).

``-n auto`` runs batches until the median is known to within ``target_rel`` (2%): the confidence
interval of a median from order statistics needs no assumption about the distribution, which is
skewed by scheduler noise on a loaded machine.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch


class IterationTimer(Protocol):
    """Times ``iters`` back-to-back calls of ``fn``; returns microseconds per iteration, one value per sample."""

    def time_iterations(self, fn: Callable[[], object], iters: int) -> list[float]: ...

    def sample_iters(self, iters: int) -> list[int]:
        """How many of the ``iters`` calls each value of ``time_iterations`` covers, in order (summing to
        ``iters``); the same on every rank, so that ranks' samples pair up."""
        ...

    def release(self) -> None:
        """Drop whatever the timer keeps of the last timed function (a captured CUDA graph): called
        before the communicator that function ran on is destroyed."""
        ...


class CpuTimer:
    """A monotonic nanosecond clock around each call (``time.perf_counter_ns``)."""

    def time_iterations(self, fn: Callable[[], object], iters: int) -> list[float]:
        """Microseconds of each of ``iters`` calls of ``fn``."""
        clock = time.perf_counter_ns
        times: list[float] = []
        append = times.append
        for _ in range(iters):
            t0 = clock()
            fn()
            append((clock() - t0) / 1000.0)
        return times

    def sample_iters(self, iters: int) -> list[int]:
        """One iteration per sample: every call is timed on its own."""
        return [1] * iters

    def release(self) -> None:
        """Nothing is kept between calls."""


def make_timer(device: torch.device | str, cuda_graph: bool = False) -> IterationTimer:
    """The timer for collectives on ``device``: CUDA events on GPUs, the CPU clock otherwise.

    ``cuda_graph`` captures the iterations in a CUDA graph (GPU timer only; ignored on CPU).
    """
    if torch.device(device).type == "cuda":
        # Imported here only: the CUDA timer needs a GPU runtime the CPU path must not load.
        from collbench.runtime.cuda.timing import CudaEventTimer

        timer: IterationTimer = CudaEventTimer(cuda_graph=cuda_graph)
        return timer
    return CpuTimer()


@dataclass(frozen=True, slots=True)
class TimeSummary:
    """A point's times over iterations, each iteration timed by its slowest rank."""

    iters: int
    time_us: float
    """Median (p50)."""
    time_us_mean: float
    time_us_min: float
    time_us_max: float


def slowest_rank(per_rank: Sequence[Sequence[float]]) -> list[float]:
    """Per iteration, the largest time over ranks (all ranks ran the same number of iterations)."""
    if not per_rank:
        return []
    lengths = {len(times) for times in per_rank}
    if len(lengths) != 1:
        raise ValueError(f"ranks timed different numbers of iterations: {sorted(lengths)}")
    return [max(values) for values in zip(*per_rank, strict=True)]


def summarize(samples: Sequence[float]) -> TimeSummary:
    """p50, mean, min and max of per-iteration times (microseconds); ValueError when empty."""
    if not samples:
        raise ValueError("no iterations were timed")
    return TimeSummary(
        iters=len(samples),
        time_us=float(statistics.median(samples)),
        time_us_mean=float(statistics.fmean(samples)),
        time_us_min=float(min(samples)),
        time_us_max=float(max(samples)),
    )


def median_ci(samples: Sequence[float], z: float = 1.96) -> tuple[float, float]:
    """A distribution-free confidence interval of the median (about 95% for z=1.96).

    The number of samples below the median is Binomial(n, 1/2); the interval runs between the order
    statistics ``n/2 -+ z sqrt(n)/2``. With fewer than 6 samples it is the whole range.
    """
    xs = sorted(samples)
    n = len(xs)
    if n == 0:
        raise ValueError("no samples")
    half = z * math.sqrt(n) / 2
    lo = max(math.floor(n / 2 - half), 1)
    hi = min(math.ceil(n / 2 + half) + 1, n)
    return xs[lo - 1], xs[hi - 1]


@dataclass(frozen=True, slots=True)
class AutoIters:
    """How many iterations ``-n auto`` runs: until the median is known or the budget is spent."""

    target_rel: float = 0.02
    """Stop when the median's confidence interval is within +- this fraction of it."""
    budget_s: float = 0.5
    """Timed seconds a point may take (its last batch may overrun by at most ``batch_s``)."""
    min_iters: int = 5
    max_iters: int = 100_000
    batch_s: float = 0.2
    """Longest batch between two decisions (each decision is one small gather and broadcast)."""

    def next_batch(self, samples: Sequence[float], elapsed_s: float, iters_done: int | None = None) -> int:
        """Iterations to run next, given the slowest-rank samples so far; 0 to stop.

        ``samples`` are microseconds per iteration; ``iters_done`` the iterations they cover (None: one
        each). The median's interval needs ``min_iters`` samples, however many iterations they cover.
        """
        n = len(samples)
        done = n if iters_done is None else iters_done
        if n == 0:
            return self.min_iters
        if done >= self.max_iters or elapsed_s >= self.budget_s:
            return 0
        if n >= self.min_iters and self.precise_enough(samples):
            return 0
        per_iter_s = max(statistics.median(samples) * 1e-6, 1e-7)
        room = min(self.budget_s - elapsed_s, self.batch_s) / per_iter_s
        # Double the sample each time: the interval narrows like 1/sqrt(n), so a few decisions suffice.
        batch = min(done, int(room), self.max_iters - done)
        return max(batch, 1)

    def precise_enough(self, samples: Sequence[float]) -> bool:
        """Whether the median's confidence interval is within ``target_rel`` of it."""
        median = statistics.median(samples)
        if median <= 0:
            return True
        lo, hi = median_ci(samples)
        return (hi - lo) / 2 <= self.target_rel * median
