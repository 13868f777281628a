"""Compiled plans kept for the life of the process: a call shape's schedule is built and compiled once.

Building a schedule and compiling a rank's plan from it costs O(the rank's steps) each time, and the
callers come back to the same shapes over and over: the DDP hook once per bucket shape and hook, the
Python API once per call, a sweep once per point and again in every round and tie round. So plans are
kept per :class:`PlanKey`, which holds everything the plan depends on: the algorithm and the
parameters that shape its schedule (segments, layout), the op, the element count, the world size,
the rank, the root, and the element and segment sizes the transfers are cut by. Not in it: the
dtype itself (two dtypes of one element size get the same plan, which holds no tensor), the device
(it matters through the segment size only, which the caller resolves), the process group (a runner
pairs a plan with its group; a plan serves every group of its size where this process has that rank).

The cache is bounded: least recently used plans go first once the plans held take more than
:data:`PLAN_CACHE_BYTES` of host memory (``schedule_runner.plan_bytes``, counted from above); a plan
larger than the whole bound is compiled and handed out but not kept.

:data:`PLANS` is the process's cache, module state on purpose: a plan's life is the process's, not
one hook's or one call's, and every value it holds is immutable. Lookups are thread-safe (the DDP
hook compiles in backward while the user's threads may call the API); two threads that miss the same
key at once both build, and one plan is kept.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collbench.layouts.model import Layout
from collbench.runtime.executor.schedule_runner import CompiledPlan, compile_plan, default_segment_bytes, plan_bytes
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op
from collbench.schedules.registry import get_algorithm

PLAN_CACHE_BYTES = 256 << 20
"""The most host memory the process's cached plans take together (256 MiB). A per-rank plan of
ring all-reduce at 16,384 ranks is about 2 x 16,384 steps of one send and one receive each: tens of
MiB; a job's bucket shapes and a sweep's points at the sizes it runs need far less."""


@dataclass(frozen=True, slots=True)
class PlanKey:
    """Everything a compiled plan depends on (module docstring)."""

    algo: str
    op: Op
    world_size: int
    count: int
    rank: int
    root: int
    segments: int
    """The schedule's pipeline segments (a segmented algorithm's builder parameter)."""
    layout: Layout | None
    """The layout the builder read (rings, trees, nodes), None for rank order."""
    elem_bytes: int
    segment_bytes: int
    """The executor's segment size for this call, resolved (a device's default filled in)."""

    @classmethod
    def as_measured(
        cls,
        algo: str,
        op: Op,
        world_size: int,
        count: int,
        rank: int,
        root: int,
        layout: Layout | None,
        elem_bytes: int,
        segment_bytes: int | None,
        device: Any,
        segments: int | None = None,
    ) -> PlanKey:
        """The key of a call as a sweep measures it: a segmented algorithm (the trees) pipelined one
        segment a ``segment_bytes`` of the message (``AlgorithmSpec.segments_for``) unless ``segments``
        says how many, and the executor's segments of ``segment_bytes``, the device's default where None.
        The sweep's points and the Python API's and DDP hook's rules build their keys here, so a rule
        runs the plan its row measured."""
        spec = get_algorithm(algo)
        if segments is None:
            segments = spec.segments_for(count * elem_bytes, segment_bytes)
        seg = segment_bytes or default_segment_bytes(device)
        return cls(spec.name, op, world_size, count, rank, root, segments, layout, elem_bytes, seg)


@dataclass(frozen=True, slots=True)
class CacheStats:
    hits: int
    misses: int
    plans: int
    held_bytes: int


def build_schedule(key: PlanKey) -> Schedule:
    """``key``'s schedule with ``key.rank``'s steps alone: building every rank's is O(world x steps)
    (ir.py), and a rank runs only its own. Raises NotApplicableError as ``AlgorithmSpec.build``."""
    spec = get_algorithm(key.algo)
    return spec.build(
        key.op, key.world_size, key.count, root=key.root, layout=key.layout, segments=key.segments, rank=key.rank
    )


class PlanCache:
    """Plans per :class:`PlanKey`, least recently used dropped first beyond ``max_bytes`` of plans."""

    def __init__(self, max_bytes: int = PLAN_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._plans: OrderedDict[PlanKey, tuple[CompiledPlan, int]] = OrderedDict()
        self._held_bytes = 0
        self._hits = 0
        self._misses = 0
        self._lock = threading.Lock()

    def plan(self, key: PlanKey, build: Callable[[], Schedule] | None = None) -> CompiledPlan:
        """The plan for ``key``: the kept one, or its schedule compiled for ``key.rank`` and kept.

        The schedule is ``build()``, by default :func:`build_schedule` of ``key`` (``key.rank``'s steps
        alone); it is built only on a miss, and what building raises passes through with nothing
        kept (NotApplicableError for a key no algorithm builds). Raises ValueError as
        ``compile_plan`` does.
        """
        with self._lock:
            found = self._plans.get(key)
            if found is not None:
                self._plans.move_to_end(key)
                self._hits += 1
                return found[0]
            self._misses += 1
        schedule = build() if build is not None else build_schedule(key)
        plan = compile_plan(schedule, rank=key.rank, segment_bytes=key.segment_bytes, elem_bytes=key.elem_bytes)
        size = plan_bytes(plan)
        if size > self.max_bytes:
            return plan
        with self._lock:
            if key not in self._plans:
                self._plans[key] = (plan, size)
                self._held_bytes += size
            while self._held_bytes > self.max_bytes:
                _, (_, dropped) = self._plans.popitem(last=False)
                self._held_bytes -= dropped
        return plan

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._misses, len(self._plans), self._held_bytes)

    def clear(self) -> None:
        """Drop every plan (tests, and a job that wants its memory back)."""
        with self._lock:
            self._plans.clear()
            self._held_bytes = 0


PLANS = PlanCache()
"""The process's plans (module docstring: why this one piece of module state)."""
