"""One captured CUDA graph per timed point, re-used across ``-n auto`` batches (runtime/cuda_timing).

Contracts faked here (torch/cuda/graphs.py): inside ``with torch.cuda.graph(g)`` work is captured,
not run; ``g.replay()`` launches everything captured (the first launch of an instantiated graph also
uploads it: cudaGraphUpload in the CUDA runtime API); events recorded during capture with
``Event(enable_timing=True, external=True)`` become event-record nodes that mark each replay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch

from collbench.runtime.cuda import timing as cuda_timing
from collbench.runtime.cuda.timing import MIN_GRAPH_ITERS, CudaEventTimer


class FakeCuda:
    """A GPU clock, graphs that record what is called during capture, and events on that clock."""

    def __init__(self) -> None:
        self.now_us = 0.0
        self.capturing: FakeGraph | None = None
        self.replays = 0
        self.log: list[str] = []

    def event(self, enable_timing: bool = False, external: bool = False) -> Any:
        cuda = self

        class Event:
            at = 0.0

            def record(self) -> None:
                if cuda.capturing is not None:
                    cuda.capturing.nodes.append(self._mark)
                else:
                    self._mark()

            def _mark(self) -> None:
                self.at = cuda.now_us

            def synchronize(self) -> None:
                pass

            def elapsed_time(self, end: Any) -> float:
                return (end.at - self.at) / 1e3

        return Event()

    @contextmanager
    def graph(self, g: FakeGraph) -> Iterator[None]:
        self.capturing = g
        try:
            yield
        finally:
            self.capturing = None


class FakeGraph:
    def __init__(self, cuda: FakeCuda) -> None:
        self.cuda = cuda
        self.nodes: list[Callable[[], None]] = []
        self.was_reset = False

    def replay(self) -> None:
        self.cuda.replays += 1
        for node in self.nodes:
            node()

    def reset(self) -> None:
        self.cuda.log.append("reset")
        self.was_reset = True
        self.nodes.clear()


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> FakeCuda:
    cuda = FakeCuda()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "Event", cuda.event)
    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: FakeGraph(cuda))
    monkeypatch.setattr(torch.cuda, "graph", cuda.graph)
    return cuda


def _collective(cuda: FakeCuda, cost_us: float) -> Callable[[], object]:
    def work() -> None:
        # Captured: becomes a node that advances the GPU clock on each replay.
        def run() -> None:
            cuda.now_us += cost_us

        if cuda.capturing is not None:
            cuda.capturing.nodes.append(run)
        else:
            run()

    return work


def test_one_graph_serves_every_batch_of_a_point(fake_cuda: FakeCuda) -> None:
    timer = CudaEventTimer(cuda_graph=True)
    work = _collective(fake_cuda, 3.0)
    assert timer.time_iterations(work, 3) == pytest.approx([3.0] * 3)
    assert (timer.captures, fake_cuda.replays) == (1, 2)  # the warm-up launch, then one timed
    assert timer.time_iterations(work, 40) == pytest.approx([3.0] * 40)
    # No new capture: ceil(40 / 16) more launches of the same graph, surplus iterations dropped.
    assert (timer.captures, fake_cuda.replays) == (1, 2 + -(-40 // MIN_GRAPH_ITERS))
    other = _collective(fake_cuda, 5.0)
    assert timer.time_iterations(other, 2) == pytest.approx([5.0, 5.0])
    assert timer.captures == 2  # the next point gets its own graph


def test_without_external_events_each_iteration_gets_the_launch_mean(
    fake_cuda: FakeCuda, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_external(enable_timing: bool = False, external: bool | None = None) -> Any:
        if external is not None:
            raise TypeError("unexpected keyword argument 'external'")  # torch before external events
        return fake_cuda.event(enable_timing)

    monkeypatch.setattr(torch.cuda, "Event", no_external)
    timer = CudaEventTimer(cuda_graph=True)
    assert timer.time_iterations(_collective(fake_cuda, 2.0), 4) == pytest.approx([2.0] * 4)
    assert cuda_timing.MAX_GRAPH_ITERS >= MIN_GRAPH_ITERS


def test_release_resets_the_kept_graph_after_its_replays(fake_cuda: FakeCuda, monkeypatch: pytest.MonkeyPatch) -> None:
    # What the sweep calls before a variant's communicator is destroyed (NativeGroups.before_destroy).
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: fake_cuda.log.append("synchronize"))
    timer = CudaEventTimer(cuda_graph=True)
    work = _collective(fake_cuda, 3.0)
    timer.time_iterations(work, 3)
    fake_cuda.log.clear()
    timer.release()
    assert fake_cuda.log == ["synchronize", "reset"]  # the replays finish, then the graph goes
    timer.release()  # nothing kept: nothing to do
    assert fake_cuda.log == ["synchronize", "reset"]
    assert timer.time_iterations(work, 3) == pytest.approx([3.0] * 3) and timer.captures == 2
