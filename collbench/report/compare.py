"""Two result sets side by side: per matched point, how much slower or faster, and whether it is noise.

Points match on (op, algorithm, size, dtype, ranks). Several rows at one key on one side (in-place and
out-of-place, rounds, segment sizes) combine into one point: the median of their p50s.

How the uncertainty is estimated, per side and point, as a relative standard error of its time:

* within a row: the iterations' spread below the median, ``(p50 - min) / p50``, over the square root
  of the iterations timed (the median of n samples varies about 1/sqrt(n) as much as one sample; the
  spread below the median is used because one stalled iteration drives ``max`` but not the median);
* between rows at the key: the standard error of their p50s, which sees load drifting between repeats.

The two add in quadrature. The ratio ``new / base`` then has the relative uncertainty
``hypot(u_base, u_new)``.

Both estimates are within one run, and two runs of one machine a minute apart differ by more: the
clock, the scheduler and the neighbours shift every point of a run by a similar factor, and each point
by some more. So the comparison first estimates the *whole-run factor*, the median of the points' log
ratios (a median, so that the points that really changed do not move it), with its standard error
from the points' robust spread (1.4826 x their median absolute deviation) and the run-to-run
*scatter*: the part of that spread the within-run errors do not explain. Each point is then judged
against the factor: *beyond noise* when ``|ln(ratio / factor)|`` exceeds ``Z_n`` times
``hypot(u_ratio, u_factor, scatter)``, where ``Z_n`` grows with the number of points so that a run
compared with itself flags no point at all in 95% of cases (Bonferroni over the n points, at least 2;
Student's t where the scatter, read from the points themselves, carries much of the error).

Dividing by the factor must not hide a real uniform slowdown, so the factor is a finding of its own:
it is *beyond noise* when ``|ln factor|`` exceeds 2 of its standard errors, and a *whole-run
regression* when it is slower than the threshold (``--fail-above``; ``RUN_DRIFT_BOUND`` when none is
given) by more than 2 of them. A regression for ``--fail-above`` is a point (one neither run stalled at:
results.noise) beyond noise and slower
than the threshold relative to the factor, newly wrong data, or the whole-run regression; neither a
noisy point nor a tiny but certain change fails CI. With fewer than ``MIN_POINTS_FOR_FACTOR`` points
the factor is reported but not divided out (a median of two points says nothing about drift).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from collbench.errors import UserError
from collbench.results.noise import row_stalled
from collbench.results.row import ResultRow

Z = 2.0
"""Standard errors the whole-run factor must exceed to count as beyond noise (one test, about 95%)."""

FAMILY_FALSE_ALARM = 0.05
"""The chance that a run compared with itself shows any point beyond noise (Bonferroni over the points)."""

MIN_POINTS_FOR_FACTOR = 5
"""Matched points needed before the whole-run factor is divided out of every point."""

RUN_DRIFT_BOUND = 0.05
"""How far the whole run may move before it is a finding when no ``--fail-above`` is given: repeated
sweeps of one otherwise idle machine stay within it (benchmarks/README.md, "compare: run-to-run drift")."""

MAD_TO_SIGMA = 1.4826
"""Median absolute deviation to standard deviation, for normal errors."""

MEDIAN_EFFICIENCY = 1.2533
"""The standard error of a median over that of a mean (sqrt(pi / 2)), for normal errors."""

TRIM_KEEP = 0.8
"""The share of the smallest deviations from the factor whose mean measures the points' spread."""

TRIMMED_MEAN_ABS_DEV = 0.5586
"""The mean of the smallest 80% of |x| for standard normal x: 2 (phi(0) - phi(1.2816)) / 0.8."""

MAD_DOF_PER_POINT = 0.37
"""Degrees of freedom a spread read as a median absolute deviation keeps per point (its efficiency)."""

UNCERTAINTY_METHOD = (
    "per point and run: hypot((p50 - min) / p50 / sqrt(iters), standard error of the p50s of the rows at the point); "
    "ratio new/base with relative error hypot(u_base, u_new); whole-run factor: median of the points' log ratios, "
    "its error 1.2533 x the points' robust spread / sqrt(points); a point is beyond noise when "
    "|ln(ratio / factor)| > Z_n x hypot(u_ratio, u_factor, run-to-run scatter), Z_n from a 5% chance of any false "
    "flag over the points; "
    f"the factor is beyond noise past {Z:g} of its errors and a regression when slower than the threshold by as much"
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
    stall_fraction: float = 0.0
    """Largest fraction of stalled iterations among the rows (0 when the rows carry none)."""
    stalled: bool = False
    """A row is in the stall regime (results.noise.row_stalled): its time says how busy the machine
    was, not how fast the collective is."""


@dataclass(frozen=True, slots=True)
class PointChange:
    op: str
    algo: str
    size_bytes: int
    dtype: str
    world_size: int
    base: RunPoint
    new: RunPoint
    run_factor: float = 1.0
    """The whole-run factor the point is judged against (1.0: not divided out)."""
    run_error: float = 0.0
    """Relative error the run-to-run drift adds: hypot(the factor's error, the scatter between runs)."""
    z: float = 2.0
    """Standard errors a change must exceed to be beyond noise (grows with the number of points)."""

    @property
    def ratio(self) -> float:
        """new time / base time: 1.10 is 10% slower."""
        return self.new.time_us / self.base.time_us

    @property
    def rel_error(self) -> float:
        """Relative standard error of :attr:`ratio` from the two runs' own spreads."""
        return math.hypot(self.base.rel_error, self.new.rel_error)

    @property
    def relative_ratio(self) -> float:
        """:attr:`ratio` over the whole-run factor: how much this point changed beyond the run as a whole."""
        return self.ratio / self.run_factor

    @property
    def judged_error(self) -> float:
        """Relative error :attr:`relative_ratio` is judged with: the ratio's and the run-to-run drift's."""
        return math.hypot(self.rel_error, self.run_error)

    @property
    def beyond_noise(self) -> bool:
        return abs(math.log(self.relative_ratio)) > self.z * self.judged_error

    @property
    def newly_wrong(self) -> bool:
        """The new run found wrong elements where the base found none (or did not check)."""
        return self.new.wrong > 0 and self.base.wrong <= 0

    @property
    def stalled(self) -> bool:
        """Either run stalled at this point: a change there is the machine's load, not a regression."""
        return self.base.stalled or self.new.stalled

    def regressed(self, threshold: float) -> bool:
        """Slower than the whole run by more than ``threshold`` (0.05 = 5%) and beyond noise, at a
        point neither run stalled at."""
        return self.relative_ratio > 1.0 + threshold and self.beyond_noise and not self.stalled

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
            "ratio_vs_run": self.relative_ratio,
            "judged_rel_error": self.judged_error,
            "beyond_noise": self.beyond_noise,
            "base_wrong": self.base.wrong,
            "new_wrong": self.new.wrong,
            "base_stall_fraction": self.base.stall_fraction,
            "new_stall_fraction": self.new.stall_fraction,
            "stalled": self.stalled,
        }


@dataclass(frozen=True, slots=True)
class RunFactor:
    """How much slower NEW is than BASE as a whole: the median of the points' ratios."""

    factor: float
    """exp(median of ln(ratio)) over the matched points: 1.06 is 6% slower overall."""
    rel_error: float
    """Relative standard error of :attr:`factor` (see the module docstring)."""
    scatter: float
    """Relative run-to-run spread of single points around the factor that the within-run errors miss."""
    points: int
    divided_out: bool
    """Whether points are judged relative to the factor (enough points to estimate it)."""
    bound: float
    """The fraction past which a whole-run slowdown is a regression (the threshold, or RUN_DRIFT_BOUND)."""

    @property
    def beyond_noise(self) -> bool:
        return abs(math.log(self.factor)) > Z * self.rel_error

    @property
    def regressed(self) -> bool:
        """Slower as a whole than :attr:`bound`, by more than the factor's own noise."""
        return self.slower_than(self.bound)

    def slower_than(self, bound: float) -> bool:
        """Slower as a whole than ``bound`` (0.05 = 5%), by more than ``Z`` of the factor's errors: a
        factor read from a dozen scattered points may pass the bound by its noise alone."""
        return math.log(self.factor) - math.log1p(bound) > Z * self.rel_error

    def to_dict(self) -> dict[str, Any]:
        return {
            "factor": self.factor,
            "rel_error": self.rel_error,
            "scatter": self.scatter,
            "points": self.points,
            "divided_out": self.divided_out,
            "bound": self.bound,
            "beyond_noise": self.beyond_noise,
            "regressed": self.regressed,
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
    run: RunFactor
    warnings: tuple[str, ...] = ()
    """How the two runs differ beyond their points (backend, world sizes, host, topology fingerprint), one line each."""

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
        """Points slower than the whole run beyond ``threshold`` and beyond noise, or newly wrong."""
        return [c for c in self.changes if c.regressed(threshold) or c.newly_wrong]

    def run_regressed(self, threshold: float) -> bool:
        """The whole run slower than ``threshold``, beyond the factor's noise."""
        return self.run.slower_than(threshold)

    def failed(self, threshold: float) -> bool:
        """What ``--fail-above`` exits 1 for: a point's regression, newly wrong data, or the whole run's."""
        return bool(self.regressions(threshold)) or self.run_regressed(threshold)

    def to_dict(self, threshold: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "uncertainty": UNCERTAINTY_METHOD,
            "matched": len(self.changes),
            "only_base": self.only_base,
            "only_new": self.only_new,
            "run": self.run.to_dict(),
            "warnings": list(self.warnings),
            "points": [c.to_dict() for c in self.changes],
            "summary": [s.to_dict() for s in self.summaries()],
        }
        if threshold is not None:
            regressed = self.regressions(threshold)
            out["fail_above"] = threshold
            out["regressions"] = [c.to_dict() for c in regressed]
            out["run_regressed"] = self.run_regressed(threshold)
            out["failed"] = self.failed(threshold)
        return out


def _key(row: ResultRow) -> PointKey:
    return (row.op, row.algo, row.size_bytes, row.dtype, row.world_size)


def _within(row: ResultRow) -> float:
    return max(0.0, (row.time_us - row.time_us_min) / row.time_us) / math.sqrt(max(row.samples, 1))


def combine(rows: Sequence[ResultRow]) -> RunPoint:
    """One run's point from its rows at a key (all with a positive time)."""
    return _point([_sample(r) for r in rows])


_Sample = tuple[float, float, int, float, bool]
"""What a point keeps of one row while a file streams past: (p50, within-row error, wrong, stall
fraction, stalled)."""


def _sample(row: ResultRow) -> _Sample:
    return (row.time_us, _within(row), row.wrong, row.stall_fraction or 0.0, row_stalled(row))


def _point(samples: list[_Sample]) -> RunPoint:
    stall_fraction, stalled = max(s[3] for s in samples), any(s[4] for s in samples)
    if len(samples) == 1:
        time_us, within, wrong, _, _ = samples[0]
        return RunPoint(time_us, within, 1, wrong, stall_fraction, stalled)
    times = [s[0] for s in samples]
    between = statistics.stdev(times) / statistics.fmean(times) / math.sqrt(len(times))
    return RunPoint(
        time_us=statistics.median(times),
        rel_error=math.hypot(statistics.median(s[1] for s in samples), between),
        rows=len(times),
        wrong=max(s[2] for s in samples),
        stall_fraction=stall_fraction,
        stalled=stalled,
    )


FACT_FIELDS = (("backend", "backend"), ("host", "host"), ("topology_fingerprint", "topology fingerprint"))
"""Row fields that say what ran the rows, and how a warning names them when the runs differ."""

MAX_FACT_VALUES = 8
"""Distinct values of one fact kept per run: enough to name them, bounded whatever the file holds."""


@dataclass(slots=True)
class _Run:
    """One run's points and what ran them, folded from its rows as they stream past."""

    samples: dict[PointKey, list[_Sample]] = field(default_factory=dict)
    facts: dict[str, set[str]] = field(default_factory=lambda: {name: set() for name, _ in FACT_FIELDS})
    reductions: set[str] = field(default_factory=set)
    """The reductions of the rows whose op applies one (an all-gather's keeps the sweep's -o unapplied)."""

    @classmethod
    def of(cls, rows: Iterable[ResultRow]) -> _Run:
        from collbench.report.ops import reduction

        run = cls()
        samples, facts = run.samples, [(name, run.facts[name]) for name, _ in FACT_FIELDS]
        for row in rows:
            for name, seen in facts:
                value = getattr(row, name)
                if value and value not in seen and len(seen) < MAX_FACT_VALUES:
                    seen.add(value)
            if (redop := reduction(row)) and len(run.reductions) < MAX_FACT_VALUES:
                run.reductions.add(redop)
            if row.time_us > 0:
                samples.setdefault(_key(row), []).append(_sample(row))
        return run

    def points(self) -> dict[PointKey, RunPoint]:
        return {k: _point(v) for k, v in self.samples.items()}


def family_z(points: int, dof: Sequence[float] | None = None) -> list[float]:
    """Standard errors each point's change must exceed so that ``points`` unchanged points all stay within
    noise with probability 1 - FAMILY_FALSE_ALARM (Bonferroni); never below 2.

    ``dof`` gives each point's degrees of freedom when part of its error is estimated from the points
    themselves (the run-to-run scatter): Student's t then widens the bound, as a scatter read from a
    dozen points may well be half the true one. None (or infinite): normal errors.
    """
    from scipy import stats

    q = 1.0 - FAMILY_FALSE_ALARM / (2.0 * max(points, 1))
    normal = float(stats.norm.ppf(q))
    if dof is None:
        return [max(2.0, normal)] * points
    finite = np.asarray(dof, dtype=float)
    t = np.where(np.isfinite(finite), stats.t.ppf(q, np.where(np.isfinite(finite), finite, 1.0)), normal)
    return [max(2.0, float(z)) for z in t]


def run_factor(log_ratios: Sequence[float], rel_errors: Sequence[float], bound: float) -> RunFactor:
    """The whole-run factor of points with these ln(new/base) and ratio errors (see the module docstring)."""
    n = len(log_ratios)
    centre = statistics.median(log_ratios)
    typical = statistics.median(rel_errors)
    if n < 2:
        return RunFactor(math.exp(centre), typical, 0.0, n, False, bound)
    deviations = sorted(abs(x - centre) for x in log_ratios)
    # The median absolute deviation ignores the points that really changed, but read from a dozen points
    # it is often half the true spread; the mean of the smallest 80% of deviations is steadier and still
    # ignores up to a fifth of the points changing. The larger of the two errs towards calling a change noise.
    kept = deviations[: max(1, math.ceil(TRIM_KEEP * n))]
    spread = max(MAD_TO_SIGMA * deviations[(n - 1) // 2], statistics.fmean(kept) / TRIMMED_MEAN_ABS_DEV)
    scatter = math.sqrt(max(0.0, spread * spread - typical * typical))
    # The points' own spread, not their within-run errors: when every point moved alike (a file and the
    # same file 10% slower) the factor is known however noisy each run was.
    error = MEDIAN_EFFICIENCY * spread / math.sqrt(n)
    return RunFactor(math.exp(centre), error, scatter, n, n >= MIN_POINTS_FOR_FACTOR, bound)


def compare_rows(base: Iterable[ResultRow], new: Iterable[ResultRow], *, threshold: float | None = None) -> Comparison:
    """Match the two runs' points, estimate the whole-run factor and judge each change against it.

    The rows may be a stream: each side is folded into its points as read, never held. ``threshold``
    (a fraction) is the bound the whole-run factor is held to (RUN_DRIFT_BOUND when None).

    Raises UserError when the runs share no world size (naming both), or when no point matches
    (naming what each run has).
    """
    base_run, new_run = _Run.of(base), _Run.of(new)
    base_pts, new_pts = base_run.points(), new_run.points()
    base_ws = sorted({k[4] for k in base_pts})
    new_ws = sorted({k[4] for k in new_pts})
    if not base_pts or not new_pts:
        empty = "BASE" if not base_pts else "NEW"
        raise UserError(f"{empty} has no point with a positive time to compare")
    if not set(base_ws) & set(new_ws):
        raise UserError(
            f"the runs have different world sizes: BASE {_ranks(base_ws)}, NEW {_ranks(new_ws)}; "
            "compare runs of the same world size"
        )
    common = sorted(base_pts.keys() & new_pts.keys())
    if not common:
        raise UserError(
            "no point matches on (op, algorithm, size, dtype, ranks): "
            f"BASE has {_describe(base_pts)}; NEW has {_describe(new_pts)}"
        )
    pairs = [(base_pts[k], new_pts[k]) for k in common]
    errors = [math.hypot(b.rel_error, n.rel_error) for b, n in pairs]
    bound = RUN_DRIFT_BOUND if threshold is None else threshold
    run = run_factor([math.log(n.time_us / b.time_us) for b, n in pairs], errors, bound)
    if run.divided_out:
        drift = math.hypot(run.rel_error, run.scatter)
        # Satterthwaite: the share of a point's variance that was estimated from the points sets its dof.
        dof_drift = MAD_DOF_PER_POINT * (len(pairs) - 1)
        dofs = [dof_drift * ((e * e + drift * drift) / (drift * drift)) ** 2 if drift > 0 else math.inf for e in errors]
        zs = family_z(len(pairs), dofs)
    else:
        drift = 0.0
        zs = family_z(len(pairs))
    changes = tuple(
        PointChange(*k, base=b, new=n, run_factor=run.factor if run.divided_out else 1.0, run_error=drift, z=z)
        for k, (b, n), z in zip(common, pairs, zs, strict=True)
    )
    warnings = _differences(base_run, new_run, base_ws, new_ws)
    return Comparison(
        changes,
        only_base=len(base_pts) - len(common),
        only_new=len(new_pts) - len(common),
        run=run,
        warnings=warnings,
    )


def _differences(base: _Run, new: _Run, base_ws: list[int], new_ws: list[int]) -> tuple[str, ...]:
    """One line per way the runs differ beyond their points: what ran them, or their world sizes."""
    out = []
    for name, label in FACT_FIELDS:
        a, b = base.facts[name], new.facts[name]
        if a and b and a != b:
            out.append(f"the runs differ in {label}: BASE {_listing(sorted(a))}, NEW {_listing(sorted(b))}")
    if base.reductions != new.reductions or len(base.reductions) > 1:
        # Points match without the reduction: a run of -o sum against one of -o max was compared unsaid.
        out.append(
            f"the runs' reductions: BASE {_listing(sorted(base.reductions))}, NEW {_listing(sorted(new.reductions))}; "
            "rows of different reductions are compared as one point"
        )
    if base_ws != new_ws:
        out.append(
            f"the runs differ in world sizes: BASE {_listing(base_ws)}, NEW {_listing(new_ws)} "
            "(only the shared ones are compared)"
        )
    return tuple(out)


def _listing(values: Sequence[Any]) -> str:
    return ", ".join(str(v) for v in values)


def _ranks(world_sizes: Sequence[int]) -> str:
    """``1 rank``, ``2 ranks``, ``2, 4 ranks``: a run of one rank said '1 ranks'."""
    return f"{_listing(world_sizes)} rank{'' if list(world_sizes) == [1] else 's'}"


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
