"""What a fit reads of result rows, gathered while the rows stream past: one summary per measured size.

A fit models one time per (op, algorithm, backend, world size) and size: the smallest decision time
(``results/noise.py``) of every row of that size (rounds, repeats, in place and out of place, files
given together), as selection combines them (``tuning/selection/``). That is all it reads of the
rows, so rows are folded into these summaries as they are read: memory grows with the number of
distinct points (bounded by the sweep plan), never with the number of rows or the file's size.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from collbench.results.noise import decision_time_us
from collbench.results.row import ResultRow


@dataclass(frozen=True, slots=True)
class FitPoint:
    """One measured size of one group as a fit reads it: its time, over all the rows of that size."""

    op: str
    algo: str
    backend: str
    world_size: int
    size_bytes: int
    time_us: float
    """The smallest decision time (p25, else p50) of the point's rows: what the fit is made from."""
    median_us: float
    """The smallest p50 of the point's rows (what plots show as measured)."""
    rows: int
    """How many rows of the input were this point."""

    @property
    def group(self) -> tuple[str, str, str, int]:
        """The fit this point belongs to: (op, algo, backend, world size)."""
        return (self.op, self.algo, self.backend, self.world_size)


class PointSummaries:
    """Per-point summaries of the rows given to :meth:`add`, in the order their points first came.

    Rows without a positive time (nothing a fit can use) and rows whose data check found wrong
    elements (``wrong > 0``) are counted in ``rows_seen`` and otherwise dropped.
    """

    __slots__ = ("_points", "rows_failed", "rows_seen")

    def __init__(self) -> None:
        # Per point: [smallest decision time, smallest p50, rows], updated in place (this runs once a row).
        self._points: dict[tuple[str, str, str, int, int], list[float]] = {}
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
        key = (row.op, row.algo, row.backend, row.world_size, row.size_bytes)
        time = decision_time_us(row)
        seen = self._points.get(key)
        if seen is None:
            self._points[key] = [time, row.time_us, 1]
            return
        if time < seen[0]:
            seen[0] = time
        if row.time_us < seen[1]:
            seen[1] = row.time_us
        seen[2] += 1

    def extend(self, rows: Iterable[ResultRow]) -> PointSummaries:
        """Fold every row of an iterable (consumed one at a time, never held); returns self."""
        for row in rows:
            self.add(row)
        return self

    def points(self) -> list[FitPoint]:
        """The points, in the order their first rows came."""
        return [FitPoint(*key, time, median, int(rows)) for key, (time, median, rows) in self._points.items()]

    def __len__(self) -> int:
        return len(self._points)


def summarize(rows: Iterable[ResultRow] | PointSummaries) -> PointSummaries:
    """``rows`` folded into per-point summaries (summaries given are returned as they are)."""
    if isinstance(rows, PointSummaries):
        return rows
    return PointSummaries().extend(rows)
