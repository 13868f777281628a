"""Measured points: the rows of one variant at one size folded into one time with its noise.

The time compared is ``decision_time_us``: each row's first quartile (its p50 for rows without one),
the smallest of them across repeated rows (rounds), since a round that a burst of load hit must not
decide (docs/tuning.md, "Which time decisions use").

Rows of a tune's rounds (``tune_round``) are first put at the fastest round's speed
(:func:`round_speeds`): rounds are blocks of a machine whose speed drifts, and a round the whole
machine ran slower in must neither decide nor widen the noise.

The noise of a point has two parts, added in quadrature. Within the point: the uncertainty of its
time, the iterations' relative spread below it, ``(t - min) / t`` (jitter on a shared machine, not
driven by one slow outlier as ``max`` would be), divided by the square root of the iterations timed
(a quantile of n samples varies about 1/sqrt(n) as much as one sample). Between repeats: where a
point was measured several times (``collbench tune`` sweeps in rounds, the algorithms in alternating
order), how far the smallest of its rounds' times is from the next smallest, relative to it. The
point's time is the smallest over rounds, so that gap is how much it would move with one round
fewer: it sees what one point's iterations cannot (the machine's load drifting while a sweep measures
one algorithm after another), and, unlike a standard deviation, a round that a burst of load hit does
not widen it: a burst makes that round's time large, not the smallest two. Since that load is the
machine's, a point's gap is raised to the median gap of every algorithm measured at its size: two
rounds of one point can agree closely by chance. A point measured once, in the stall regime, has no
such figure; its noise is then its whole spread (stalls come in bursts, so its iterations are not
independent samples). The scatter of points around the fitted curves is not used: it mixes noise
with model misfit.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from collbench.profile.rules import Variant
from collbench.results.noise import decision_time_us, row_stalled
from collbench.results.row import ResultRow


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """One variant's measured time at one size (several rows at a size are combined)."""

    size_bytes: int
    time_us: float
    time_us_min: float
    time_us_max: float
    iters: int = 1
    """Timed samples behind the point's rows (iterations, or rounds of them on GPUs: ResultRow.samples)."""
    between: float = 0.0
    """How far the second-smallest time of repeated rows (rounds) is above the smallest, relatively;
    0 for one row."""
    stalled: bool = False
    """Whether a row of the point was in the stall regime (results/noise.py)."""
    rounds: int = 1
    """Rows combined into the point (rounds, repeats, in place and out of place)."""
    by_round: tuple[tuple[int, float], ...] = ()
    """(round, smallest decision time in it) for rows of a tune's marked rounds, by round."""
    cut_short: bool = False
    """Whether the point's rows were all cut short (``ResultRow.cut_short``): its one timed iteration was
    clearly behind a point measured in full at its size, and no round timed it in full. Selection never
    ties nor chooses it."""
    measured_us: float | None = None
    """The smallest decision time as measured (``time_us`` is at the fastest round's speed, for
    comparisons; this is what a profile and a check show as measured). None: the same as time_us."""

    @property
    def shown_us(self) -> float:
        """The time to show as measured: ``measured_us``, else ``time_us``."""
        return self.time_us if self.measured_us is None else self.measured_us

    @property
    def spread(self) -> float:
        """Relative distance of the typical iteration above the fastest one (0 when exact)."""
        if self.time_us <= 0:
            return 0.0
        return max(0.0, (self.time_us - self.time_us_min) / self.time_us)

    @property
    def noise(self) -> float:
        """Relative uncertainty of the point's time: the spread over sqrt(iterations), and between rounds.

        A stalled point measured once has its whole spread as noise: stalls come in bursts (a busy
        minute on the machine), so its iterations are not independent samples, and its time moves
        from one run to the next by about the whole spread. Measured in several rounds, how far its
        rounds' times are apart says that directly (``between``).
        """
        single = self.stalled and self.rounds < 2
        within = self.spread if single else self.spread / math.sqrt(max(self.iters, 1))
        return math.hypot(within, self.between)


def ratio_error(ratio: float, a: Point, b: Point) -> float:
    """One standard error of ``ratio``, a ratio of the times of ``a`` and ``b``: their relative noises add
    in quadrature. What a check's regret (chosen / fastest) and a rule's gain over native (native /
    chosen) are said with, as ``x±err``."""
    return ratio * math.hypot(a.noise, b.noise)


Points = dict[Variant, dict[int, Point]]
"""One op's points: per variant, per size."""
PointsByOp = dict[str, Points]
"""Every op's points, as :func:`measured_points` folds them."""


def points_at(variants: Points, size: int) -> dict[Variant, Point]:
    """The variants measured at ``size``, with their points there."""
    return {v: pts[size] for v, pts in variants.items() if size in pts}


def sizes_of(variants: Points) -> list[int]:
    """Every size some variant was measured at, ascending."""
    return sorted({s for pts in variants.values() for s in pts})


def in_round(rows: Iterable[ResultRow], index: int) -> list[ResultRow]:
    """``rows`` marked as measured in round ``index`` of a tune (or of a check)."""
    return [dataclasses.replace(row, tune_round=index) for row in rows]


ROUND_MIN_SHARED = 3
"""Variants a round must share with the fastest round at a size for its speed to be estimated there."""


def round_speeds(rows: Sequence[ResultRow]) -> dict[int, float]:
    """Per round, how much slower the machine ran than in the fastest round (1.0: as fast), at one size.

    Rounds are blocks: every algorithm at a size is measured within a fraction of a second of the
    others in the same round (``SweepConfig.interleave``), and minutes from the next round's. When the
    machine's own speed changes between rounds (a shared or throttled machine), all of a round's
    times move together, for every algorithm and without one stalled iteration. Each round's factor
    is the median, over the variants it shares with a reference round, of their time ratio (a block
    effect, as in a median polish), then expressed against the fastest round. A round sharing fewer
    than ROUND_MIN_SHARED variants with the reference keeps 1.0 (with two, each would carry half the
    other's difference).
    """
    by_variant: dict[tuple[str, int | None, str], list[ResultRow]] = defaultdict(list)
    # A row cut short rests on one iteration: the round's speed comes from the points timed in full.
    for row in (r for r in rows if r.cut_short is None):
        by_variant[(row.algo, row.segment_bytes, row.layout)].append(row)
    times: dict[int, dict[tuple[str, int | None, str], float]] = defaultdict(dict)
    for key, of_variant in by_variant.items():
        for index, t in _best_per_round(of_variant).items():
            times[index][key] = t
    if len(times) < 2:
        return {}
    reference = max(sorted(times), key=lambda r: len(times[r]))
    factors = {reference: 1.0}
    for index, these in times.items():
        shared = [these[k] / times[reference][k] for k in these if k in times[reference]]
        if index != reference:
            factors[index] = statistics.median(shared) if len(shared) >= ROUND_MIN_SHARED else 1.0
    fastest = min(factors.values())
    return {index: factor / fastest for index, factor in factors.items()}


def _best_per_round(rows: Iterable[ResultRow]) -> dict[int, float]:
    """Per marked round, the smallest decision time of ``rows`` in it (rows of no round are left out)."""
    best: dict[int, float] = {}
    for row in rows:
        if row.tune_round is not None:
            t = decision_time_us(row)
            best[row.tune_round] = min(t, best.get(row.tune_round, t))
    return best


def _at_round_speed(rows: list[ResultRow]) -> list[ResultRow]:
    """The rows of one size with their times as if every round had run at the fastest round's speed."""
    speeds = round_speeds(rows)
    if not speeds or all(abs(f - 1.0) < 1e-12 for f in speeds.values()):
        return rows
    out = []
    for row in rows:
        f = speeds.get(row.tune_round, 1.0) if row.tune_round is not None else 1.0
        if f == 1.0:
            out.append(row)
            continue
        p25 = None if row.time_us_p25 is None else row.time_us_p25 / f
        out.append(
            dataclasses.replace(
                row,
                time_us=row.time_us / f,
                time_us_p25=p25,
                time_us_min=row.time_us_min / f,
                time_us_max=row.time_us_max / f,
            )
        )
    return out


def measured_points(rows: Iterable[ResultRow]) -> PointsByOp:
    """Per op, per variant, per size: the combined measured point. Rows with wrong data are dropped.

    Several rows at one size (in-place and out-of-place, repeats) combine into the smallest of their
    decision times (``decision_time_us``), the smallest min and the largest max. Rows of one algorithm
    at a size no larger than their segment size are the same schedule whatever the segment size, so
    they combine too. Rows of a tune's rounds are first put at the speed of its fastest round
    (:func:`round_speeds`), so that a round the whole machine ran slower in neither decides nor widens
    the noise: what is left between rounds is each algorithm's own variation.
    """
    grouped: dict[str, dict[Variant, dict[int, list[ResultRow]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    usable = [r for r in rows if r.wrong <= 0 and math.isfinite(r.time_us) and r.time_us > 0]
    at_size: dict[tuple[str, int], list[ResultRow]] = defaultdict(list)
    for row in usable:
        at_size[(row.op, row.size_bytes)].append(row)
    # (as measured, at the fastest round's speed) for every usable row
    pairs = [pair for rows_at in at_size.values() for pair in zip(rows_at, _at_round_speed(rows_at), strict=True)]
    segments: dict[tuple[str, str, str], set[int]] = defaultdict(set)
    for row in usable:
        if row.segment_bytes is not None:
            segments[(row.op, row.algo, row.layout)].add(row.segment_bytes)
    measured: dict[tuple[str, Variant, int], float] = {}
    for raw, row in pairs:
        seg = row.segment_bytes
        if seg is not None and seg >= row.size_bytes:
            # A message no larger than one segment runs the same way whatever the segment size: such
            # rows are repeats of one variant, filed under the largest segment size measured.
            seg = max(segments[(row.op, row.algo, row.layout)])
        variant = Variant(row.algo, seg, row.layout or "rank-order")
        grouped[row.op][variant][row.size_bytes].append(row)
        key = (row.op, variant, row.size_bytes)
        measured[key] = min(decision_time_us(raw), measured.get(key, math.inf))
    out: PointsByOp = {}
    for op, variants in grouped.items():
        out[op] = {}
        for variant, by_size in variants.items():
            out[op][variant] = {
                size: dataclasses.replace(_point(size, rs), measured_us=measured[(op, variant, size)])
                for size, rs in by_size.items()
            }
        _pool_between(out[op])
    return out


def _pool_between(variants: Points) -> None:
    """Raise each point's between-round noise to the median of every variant's at its size.

    The load that moves a round's time is the machine's, shared by every algorithm measured at that
    size in that round; one point's gap between two rounds is a poor estimate of it on its own (two
    rounds can agree to 0.5% by chance where runs differ by 10%). The median over the variants is a
    steadier one, and a point noisier than that keeps its own.
    """
    for size in sizes_of(variants):
        gaps = [pts[size].between for pts in variants.values() if size in pts and pts[size].rounds > 1]
        if len(gaps) < 2:
            continue
        pooled = statistics.median(gaps)
        for pts in variants.values():
            point = pts.get(size)
            if point is not None and point.rounds > 1 and point.between < pooled:
                pts[size] = dataclasses.replace(point, between=pooled)


def _point(size: int, rows: list[ResultRow]) -> Point:
    """The rows of one variant at one size as one point: its time is the smallest decision time, and
    ``between`` how far the second-smallest is above it, relatively (how much the time moves with one
    round fewer; 0 for a single row).

    A row cut short (one timed iteration) gives the point only where no row of it was timed in full, as
    for a fit (models/fit_points.py): a point timed in full in one round and cut short in another (its
    one iteration there stalled past 2x a point measured before it) is that full measurement, not a
    point selection may never choose."""
    full = [r for r in rows if r.cut_short is None]
    used = full or rows
    times = sorted(decision_time_us(r) for r in used)
    return Point(
        size_bytes=size,
        time_us=times[0],
        time_us_min=min(r.time_us_min for r in used),
        time_us_max=max(r.time_us_max for r in used),
        iters=sum(max(r.samples, 1) for r in used),
        between=(times[1] - times[0]) / times[0] if len(times) > 1 else 0.0,
        stalled=any(row_stalled(r) for r in used),
        rounds=len(used),
        by_round=tuple(sorted(_best_per_round(used).items())),
        cut_short=not full,
    )
