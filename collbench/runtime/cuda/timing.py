"""Per-iteration times of GPU work from CUDA events on the current stream (the IterationTimer for CUDA).

Events are recorded back to back on the current stream: one before the first iteration and one after
each, so iteration ``i`` takes ``elapsed(e[i], e[i+1])``, gaps included (a GPU waiting for the host or
for another rank is part of the collective's time, as with nccl-tests). torch's collectives run on
NCCL's own stream but make the current stream wait for them (``async_op=False``), so the events
close after the collective has finished.

With ``cuda_graph=True`` the timed iterations are captured into one CUDA graph and the graph is
launched, as nccl-tests' ``-G`` does, so the host's launch cost leaves small-message latency. Events
recorded inside the graph (external event-record nodes, torch's ``Event(external=True)``) still give
per-iteration times; where this torch cannot record them, the graph launch is timed as a whole and
each iteration gets the mean.

One graph per timed function: ``-n auto`` times a point in several batches, and capturing anew for
each would re-time graph instantiation and upload (the first launch of a graph uploads it). The
graph is captured once, with at least ``MIN_GRAPH_ITERS`` iterations, launched once untimed, and
replayed for every batch (as many launches as the batch needs; extra iterations are not kept).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

MAX_GRAPH_ITERS = 1024
"""Iterations captured in one graph at most; more are timed as several launches of it."""
MIN_GRAPH_ITERS = 16
"""Iterations captured in one graph at least, so that later, larger batches need few launches."""


class CudaEventTimer:
    """Times ``fn`` with CUDA events on the current stream; optionally inside a CUDA graph.

    ``fn`` must have run at least once before (warm-up): communicators and caches must exist before a
    graph is captured, and NCCL cannot create a communicator inside a capture.
    """

    def __init__(self, cuda_graph: bool = False) -> None:
        self.cuda_graph = cuda_graph
        self._graph: tuple[Callable[[], object], Any, list[Any] | None, int] | None = None
        self.captures = 0
        """Graphs captured so far (one per timed function)."""

    def time_iterations(self, fn: Callable[[], object], iters: int) -> list[float]:
        """Microseconds of each of ``iters`` calls of ``fn``. Raises ValueError when ``iters < 1``."""
        if iters < 1:
            raise ValueError(f"iters must be >= 1, got {iters}")
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("CudaEventTimer needs CUDA; use the CPU timer on machines without a GPU")
        if self.cuda_graph:
            return self._time_graph(fn, iters)
        return _time_stream(fn, iters)

    def _time_graph(self, fn: Callable[[], object], iters: int) -> list[float]:
        graph, events, size = self._graph_for(fn, iters)
        times: list[float] = []
        while len(times) < iters:
            times.extend(_replay(graph, events, size))
        return times[:iters]

    def _graph_for(self, fn: Callable[[], object], iters: int) -> tuple[Any, list[Any] | None, int]:
        """The graph of ``fn`` (captured on its first batch, then kept), its events and its iterations."""
        if self._graph is not None and self._graph[0] is fn:
            return self._graph[1:]
        # A new function: the previous point's graph (and the memory its pool holds) goes.
        self._graph = None
        size = min(MAX_GRAPH_ITERS, max(iters, MIN_GRAPH_ITERS))
        graph, events = _capture(fn, size)
        self.captures += 1
        _replay(graph, events, size)  # untimed: the first launch uploads the graph
        self._graph = (fn, graph, events, size)
        return graph, events, size


def _time_stream(fn: Callable[[], object], iters: int) -> list[float]:
    import torch

    events = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    events[0].record()
    for i in range(iters):
        fn()
        events[i + 1].record()
    events[-1].synchronize()
    return [events[i].elapsed_time(events[i + 1]) * 1000.0 for i in range(iters)]


def _external_events(n: int) -> list[Any] | None:
    import torch

    try:
        return [torch.cuda.Event(enable_timing=True, external=True) for _ in range(n)]
    except TypeError:  # torch before external events: time the whole graph instead
        return None


def _capture(fn: Callable[[], object], iters: int) -> tuple[Any, list[Any] | None]:
    """A graph of ``iters`` calls of ``fn``, with an event record node around each where torch can."""
    import torch

    events = _external_events(iters + 1)
    graph = torch.cuda.CUDAGraph()
    # Capture runs on a side stream; it must start after whatever the current stream has queued.
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        if events is not None:
            events[0].record()
        for i in range(iters):
            fn()
            if events is not None:
                events[i + 1].record()
    return graph, events


def _replay(graph: Any, events: list[Any] | None, iters: int) -> list[float]:
    import torch

    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    stop.record()
    stop.synchronize()
    if events is not None:
        try:
            return [events[i].elapsed_time(events[i + 1]) * 1000.0 for i in range(iters)]
        except RuntimeError:  # a driver that records no times in graph event nodes: use the whole launch
            log.debug("no per-iteration times from events inside the CUDA graph", exc_info=True)
    mean_us = start.elapsed_time(stop) * 1000.0 / iters
    return [mean_us] * iters
