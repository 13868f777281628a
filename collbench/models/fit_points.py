"""What a fit reads of result rows, gathered while the rows stream past: one summary per measured size.

A fit models one time per (op, algorithm, backend, world size) and size: the fastest *consistent*
decision time (``results/noise.py``: a row's p25, else its p50) of the rows of that size (rounds,
repeats, in place and out of place, files given together). That is all it reads of the rows, so
rows are folded into these summaries as they are read: memory grows with the number of distinct
points (bounded by the sweep plan), never with the number of rows or the file's size.

Which rows give a point its time. Stalls only ever add time, and a whole round can be slower than
the others of its size (the machine busy for the minutes it ran: every iteration slow alike, so its
stall fraction is 0): that round is the outlier, not the data, and the smallest statistic across
rounds leaves it out by itself. What must not give the time is a statistic that is itself a stall:
a row's decision time is *consistent* when it lies among the row's undisturbed calls
(``results/noise.decision_time_consistent``: not above 3x the row's fastest iteration, not in the
upper of two modes, and fewer of its iterations stalled than its quantile leaves below it). A row in
the stall regime whose p25 is still among the undisturbed calls (10% of its iterations stalled, say)
is consistent and counts: its p25 is exactly what the stalls did not touch. Keeping only the rows
with no stall at all kept, on a loaded machine, a uniformly slow round over a faster one with a few
stalls (rabenseifner 16 KiB: 16,808 us kept against 304 us).

Which points are data. A point is left out of a fit only where its own measurement says its time
cannot be trusted, never because it sits far from a line: a point none of whose rows has a
consistent statistic (every row's p25 among its stalls, or in the upper of two modes) is set aside.

A call of 0 bytes is no collective at all (NCCL's ``ncclEnqueueCheck`` returns at once for a count
of 0; nccl-tests still times the call): it is set aside too, since a latency fitted to it would be the
cost of an empty function call. Barrier is the exception: it moves no data by nature, every call of
it is the same call whatever size a row names, so its rows are one point at 0 bytes (time only),
and that point is data (``fit_latency.py`` fits a latency per round to it). Each set-aside point
carries the reason (``FitPoint.set_aside``), which the fit's note repeats.
Rows of nccl-tests logs and other tools carry no stall figures and no rounds: their points are data.

A row a tune cut short (``ResultRow.cut_short``: one timed iteration of a point clearly behind the
fastest at its size, runtime/sweep/timed.py) is data too, a real call timed whole (0.2-7 s a call where
it happens), but the weakest: it gives the point's time only where no row of that size was timed in
full, since one iteration's time is an upper bound of the p25 its full iterations would have had.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from collbench.results.noise import STALL_FACTOR, decision_time_consistent, decision_time_us
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op
from collbench.units import counted, format_bytes

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
    """The smallest consistent decision time (p25, else p50) of the point's rows (the smallest of all
    when none is consistent: the point is then set aside): what the fit is made from."""
    median_us: float
    """The p50 of the row that gave ``time_us``."""
    rows: int
    """How many rows of the input were this point."""
    set_aside: str = ""
    """Why the point's own measurement keeps it out of the fit; empty when it is data."""
    stall_fraction: float | None = None
    """The smallest stall fraction of the point's rows (None: no row carries one)."""
    tune_round: int | None = None
    """The round of a tune whose row gave ``time_us`` (None: the row names none)."""
    segment_bytes: int | None = None
    """The pipeline segment size the row that gave ``time_us`` ran with (None: unsegmented, one
    segment): a pipelined schedule (the trees) takes one step a segment (``costs.segments_of``)."""

    @property
    def group(self) -> tuple[str, str, str, int]:
        """The fit this point belongs to: (op, algo, backend, world size)."""
        return (self.op, self.algo, self.backend, self.world_size)

    @property
    def label(self) -> str:
        """The point as a note names it: its size."""
        return format_bytes(self.size_bytes)


@dataclass(slots=True)
class _Summary:
    """One point's rows so far (updated in place: this runs once a row)."""

    time: float = math.inf
    median: float = math.inf
    tune_round: int | None = None
    segment_bytes: int | None = None
    any_time: float = math.inf
    any_median: float = math.inf
    any_segment_bytes: int | None = None
    rows: int = 0
    consistent_rows: int = 0
    least_stall: float | None = None
    every_row_bimodal: bool = True
    cut: tuple[float, float, int | None, int | None] | None = None
    """(time, median, round, segment bytes) of the fastest consistent row cut short, kept apart from
    the full rows'."""


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
        if time < seen.any_time:
            seen.any_time, seen.any_median, seen.any_segment_bytes = time, row.time_us, row.segment_bytes
        if row.stall_fraction is not None:
            seen.least_stall = min(row.stall_fraction, seen.least_stall or math.inf)
        if not decision_time_consistent(row):
            seen.every_row_bimodal = seen.every_row_bimodal and bool(row.bimodal)
            return
        if row.cut_short is not None:
            # One timed iteration: a row timed in full at this size gives the time before it does.
            if seen.cut is None or time < seen.cut[0]:
                seen.cut = (time, row.time_us, row.tune_round, row.segment_bytes)
            return
        seen.consistent_rows += 1
        # The fastest consistent row: a round slower than another of the same point (the machine
        # busy while it ran) never gives the time, however clean its iterations are.
        if time < seen.time:
            seen.time, seen.median, seen.tune_round = time, row.time_us, row.tune_round
            seen.segment_bytes = row.segment_bytes

    def extend(self, rows: Iterable[ResultRow]) -> PointSummaries:
        """Fold every row of an iterable (consumed one at a time, never held); returns self."""
        for row in rows:
            self.add(row)
        return self

    def points(self) -> list[FitPoint]:
        """The points, in the order their first rows came, each with why it is set aside (if it is)."""
        out = []
        for key, s in self._points.items():
            op, _, _, _, size = key
            if s.consistent_rows:
                time, median, index, seg = s.time, s.median, s.tune_round, s.segment_bytes
            elif s.cut is not None:
                time, median, index, seg = s.cut
            else:
                time, median, index, seg = s.any_time, s.any_median, None, s.any_segment_bytes
            empty = size == 0 and op not in _NO_PAYLOAD
            why = _EMPTY if empty else _why_set_aside(s)
            out.append(FitPoint(*key, time, median, s.rows, why, s.least_stall, index, seg))
        return out

    def __len__(self) -> int:
        return len(self._points)


_EMPTY = "a call of 0 bytes moves no data (NCCL returns at once for a count of 0): no collective to model"


def _why_set_aside(s: _Summary) -> str:
    """Why a point's measurement keeps it out of a fit (see the module docstring); empty when it is data."""
    if s.consistent_rows or s.cut is not None:
        return ""
    every = "its only row" if s.rows == 1 else f"all {s.rows} rows"
    if s.every_row_bimodal:
        return f"{every} two-moded, the time in the upper mode (iterations in two groups more than 2x apart)"
    least = 100 * (s.least_stall or 0.0)
    return (
        f"{every} stalled, the time among the stalls (at least {least:.0f}% of iterations "
        f">{STALL_FACTOR:g}x the fastest)"
    )


def set_aside_note(set_aside: Iterable[FitPoint]) -> str:
    """A fit's note on the points its measurement kept out, each named with why, smallest first: one
    wording for every fit ('1 point set aside as its own measurement marks it (0 B: ...)')."""
    points = sorted(set_aside, key=lambda q: q.size_bytes)
    named = "; ".join(f"{q.label}: {q.set_aside}" for q in points)
    whose = "its own measurement marks it" if len(points) == 1 else "their own measurement marks them"
    return f"{counted(len(points), 'point')} set aside as {whose} ({named})"


def summarize(rows: Iterable[ResultRow] | PointSummaries) -> PointSummaries:
    """``rows`` folded into per-point summaries (summaries given are returned as they are)."""
    if isinstance(rows, PointSummaries):
        return rows
    return PointSummaries().extend(rows)
