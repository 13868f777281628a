"""What an algorithm module exports: :class:`AlgorithmSpec`, its builder beside its cost formulas.

An algorithm is a builder ``(op, world_size, count, root=..., layout=..., segments=..., rank=...) ->
Schedule`` (``rank`` None: every rank's steps; a rank: only its own, see ``algorithms/_common.py``),
the set of ops it implements, and one closed-form cost per op. ``native`` (the backend's own
collective) has no builder. Each module in ``collbench/schedules/algorithms`` lists its specs in a
module-level ``SPECS`` tuple; ``registry.py`` names the modules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from collbench.errors import NotApplicableError
from collbench.layouts.model import Layout
from collbench.schedules.cost import CostFormulas
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op

MAX_SEGMENTS = 64
"""Pipelined schedules get one segment per ``segment_bytes``, up to this many (each is a step)."""


class Builder(Protocol):
    def __call__(
        self,
        op: Op,
        world_size: int,
        count: int,
        *,
        root: int = 0,
        layout: Layout | None = None,
        segments: int = 1,
        rank: int | None = None,
    ) -> Schedule: ...


@dataclass(frozen=True, slots=True)
class AlgorithmSpec:
    name: str
    ops: frozenset[Op]
    builder: Builder | None
    """None for ``native``: the backend runs it, there is no schedule."""
    summary: str
    """One line for ``--help`` and ``explain``."""
    costs: CostFormulas
    """The closed-form cost of each op, derived from ``builder`` (see ``collbench/models/costs.py``)."""
    segmented: bool = False
    """Whether ``segments`` changes the schedule (pipelined trees)."""
    needs_nodes: bool = False
    """Whether it builds only from a layout that places the ranks on two or more nodes (hierarchical)."""

    def supports(self, op: Op) -> bool:
        return op in self.ops

    def segments_for(self, size_bytes: int, segment_bytes: int | None) -> int:
        """How many pipeline segments a message of ``size_bytes`` gets: one per ``segment_bytes``
        (rounded up), between 1 and :data:`MAX_SEGMENTS`; always 1 for an unsegmented algorithm or
        when no segment size is given."""
        if not self.segmented or not segment_bytes:
            return 1
        return max(1, min(MAX_SEGMENTS, math.ceil(size_bytes / segment_bytes)))

    def build(
        self,
        op: Op,
        world_size: int,
        count: int,
        *,
        root: int = 0,
        layout: Layout | None = None,
        segments: int = 1,
        rank: int | None = None,
    ) -> Schedule:
        """Build the schedule: every rank's steps, or with ``rank`` only that rank's (what a rank that
        runs it needs: O(its steps), see ``algorithms/_common.py``). Raise NotApplicableError for an op
        this algorithm does not do."""
        if self.builder is None:
            raise NotApplicableError(f"{self.name} is the backend's own collective and has no schedule")
        if op not in self.ops:
            does = ", ".join(o.value for o in sorted_ops(self.ops))
            raise NotApplicableError(f"{self.name} does not implement {op.value}; it does: {does}")
        if world_size < 1:
            raise NotApplicableError(f"world size must be >= 1, got {world_size}")
        if not 0 <= root < world_size:
            raise NotApplicableError(f"root {root} is not a rank of a world of {world_size}")
        if rank is not None and not 0 <= rank < world_size:
            raise NotApplicableError(f"rank {rank} is not a rank of a world of {world_size}")
        return self.builder(op, world_size, count, root=root, layout=layout, segments=segments, rank=rank)


def sorted_ops(ops: frozenset[Op]) -> list[Op]:
    order = list(Op)
    return sorted(ops, key=order.index)
