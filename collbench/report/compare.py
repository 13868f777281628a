"""Two result sets side by side: per matched point, how much slower or faster, and whether it is noise.

Points match on (op, algorithm, size, dtype, ranks). Several rows at one key on one side (in-place and
out-of-place, rounds, segment sizes) combine into one point: the median of their p50s.

How the uncertainty is estimated, per side and point, as a relative standard error of its time:

* within a row: the iterations' spread below the median, ``(p50 - min) / p50``, over the square root
  of the iterations timed (the median of n samples varies about 1/sqrt(n) as much as one sample; the
  spread below the median is used because one stalled iteration drives ``max`` but not the median);
* between rows at the key: the standard error of their p50s, which sees load drifting between repeats.

The two add in quadrature. The ratio ``new / base`` then has the relative uncertainty
``hypot(u_base, u_new)``; a change is *beyond noise* when ``|ln(ratio)|`` exceeds ``Z`` times it
(Z = 2: about 95% if the errors were normal). A regression for ``--fail-above`` must be beyond noise
*and* slower by more than the threshold, so neither a noisy point nor a tiny but certain change fails CI.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collbench.errors import UserError
from collbench.results.row import ResultRow

Z = 2.0
"""How many standard errors a change must exceed to count as beyond noise."""

UNCERTAINTY_METHOD = (
    "per point and run: hypot((p50 - min) / p50 / sqrt(iters), standard error of the p50s of the rows at the point); "
    f"ratio new/base with relative error hypot(u_base, u_new); beyond noise when |ln ratio| > {Z:g} x that"
)

PointKey = tuple[str, str, int, str, int]
"""(op, algo, size_bytes, dtype, world_size)."""


@dataclass(frozen=True, slots=True)
class RunPoint:
    """One run's combined measurement at a key."""

    time_us: float
    """Median of the rows' p50s."""
    rel_error: float
    """Relative standard error of ``time_us`` (see the module docstring)."""
    rows: int
    wrong: int
    """Largest wrong-element count among the rows (-1 when none was checked)."""


@dataclass(frozen=True, slots=True)
class PointChange:
    op: str
    algo: str
    size_bytes: int
    dtype: str
    world_size: int
    base: RunPoint
    new: RunPoint

    @property
    def ratio(self) -> float:
        """new time / base time: 1.10 is 10% slower."""
        return self.new.time_us / self.base.time_us

    @property
    def rel_error(self) -> float:
        """Relative standard error of :attr:`ratio`."""
        return math.hypot(self.base.rel_error, self.new.rel_error)

    @property
    def beyond_noise(self) -> bool:
        return abs(math.log(self.ratio)) > Z * self.rel_error

    @property
    def newly_wrong(self) -> bool:
        """The new run found wrong elements where the base found none (or did not check)."""
        return self.new.wrong > 0 and self.base.wrong <= 0

    def regressed(self, threshold: float) -> bool:
        """Slower by more than ``threshold`` (0.05 = 5%) and beyond noise."""
        return self.ratio > 1.0 + threshold and self.beyond_noise

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "algo": self.algo,
            "size_bytes": self.size_bytes,
            "dtype": self.dtype,
            "world_size": self.world_size,
            "base_time_us": self.base.time_us,
            "new_time_us": self.new.time_us,
            "base_rel_error": self.base.rel_error,
            "new_rel_error": self.new.rel_error,
            "ratio": self.ratio,
            "ratio_rel_error": self.rel_error,
            "beyond_noise": self.beyond_noise,
            "base_wrong": self.base.wrong,
            "new_wrong": self.new.wrong,
        }


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """One (op, algorithm) over its matched sizes."""

    op: str
    algo: str
    points: int
    geomean_ratio: float
    worst: PointChange
    """The point with the largest ratio (the slowest change)."""
    beyond_noise: int
    """Points whose change is beyond noise (either way)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "algo": self.algo,
            "points": self.points,
            "geomean_ratio": self.geomean_ratio,
            "worst_size_bytes": self.worst.size_bytes,
            "worst_ratio": self.worst.ratio,
            "worst_ratio_rel_error": self.worst.rel_error,
            "worst_beyond_noise": self.worst.beyond_noise,
            "beyond_noise": self.beyond_noise,
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    changes: tuple[PointChange, ...]
    only_base: int
    """Points of BASE with no match in NEW."""
    only_new: int

    def summaries(self) -> list[GroupSummary]:
        groups: dict[tuple[str, str], list[PointChange]] = defaultdict(list)
        for c in self.changes:
            groups[(c.op, c.algo)].append(c)
        out = []
        for (op, algo), members in sorted(groups.items()):
            geo = math.exp(statistics.fmean(math.log(c.ratio) for c in members))
            worst = max(members, key=lambda c: c.ratio)
            out.append(GroupSummary(op, algo, len(members), geo, worst, sum(c.beyond_noise for c in members)))
        return out

    def regressions(self, threshold: float) -> list[PointChange]:
        """Points slower beyond ``threshold`` and beyond noise, or newly wrong."""
        return [c for c in self.changes if c.regressed(threshold) or c.newly_wrong]

    def to_dict(self, threshold: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "uncertainty": UNCERTAINTY_METHOD,
            "matched": len(self.changes),
            "only_base": self.only_base,
            "only_new": self.only_new,
            "points": [c.to_dict() for c in self.changes],
            "summary": [s.to_dict() for s in self.summaries()],
        }
        if threshold is not None:
            regressed = self.regressions(threshold)
            out["fail_above"] = threshold
            out["regressions"] = [c.to_dict() for c in regressed]
            out["failed"] = bool(regressed)
        return out


def _key(row: ResultRow) -> PointKey:
    return (row.op, row.algo, row.size_bytes, row.dtype, row.world_size)


def combine(rows: Sequence[ResultRow]) -> RunPoint:
    """One run's point from its rows at a key (all with a positive time)."""
    times = [r.time_us for r in rows]
    p50 = statistics.median(times)
    within = statistics.median(
        max(0.0, (r.time_us - r.time_us_min) / r.time_us) / math.sqrt(max(r.iters, 1)) for r in rows
    )
    between = statistics.stdev(times) / statistics.fmean(times) / math.sqrt(len(times)) if len(times) > 1 else 0.0
    return RunPoint(
        time_us=p50,
        rel_error=math.hypot(within, between),
        rows=len(rows),
        wrong=max(r.wrong for r in rows),
    )


def _points(rows: Sequence[ResultRow]) -> dict[PointKey, RunPoint]:
    grouped: dict[PointKey, list[ResultRow]] = defaultdict(list)
    for r in rows:
        if r.time_us > 0:
            grouped[_key(r)].append(r)
    return {k: combine(v) for k, v in grouped.items()}


def compare_rows(base: Sequence[ResultRow], new: Sequence[ResultRow]) -> Comparison:
    """Match the two runs' points and compute each change.

    Raises UserError when the runs share no world size (naming both), or when no point matches
    (naming what each run has).
    """
    base_pts, new_pts = _points(base), _points(new)
    base_ws = sorted({k[4] for k in base_pts})
    new_ws = sorted({k[4] for k in new_pts})
    if not base_pts or not new_pts:
        empty = "BASE" if not base_pts else "NEW"
        raise UserError(f"{empty} has no point with a positive time to compare")
    if not set(base_ws) & set(new_ws):
        raise UserError(
            f"the runs have different world sizes: BASE {_listing(base_ws)} ranks, NEW {_listing(new_ws)} ranks; "
            "compare runs of the same world size"
        )
    common = sorted(base_pts.keys() & new_pts.keys())
    if not common:
        raise UserError(
            "no point matches on (op, algorithm, size, dtype, ranks): "
            f"BASE has {_describe(base_pts)}; NEW has {_describe(new_pts)}"
        )
    changes = tuple(PointChange(*k, base=base_pts[k], new=new_pts[k]) for k in common)
    return Comparison(changes, only_base=len(base_pts) - len(common), only_new=len(new_pts) - len(common))


def _listing(values: Sequence[Any]) -> str:
    return ", ".join(str(v) for v in values)


def _describe(points: dict[PointKey, RunPoint]) -> str:
    ops = _listing(sorted({f"{k[0]}/{k[1]}" for k in points}))
    dtypes = _listing(sorted({k[3] for k in points}))
    sizes = sorted({k[2] for k in points})
    return f"{ops} in {dtypes}, {sizes[0]}-{sizes[-1]} bytes"


def parse_threshold(text: str) -> float:
    """``"5%"`` or ``"0.05"`` as the fraction 0.05; UserError for anything else, a bare number of 1 or
    more (ambiguous), or a threshold outside (0%, 1000%)."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100.0 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UserError(f"--fail-above {text!r}: give a percentage such as 5% (or the fraction 0.05)") from None
    if not raw.endswith("%") and value >= 1.0:
        # "5" most likely means 5%, not 500%: make the user say which.
        raise UserError(f"--fail-above {text!r}: write {raw}% for a percentage (a bare number is a fraction)")
    if not 0.0 < value < 10.0 or math.isnan(value):
        raise UserError(f"--fail-above {text!r}: the threshold must be above 0% and below 1000%")
    return value
