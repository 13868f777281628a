"""Timing GPU work in rounds: one pair of CUDA events around each round of iterations, as nccl-tests does.

nccl-tests (``BenchTime`` in NVIDIA/nccl-tests src/common.cu, every release to v2.19) launches its
``-n`` iterations back to back inside one timer and divides the elapsed time by them; it records no
event between two iterations. The contract faked here is CUDA's stream semantics as torch exposes
them (torch/cuda/streams.py, ``Event.record``/``elapsed_time``): work and event records issued by the
host run on the GPU in issue order, each starting when both the host has issued it and the GPU has
finished what came before; an event's time is when the GPU reaches it; every call the host makes
(torch's dispatch of a collective, ``Event.record``) costs host time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.distributed as dist

from collbench.runtime.cuda.timing import ROUND_ITERS, CudaEventTimer, round_sizes
from collbench.runtime.executor.timing import AutoIters, CpuTimer
from collbench.runtime.launch.ranks import RankContext
from collbench.runtime.sweep import timed


class FakeStream:
    """A host clock and a GPU clock: host calls take host time, GPU work runs in issue order."""

    def __init__(self, record_cost_us: float) -> None:
        self.host_us = 0.0
        self.gpu_us = 0.0
        self.record_cost_us = record_cost_us
        self.records = 0

    def issue(self, host_cost_us: float, gpu_cost_us: float) -> float:
        """The host spends ``host_cost_us`` issuing work the GPU then runs for ``gpu_cost_us``."""
        self.host_us += host_cost_us
        self.gpu_us = max(self.gpu_us, self.host_us) + gpu_cost_us
        return self.gpu_us

    def event(self, enable_timing: bool = False, external: bool = False) -> Any:
        stream = self

        class Event:
            at_us = 0.0

            def record(self) -> None:
                stream.records += 1
                self.at_us = stream.issue(stream.record_cost_us, 0.0)

            def synchronize(self) -> None:
                stream.host_us = max(stream.host_us, self.at_us)

            def elapsed_time(self, end: Any) -> float:
                return (end.at_us - self.at_us) / 1e3  # milliseconds, as torch's

        return Event()


@pytest.fixture
def fake_stream(monkeypatch: pytest.MonkeyPatch) -> FakeStream:
    stream = FakeStream(record_cost_us=4.0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "Event", stream.event)
    return stream


def collective(stream: FakeStream, dispatch_us: float, gpu_us: float) -> Callable[[], None]:
    def call() -> None:
        stream.issue(dispatch_us, gpu_us)

    return call


def test_one_pair_of_events_per_round_not_per_iteration(fake_stream: FakeStream) -> None:
    # Before: 46 records for 45 iterations (one after each). Now rounds of at most ROUND_ITERS.
    timer = CudaEventTimer()
    sizes = timer.sample_iters(45)
    assert sizes == [15, 15, 15] and max(sizes) <= ROUND_ITERS
    times = timer.time_iterations(collective(fake_stream, 1.0, 10.0), 45)
    assert fake_stream.records == len(sizes) + 1 == 4
    # GPU-bound (10 us of GPU per call, 1 us of host): the first round holds the first call's
    # dispatch, then every round's mean is the GPU's 10 us.
    assert times == pytest.approx([(1.0 + 15 * 10.0) / 15, 10.0, 10.0])


def test_a_host_call_per_iteration_no_longer_lands_in_small_messages(fake_stream: FakeStream) -> None:
    # 3 us of GPU per call, 2 us of torch's dispatch, 4 us per event record: a record after every
    # iteration made the GPU wait 6 us per iteration (dispatch + record). In a round of 20 the GPU
    # waits for the first call's dispatch only, then runs the 20 back to back.
    times = CudaEventTimer().time_iterations(collective(fake_stream, 2.0, 3.0), 20)
    assert fake_stream.records == 2
    assert times == pytest.approx([(2.0 + 20 * 3.0) / 20])


def test_rounds_are_even_and_cover_every_iteration() -> None:
    for iters in (1, 5, 19, 20, 21, 40, 41, 1000, 1003):
        sizes = round_sizes(iters)
        assert sum(sizes) == iters
        assert max(sizes) <= ROUND_ITERS and max(sizes) - min(sizes) <= 1
        assert len(sizes) == -(-iters // ROUND_ITERS)
    assert CudaEventTimer(cuda_graph=True).sample_iters(5) == [1] * 5
    assert CpuTimer().sample_iters(3) == [1, 1, 1]


def test_auto_iters_counts_iterations_not_rounds() -> None:
    policy = AutoIters(budget_s=10.0, max_iters=100)
    # Two rounds of 20 iterations at 10 us: 40 iterations done, so the next batch is 40, not 2.
    assert policy.next_batch([10.0, 12.0], 400e-6, iters_done=40) == 40
    assert policy.next_batch([10.0, 12.0], 400e-6, iters_done=100) == 0
    assert policy.next_batch([10.0, 12.0], 400e-6) == 2  # one iteration per sample, as before


class RoundTimer:
    """A timer of rounds of 4 iterations, 2 us per iteration, counting its batches."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def sample_iters(self, iters: int) -> list[int]:
        return [4] * (iters // 4) + ([iters % 4] if iters % 4 else [])

    def time_iterations(self, fn: Callable[[], object], iters: int) -> list[float]:
        self.batches.append(iters)
        return [2.0] * len(self.sample_iters(iters))


def test_the_sweep_keeps_the_iterations_behind_round_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(dist, "barrier", lambda group=None: None)
    monkeypatch.setattr(timed, "_slowest_per_iteration", lambda times, group: None)
    ctx = RankContext(rank=0, world_size=1, local_rank=0, backend="nccl", device=torch.device("cuda", 0), timeout_s=5)
    timer = RoundTimer()
    fixed = timed.time_point(ctx, lambda: None, timer, 10, 10.0)
    assert fixed.iters == 10 and fixed.samples_us == [2.0, 2.0, 2.0]
    auto = timed.time_point(ctx, lambda: None, timer, None, 10.0)
    assert auto.iters == sum(timer.batches[1:])
    # Batches double in iterations (5, 5, 10, 20...), not in rounds.
    assert timer.batches[1:4] == [5, 5, 10]
    assert len(auto.samples_us) == sum(len(timer.sample_iters(b)) for b in timer.batches[1:])
