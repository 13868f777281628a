"""What a fit reads of result rows, gathered while the rows stream past: one summary per measured size.

A fit models one time per (op, algorithm, backend, world size) and size: the smallest decision time
(``results/noise.py``) of the rows of that size (rounds, repeats, in place and out of place, files
given together), as selection combines them (``tuning/selection/``). That is all it reads of the
rows, so rows are folded into these summaries as they are read: memory grows with the number of
distinct points (bounded by the sweep plan) and their rounds, never with the number of rows or the
file's size.

Which points are data. A point is left out of a fit only where its own measurement says its time
cannot be trusted, never because it sits far from a line:

- a row in the stall regime (``results/noise.row_stalled``: 5% or more of its iterations slower than
  3x the fastest, or its iterations in two modes) does not give the point its time when another row
  of the point is clean; a point whose every row is stalled is set aside;
- a point measured in several rounds of a tune (``tune_round``) whose two fastest clean rounds
  disagree beyond their own noise is set aside: once each round is put at the machine's speed in
  it, the slower round's *fastest* iteration is slower than the faster round's *slowest*, so the two
  rounds' iterations do not overlap at all and the point has no one time. The machine's speed in a
  round is the median, over the algorithms measured at that size in it and in the round that
  measured the most of them, of their time ratio (as ``tuning/selection/points.round_speeds``
  takes it): rounds are minutes apart, and a shared machine's speed drifts between them by 10-70%
  for every algorithm at once, which says nothing about one point. Where fewer than three algorithms
  tell a round's speed, the point's rounds are not judged (their disagreement cannot be told from
  the machine's). The point's time is its fastest clean round's, as selection takes it.

A call of 0 bytes is no collective at all (NCCL's ``ncclEnqueueCheck`` returns at once for a count
of 0; nccl-tests still times the call): it is set aside too, since a latency fitted to it would be the
cost of an empty function call. Barrier is the exception: it moves no data by nature, every call of
it is the same call whatever size a row names, so its rows are one point at 0 bytes (time only),
and that point is data (``fit_latency.py`` fits a latency per round to it). Each set-aside point
carries the reason (``FitPoint.set_aside``), which the fit's note repeats.
Rows of nccl-tests logs and other tools carry no stall figures and no rounds: their points are data.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from collbench.results.noise import STALL_FACTOR, decision_time_us, row_stalled
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op
from collbench.units import format_bytes

_NO_PAYLOAD: frozenset[str] = frozenset(op.value for op in Op if not op.spec.payload)
"""Ops that move no data (barrier): every row of one is a call of 0 bytes, whatever size it names."""


@dataclass(frozen=True, slots=True)
class FitPoint:
    """One measured size of one group as a fit reads it: its time, over all the rows of that size."""

    op: str
    algo: str
    backend: str
    world_size: int
    size_bytes: int
    time_us: float
    """The smallest decision time (p25, else p50) of the point's clean rows (of every row when none is
    clean): what the fit is made from."""
    median_us: float
    """The smallest p50 of the same rows (what plots show as measured)."""
    rows: int
    """How many rows of the input were this point."""
    set_aside: str = ""
    """Why the point's own measurement keeps it out of the fit; empty when it is data."""
    stall_fraction: float | None = None
    """The smallest stall fraction of the point's rows (None: no row carries one)."""

    @property
    def group(self) -> tuple[str, str, str, int]:
        """The fit this point belongs to: (op, algo, backend, world size)."""
        return (self.op, self.algo, self.backend, self.world_size)

    @property
    def label(self) -> str:
        """The point as a note names it: its size."""
        return format_bytes(self.size_bytes)


@dataclass(slots=True)
class _RoundBest:
    """The fastest clean row of one round of one point: its decision time, fastest and slowest iteration."""

    decision_us: float
    min_us: float
    max_us: float


@dataclass(slots=True)
class _Summary:
    """One point's rows so far (updated in place: this runs once a row)."""

    clean_time: float = math.inf
    clean_median: float = math.inf
    any_time: float = math.inf
    any_median: float = math.inf
    rows: int = 0
    clean_rows: int = 0
    least_stall: float | None = None
    every_stalled_row_bimodal: bool = True
    rounds: dict[int, _RoundBest] | None = None


class PointSummaries:
    """Per-point summaries of the rows given to :meth:`add`, in the order their points first came.

    Rows without a positive time (nothing a fit can use) and rows whose data check found wrong
    elements (``wrong > 0``) are counted in ``rows_seen`` and otherwise dropped.
    """

    __slots__ = ("_points", "rows_failed", "rows_seen")

    def __init__(self) -> None:
        self._points: dict[tuple[str, str, str, int, int], _Summary] = {}
        self.rows_seen = 0
        # Rows left out because their data check found wrong elements (said to the user, never fitted).
        self.rows_failed = 0

    def add(self, row: ResultRow) -> None:
        """Fold one row into its point's summary."""
        self.rows_seen += 1
        # A row whose data check failed timed a broken collective: its time describes nothing to model.
        if row.wrong > 0:
            self.rows_failed += 1
            return
        if not (row.time_us > 0 and row.size_bytes >= 0):
            return
        size = 0 if row.op in _NO_PAYLOAD else row.size_bytes
        key = (row.op, row.algo, row.backend, row.world_size, size)
        seen = self._points.get(key)
        if seen is None:
            seen = self._points[key] = _Summary()
        time = decision_time_us(row)
        seen.rows += 1
        seen.any_time = min(seen.any_time, time)
        seen.any_median = min(seen.any_median, row.time_us)
        if row.stall_fraction is not None:
            seen.least_stall = min(row.stall_fraction, seen.least_stall or math.inf)
        if row_stalled(row):
            seen.every_stalled_row_bimodal = seen.every_stalled_row_bimodal and bool(row.bimodal)
            return
        seen.clean_rows += 1
        seen.clean_time = min(seen.clean_time, time)
        seen.clean_median = min(seen.clean_median, row.time_us)
        if row.tune_round is not None:
            rounds = seen.rounds if seen.rounds is not None else {}
            seen.rounds = rounds
            best = rounds.get(row.tune_round)
            if best is None or time < best.decision_us:
                rounds[row.tune_round] = _RoundBest(time, row.time_us_min, row.time_us_max)

    def extend(self, rows: Iterable[ResultRow]) -> PointSummaries:
        """Fold every row of an iterable (consumed one at a time, never held); returns self."""
        for row in rows:
            self.add(row)
        return self

    def points(self) -> list[FitPoint]:
        """The points, in the order their first rows came, each with why it is set aside (if it is)."""
        speeds = self._round_speeds()
        out = []
        for key, s in self._points.items():
            if s.clean_rows:
                time, median = s.clean_time, s.clean_median
            else:
                time, median = s.any_time, s.any_median
            op, _, backend, world_size, size = key
            empty = size == 0 and op not in _NO_PAYLOAD
            why = _EMPTY if empty else _why_set_aside(s, speeds.get((op, backend, world_size, size), {}))
            out.append(FitPoint(*key, time, median, s.rows, why, s.least_stall))
        return out

    def _round_speeds(self) -> dict[tuple[str, str, int, int], dict[int, float]]:
        """Per (op, backend, world size, size), each round's time relative to the round that measured
        the most algorithms there (the median ratio over the algorithms both measured); rounds sharing
        fewer than ``_ROUND_MIN_SHARED`` algorithms with it are left out (their speed is unknown)."""
        by_size: dict[tuple[str, str, int, int], dict[int, dict[str, float]]] = {}
        for (op, algo, backend, world_size, size), s in self._points.items():
            for index, best in (s.rounds or {}).items():
                by_size.setdefault((op, backend, world_size, size), {}).setdefault(index, {})[algo] = best.decision_us
        speeds: dict[tuple[str, str, int, int], dict[int, float]] = {}
        for at, rounds in by_size.items():
            reference = max(sorted(rounds), key=lambda index: len(rounds[index]))
            base = rounds[reference]
            factors = {}
            for index, times in rounds.items():
                shared = [times[a] / base[a] for a in times if a in base and base[a] > 0]
                if len(shared) >= _ROUND_MIN_SHARED:
                    factors[index] = statistics.median(shared)
            speeds[at] = factors
        return speeds

    def __len__(self) -> int:
        return len(self._points)


_EMPTY = "a call of 0 bytes moves no data (NCCL returns at once for a count of 0): no collective to model"


_ROUND_MIN_SHARED = 3
"""Algorithms a round must share with the reference round at a size for its speed to be known there."""


def _why_set_aside(s: _Summary, speeds: dict[int, float]) -> str:
    """Why a point's measurement keeps it out of a fit (see the module docstring); empty when it is data."""
    if not s.clean_rows:
        every = "its only row" if s.rows == 1 else f"all {s.rows} rows"
        if s.every_stalled_row_bimodal:
            return f"{every} two-moded (iterations in two groups more than 2x apart)"
        least = 100 * (s.least_stall or 0.0)
        return f"{every} stalled (at least {least:.0f}% of iterations >{STALL_FACTOR:g}x the fastest)"
    # Each round at the machine's speed in it; rounds whose speed is unknown are not judged.
    known = [(index, best, speeds[index]) for index, best in (s.rounds or {}).items() if speeds.get(index, 0) > 0]
    if len(known) < 2:
        return ""
    (first, a, fa), (second, b, fb) = sorted(known, key=lambda item: item[1].decision_us / item[2])[:2]
    if b.min_us / fb > a.max_us / fa > 0:
        return (
            f"rounds {first} and {second} disagree beyond their noise (at the machine's speed in each, the "
            f"fastest iteration of round {second}, {b.min_us * fa / fb:.4g} us, is above round {first}'s "
            f"slowest, {a.max_us:.4g} us)"
        )
    return ""


def summarize(rows: Iterable[ResultRow] | PointSummaries) -> PointSummaries:
    """``rows`` folded into per-point summaries (summaries given are returned as they are)."""
    if isinstance(rows, PointSummaries):
        return rows
    return PointSummaries().extend(rows)
