"""The order a tune's sweep measures one size's points in: the algorithms likely to be fast first.

A point clearly behind is cut short against its size's leader (``timed.SizeLeaders``: the smallest
slowest-iteration among the points measured in full there so far). A slow point measured before any
fast one at its size has nothing tight to be cut against, and runs in full however far behind it is.
On the namespace cluster (benchmarks/README.md, "The quick tune's last 84 s", run D) ring came first
at 1 MiB with one stalled iteration of 468 ms (its median 44 ms): the bound was 936 ms, and
hierarchical, tree and two-tree (234-478 ms a call) ran 7 calls each, 7.4 s, where rabenseifner,
measured after them, would have bounded them at 87 ms.

So within each size (``SweepConfig.interleave`` with ``cut_behind``: a tune's rounds), the algorithms
whose time at the size below, in this sweep, was within ``cut_behind`` times the fastest there come
first, in the plan's order, so that a round in reverse order still alternates the close contenders (a
load drifting during a size does not favour the same one every round). The others follow, the
fastest below first (none of them can be chosen at a size where they stay that far behind, and the
faster of two slow points is the tighter bound should every fast one have stalled), and last, in the
plan's order, those not measured at the size below (left out there by ``SweepConfig.only``, or
refused). The smallest size, with nothing below it, keeps the plan's order.

Only the order changes: each point gets the same checks, and its full iterations unless its own
calls are over ``cut_behind`` times a whole range measured in full at its size (``timed.py``), which
no order can make a fast point's. The times are the slowest rank's (gathered, so every rank holds
the same) or the resumed rows' (sent with the plan), so every rank derives the same order with no
message: a rank that ordered its points otherwise would wait in a collective the others never join.
A point is still named by its key, its rows come back in the plan's order (``rows_in_plan_order``),
and the stream holds them in the order measured, which resume does not depend on.
"""

from __future__ import annotations

from collections.abc import Sequence

from collbench.runtime.sweep.points import SweepPoint
from collbench.schedules.ops import Op

Block = list[tuple[int, SweepPoint]]
"""The points of one op at one requested size, each with its index in the sweep's plan of this run."""


def size_blocks(points: Sequence[SweepPoint]) -> list[Block]:
    """``points`` with their indices, cut into runs of one op at one requested size, in order."""
    blocks: list[Block] = []
    for index, point in enumerate(points):
        if blocks and _size_of(blocks[-1][-1][1]) == _size_of(point):
            blocks[-1].append((index, point))
        else:
            blocks.append([(index, point)])
    return blocks


class SizeOrder:
    """The times a sweep measured, per op and requested size, and the order of a size's points that
    follows from them (the module's docstring says which). ``factor`` is ``SweepConfig.cut_behind``;
    None: every size in the plan's order."""

    __slots__ = ("_times", "factor")

    def __init__(self, factor: float | None) -> None:
        self.factor = factor
        self._times: dict[tuple[Op, int], dict[tuple[str, bool], float]] = {}

    def add(self, point: SweepPoint, time_us: float, *, wrong: int) -> None:
        """A point measured (or resumed): ``time_us`` its median, the slowest rank's. A point with wrong
        data says nothing of its speed."""
        if wrong > 0:
            return
        self._times.setdefault(_size_of(point), {})[(point.algo, point.in_place)] = time_us

    def places(self, op: Op, size_index: int) -> dict[str, tuple[int, float]] | None:
        """Per algorithm measured at the nearest size below ``size_index`` for ``op``, its place (a sort
        key, not a process rank): (0, 0) within ``factor`` of that size's fastest (per mode), else (1,
        its fastest time there); None: no such size (or no factor)."""
        if self.factor is None:
            return None
        below = [index for (held, index) in self._times if held == op and index < size_index]
        if not below:
            return None
        times = self._times[(op, max(below))]
        best: dict[bool, float] = {}
        for (_, in_place), time_us in times.items():
            best[in_place] = min(best.get(in_place, time_us), time_us)
        out: dict[str, tuple[int, float]] = {}
        for (algo, in_place), time_us in times.items():
            place = (0, 0.0) if time_us <= self.factor * best[in_place] else (1, time_us)
            out[algo] = min(out.get(algo, place), place)
        return out

    def order(self, block: Block) -> Block:
        """``block``'s points in the order to measure them (the module's docstring): each algorithm's
        points (its modes) together, in the plan's order."""
        if not block:
            return block
        op, size_index = _size_of(block[0][1])
        places = self.places(op, size_index)
        if places is None:
            return list(block)
        unknown = (2, 0.0)
        # sorted() is stable: equal places (the likely fast, the unknown) keep the plan's order.
        return sorted(block, key=lambda item: places.get(item[1].algo, unknown))


def _size_of(point: SweepPoint) -> tuple[Op, int]:
    return point.op, point.size_index
