"""Crossover sizes between algorithms, and the fastest algorithm per size, from fitted models.

Two algorithms of the same op, backend and world size cross where their predicted times are equal. The
predicted-time difference is sampled on a logarithmic grid of sizes and every sign change is refined by
bisection (in log size) to the byte. Fits may be evaluated at another world size than they were
measured at (``world_size=``), which is how ``predict`` finds crossovers at 4,096 ranks. Barrier has no
sizes (one time per algorithm), so no crossovers.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from collbench.models.fitted import Fit, op_has_payload

_GRID_POINTS = 96


@dataclass(frozen=True, slots=True)
class Crossover:
    op: str
    backend: str
    world_size: int
    size_bytes: int
    below: str
    """The faster algorithm just below ``size_bytes``."""
    above: str
    """The faster algorithm from ``size_bytes`` up."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "backend": self.backend,
            "world_size": self.world_size,
            "size_bytes": self.size_bytes,
            "below": self.below,
            "above": self.above,
        }


def _log_grid(lo: float, hi: float, points: int) -> list[float]:
    if hi <= lo:
        return [lo]
    a, b = math.log(lo), math.log(hi)
    return [math.exp(a + (b - a) * i / (points - 1)) for i in range(points)]


def time_crossings(
    first: Callable[[float], float], second: Callable[[float], float], lo: float, hi: float
) -> list[int]:
    """Sizes in [lo, hi] (bytes) where two predicted times (us, as functions of the size) change order.

    Each is the first whole byte on the far side of a crossing: a log-spaced grid finds the sign
    changes, bisection narrows each to a byte.
    """
    lo = max(lo, 1.0)

    def diff(size: float) -> float:
        return first(size) - second(size)

    grid = _log_grid(lo, hi, _GRID_POINTS)
    values = [diff(s) for s in grid]
    found: list[int] = []
    for (s0, v0), (s1, v1) in zip(
        zip(grid, values, strict=False), zip(grid[1:], values[1:], strict=False), strict=False
    ):
        if v0 == 0 or (v0 > 0) == (v1 > 0):
            continue
        a, b = s0, s1
        while b - a > 1.0:
            mid = math.sqrt(a * b)
            if (diff(mid) > 0) == (v0 > 0):
                a = mid
            else:
                b = mid
        found.append(math.ceil(b))
    return found


def find_crossovers(
    fits: Sequence[Fit],
    *,
    world_size: int | None = None,
    lo_bytes: float | None = None,
    hi_bytes: float | None = None,
) -> list[Crossover]:
    """Every size where the fastest of a (op, backend, world size)'s algorithms changes
    (:func:`fastest_changes`). The range defaults to the sizes the fits were measured over.
    ``world_size`` evaluates every fit at that world size instead of its own.
    """
    groups: dict[tuple[str, str, int], list[Fit]] = defaultdict(list)
    for f in fits:
        # A barrier has one time and no sizes: nothing to cross at (its fastest is a choice, not a range).
        if op_has_payload(f.op):
            groups[(f.op, f.backend, world_size or f.world_size)].append(f)
    out: list[Crossover] = []
    for (op, backend, p), members in sorted(groups.items()):
        if len(members) < 2:
            continue
        lo = lo_bytes if lo_bytes is not None else min(f.min_bytes for f in members)
        hi = hi_bytes if hi_bytes is not None else max(f.max_bytes for f in members)
        timed = [(f.algo, functools.partial(f.predict_us, world_size=world_size)) for f in members]
        out.extend(
            Crossover(op, backend, p, size, below, above) for size, below, above in fastest_changes(timed, lo, hi)
        )
    return out


def fastest_changes(
    timed: Sequence[tuple[str, Callable[[float], float]]], lo: float, hi: float
) -> list[tuple[int, str, str]]:
    """(size, below, above) for every size in [lo, hi] (bytes) where the fastest of the named predicted
    times (us, as functions of the size) changes name: fits' (:func:`find_crossovers`) and priced
    algorithms' at another scale (``predict.crossovers_of``) alike. Ties go to the first given.

    The candidates are every pair's crossings (:func:`time_crossings`); only changes of the fastest
    are kept (a crossing between two slow ones is not a decision anyone takes).
    """
    candidates: set[int] = set()
    for i, (_, a) in enumerate(timed):
        for _, b in timed[i + 1 :]:
            candidates.update(time_crossings(a, b, lo, hi))

    def fastest_name(size: float) -> str:
        return min(timed, key=lambda named: named[1](size))[0]

    out: list[tuple[int, str, str]] = []
    prev = fastest_name(max(lo, 1.0))
    for size in sorted(candidates):
        now = fastest_name(size)
        if now != prev:
            out.append((size, prev, now))
            prev = now
    return out
