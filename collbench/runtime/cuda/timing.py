"""Times of GPU work from CUDA events on the current stream (the IterationTimer for CUDA).

Without graphs, iterations are timed in rounds of up to ``ROUND_ITERS``, back to back: one event
before the first iteration and one after each round's last, so a round takes ``elapsed(e[k], e[k+1])``,
gaps included (a GPU waiting for the host or for another rank is part of the collective's time).
That is how nccl-tests times its loop (``BenchTime`` in NVIDIA/nccl-tests src/common.cu: the ``-n``
iterations are launched back to back inside one timer, then the stream is synchronised and the
elapsed time divided by the iterations). An event recorded after every iteration, as this timer did
before, puts a host call (torch's ``Event.record``, a ``cudaEventRecord``) between every two
collectives, and a GPU that finishes a small collective sooner than the host issues the next one
waits for it: each iteration's time then included that call. A round of ``k`` iterations pays for
one record instead of ``k``. Each round gives one sample, its mean time per iteration
(:meth:`CudaEventTimer.sample_iters` says how many iterations each covers): single iterations are
not timed, so a row's spread (min, max, p25, stalls) is over rounds. Where the host issues calls more
slowly than the GPU runs them (torch's dispatch of a small collective), the time is the host's pace
per call, as nccl-tests' is without ``-G``; ``--cuda-graph`` takes the host out.

torch's collectives run on NCCL's own stream but make the current stream wait for them
(``async_op=False``), so the events close after the collective has finished.

With ``cuda_graph=True`` the timed iterations are captured into one CUDA graph and the graph is
launched, as nccl-tests' ``-G`` does, so the host's launch cost leaves small-message latency. Events
recorded inside the graph (external event-record nodes, torch's ``Event(external=True)``) are nodes
the GPU runs with no host call between iterations, so they give per-iteration times; where this torch
cannot record them, the graph launch is timed as a whole and each iteration gets the mean.

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
ROUND_ITERS = 20
"""Iterations timed by one pair of events without graphs at most (nccl-tests' default ``-n``)."""
ROUNDS_NOTE = (
    f"CUDA events time rounds of up to {ROUND_ITERS} iterations, one pair around each as nccl-tests "
    "times its loop: a row's time_us, min, max, p25 and stalls are over the rounds' means per "
    "iteration, not single iterations"
)
"""What a sweep says once when rows are timed in rounds (GPU rows without ``--cuda-graph``)."""


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

    def sample_iters(self, iters: int) -> list[int]:
        """How many iterations each value :meth:`time_iterations` returns for ``iters`` covers, in order.

        Graphs: one each (events inside the graph). Otherwise rounds as even as can be, none longer
        than ``ROUND_ITERS`` (45 iterations: 15, 15, 15). Raises ValueError when ``iters < 1``.
        """
        if iters < 1:
            raise ValueError(f"iters must be >= 1, got {iters}")
        if self.cuda_graph:
            return [1] * iters
        return round_sizes(iters)

    def time_iterations(self, fn: Callable[[], object], iters: int) -> list[float]:
        """Microseconds per iteration of ``iters`` calls of ``fn``, one value per :meth:`sample_iters` entry.

        Raises ValueError when ``iters < 1``, RuntimeError without CUDA.
        """
        sizes = self.sample_iters(iters)
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("CudaEventTimer needs CUDA; use the CPU timer on machines without a GPU")
        if self.cuda_graph:
            return self._time_graph(fn, iters)
        return _time_rounds(fn, sizes)

    def release(self) -> None:
        """Destroy the graph kept for the last point (after its replays finish), if any.

        A graph captured on a communicator must be gone before that communicator is: from NCCL 2.26 its
        destruction polls until every graph referencing it is destroyed (src/init.cc,
        ``comm->localPersistentRefs``), so destroying a forced variant's process group while its
        graph lives hangs. ``CUDAGraph.reset`` deletes the instantiated graph (torch/cuda/graphs.py).
        """
        if self._graph is None:
            return
        graph = self._graph[1]
        self._graph = None
        import torch

        torch.cuda.synchronize()  # the last replay is done with the communicator
        graph.reset()

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


def round_sizes(iters: int) -> list[int]:
    """``iters`` split into the fewest rounds of at most ``ROUND_ITERS``, as even as can be (longer first)."""
    rounds = -(-iters // ROUND_ITERS)
    base, extra = divmod(iters, rounds)
    return [base + 1] * extra + [base] * (rounds - extra)


def _time_rounds(fn: Callable[[], object], sizes: list[int]) -> list[float]:
    """Microseconds per iteration of each round of ``sizes[k]`` calls, one event between rounds."""
    import torch

    events = [torch.cuda.Event(enable_timing=True) for _ in range(len(sizes) + 1)]
    events[0].record()
    for k, size in enumerate(sizes):
        for _ in range(size):
            fn()
        events[k + 1].record()
    events[-1].synchronize()
    return [events[k].elapsed_time(events[k + 1]) * 1000.0 / size for k, size in enumerate(sizes)]


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
