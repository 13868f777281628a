"""Selection: per op and size range, which algorithm (with its parameters) to run.

The answer is a list of :class:`Rule` per op whose ranges cover ``[0, unbounded)`` with no gaps: rule
``i`` covers ``min_bytes..max_bytes`` inclusive (the NCCL tuner's convention), rule ``i + 1`` starts at
``max_bytes + 1``, and the last rule has ``max_bytes = None`` (unbounded).

How the winner is chosen:

* At every measured size, each *variant* (algorithm, segment size, layout) has a measured time (see
  ``decision_time_us`` below). Rows with wrong elements never win.
* Walking the sizes upwards, the current winner is kept unless another variant is faster by more than
  the measurement's noise (hysteresis: a switch must be earned, so noise cannot make the rules flap).
  The walk starts with the backend's default, ``native``, as the incumbent where it was measured, so a
  profile only departs from the default where that pays beyond the noise.
* The noise of a point has two parts, added in quadrature. Within the point: the uncertainty of its
  time, the iterations' relative spread below it, ``(t - min) / t`` (jitter on a shared machine, not
  driven by one slow outlier as ``max`` would be), divided by the square root of the iterations timed
  (a quantile of n samples varies about 1/sqrt(n) as much as one sample). Between repeats: where a
  point was measured several times (``collbench tune`` sweeps in rounds, the algorithms in
  alternating order), how far the smallest of its rounds' times is from the next smallest, relative
  to it. The point's time is the smallest over rounds, so that gap is how much it would move with one
  round fewer: it sees what one point's iterations cannot (the machine's load drifting while a sweep
  measures one algorithm after another), and, unlike a standard deviation, a round that a burst of
  load hit does not widen it: a burst makes that round's time large, not the smallest two. Since
  that load is the machine's, a point's gap is raised to the median gap of every algorithm measured
  at its size: two rounds of one point can agree closely by chance. A point
  measured once, in the stall regime, has no such figure; its noise is then its whole spread (stalls
  come in bursts, so its iterations are not independent samples).
  (The scatter of points around the fitted curves is not used: it mixes noise with model misfit.)
* To switch from A to B at a size, B must be faster by more than the two points' combined noise,
  ``sqrt(noise_A^2 + noise_B^2)``, and at least ``min_gain`` (3% by default); the bar is capped at
  ``max_threshold`` (25%) so that on a very noisy machine a clearly faster algorithm (2x at large
  sizes) still wins, except where a point stalled (runtime/noise.py): there the noise is the
  iterations' whole spread, uncapped, since a difference inside the stall noise is no finding.
* Ties. At each size, every variant within that bar of the fastest cannot be told apart from it: they
  are tied, and a tie goes to the simpler choice: native when it is in the tie, else the variant in
  use at the size below, else the fastest. The rule records the variants it was tied with
  (``tie_with``), and at ``at_bytes`` how far the fastest other variant was (``separation``) against
  the bar (``noise``).
* The time compared is ``decision_time_us``: each row's first quartile (its p50 for rows without
  one), the smallest of them across repeated rows (rounds): a round that a burst of load hit must
  not decide (measured in benchmarks/bench_statistics.py; README "Which time decisions use").
* Rows of a tune's rounds (``tune_round``) are first put at the fastest round's speed
  (:func:`round_speeds`), and a winner must also stay ahead of the others round by round
  (``_apart_round_by_round``): rounds are blocks of a machine whose speed drifts.
* Between two measured sizes with different winners, the boundary is where the fitted models (when
  given) predict the new winner becomes faster than the old one; without fits, when the predictions
  do not cross inside the gap, or when either fit misses a measured end of the gap by more than 10%
  (``GAP_FIT_TOLERANCE``), the geometric middle of the gap. Only the two measured
  winners compete there: an algorithm that won at neither neighbouring measured size is not claimed
  on predictions alone.
* Adjacent ranges with the same winner are merged.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from collbench.errors import ConfigError
from collbench.profile.rules import Rule, Variant
from collbench.results.noise import decision_time_us, row_stalled
from collbench.results.row import ResultRow

NATIVE = "native"
DEFAULT_MIN_GAIN = 0.03
DEFAULT_MAX_THRESHOLD = 0.25
DEFAULT_SIGMAS = 2.0
"""How many times the combined noise of two points their times must differ by to be told apart, as
``collbench compare`` asks of a change. At one, two algorithms that run the same exchange (one-shot
and recursive doubling on 2 ranks) were called apart in 1 of 4 sizes that either of two quiet runs
separated, the other run calling them the other way round (issue 10's replicate benchmark, pairs 7
and 8); at two, in none of 3."""


class FitLike(Protocol):
    """What selection needs from a fitted model (H5a's ``collbench.models.fit.Fit`` satisfies it)."""

    @property
    def op(self) -> Any: ...

    @property
    def algo(self) -> str: ...

    def predict_us(self, size_bytes: int, world_size: int | None = None) -> float: ...


@dataclass(frozen=True, slots=True)
class Point:
    """One variant's measured time at one size (several rows at a size are combined)."""

    size_bytes: int
    time_us: float
    time_us_min: float
    time_us_max: float
    iters: int = 1
    between: float = 0.0
    """How far the second-smallest time of repeated rows (rounds) is above the smallest, relatively;
    0 for one row."""
    stalled: bool = False
    """Whether a row of the point was in the stall regime (runtime/noise.py)."""
    rounds: int = 1
    """Rows combined into the point (rounds, repeats, in place and out of place)."""
    by_round: tuple[tuple[int, float], ...] = ()
    """(round, smallest decision time in it) for rows of a tune's marked rounds, by round."""
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
        minute on the machine), so its iterations are not independent samples, and the time moves
        between runs by about the whole spread (measured: issue 10's replicate benchmark). Measured in
        several rounds, how far its rounds' times are apart says that directly (``between``).
        """
        single = self.stalled and self.rounds < 2
        within = self.spread if single else self.spread / math.sqrt(max(self.iters, 1))
        return math.hypot(within, self.between)


@dataclass(frozen=True, slots=True)
class SelectionSettings:
    """How far a challenger must beat the incumbent before the rules switch algorithm."""

    min_gain: float = DEFAULT_MIN_GAIN
    """Smallest relative gain that counts, whatever the measured noise (0.03 = 3%)."""
    max_threshold: float = DEFAULT_MAX_THRESHOLD
    """Largest threshold the noise can raise the bar to."""
    sigmas: float = DEFAULT_SIGMAS
    """Multiples of the two points' combined noise that a gain must exceed."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_gain <= self.max_threshold < 1.0:
            raise ConfigError(
                f"selection thresholds must satisfy 0 <= min_gain <= max_threshold < 1, "
                f"got min_gain={self.min_gain}, max_threshold={self.max_threshold}"
            )
        if not self.sigmas > 0:
            raise ConfigError(f"selection needs a positive number of sigmas, got {self.sigmas}")

    def threshold(self, noise_a: float, noise_b: float, *, capped: bool = True) -> float:
        """The relative gain B needs over A to replace it: ``sigmas`` times the combined noise, floored,
        and capped unless told not."""
        bar = max(self.min_gain, self.sigmas * math.hypot(noise_a, noise_b))
        return min(self.max_threshold, bar) if capped else bar

    def bar(self, a: Point, b: Point) -> float:
        """The relative difference two points cannot resolve.

        Capped at ``max_threshold`` for points of a steady machine (jitter there is independent from
        call to call, so a clearly faster algorithm wins however noisy); not capped when either point
        stalled, or when its rounds disagree by more than the cap (the machine itself changed speed
        between them): a difference inside that noise is not a finding, whatever its size. Measured on
        the quiet VM: one round of a tune ran 26-29% faster than the other three, for the algorithms
        it measured first only; capped, their best times beat the others "beyond the noise" at 6 of 13
        sizes, and a second tune, all of whose rounds agreed, chose the others there.
        """
        steady = not (a.stalled or b.stalled) and max(a.between, b.between) <= self.max_threshold
        return self.threshold(a.noise, b.noise, capped=steady)


def in_round(rows: Iterable[ResultRow], index: int) -> list[ResultRow]:
    """``rows`` marked as measured in round ``index`` of a tune (or of a check)."""
    return [dataclasses.replace(row, tune_round=index) for row in rows]


ROUND_MIN_SHARED = 3
"""Variants a round must share with the fastest round at a size for its speed to be estimated there."""


def round_speeds(rows: Sequence[ResultRow]) -> dict[int, float]:
    """Per round, how much slower the machine ran than in the fastest round (1.0: as fast), at one size.

    Rounds are blocks: every algorithm at a size is measured within a fraction of a second of the
    others in the same round (``SweepConfig.interleave``), and minutes from the next round's. When the
    machine's own speed changes between rounds, all of a round's times move together: measured on
    the 2-core VM, a tune whose first round ran 26-30% faster than its other three at every size and
    for every algorithm, without one stalled iteration. Each round's factor is the median, over the
    variants it shares with a reference round, of their time ratio (a block effect, as in a median
    polish), then expressed against the fastest round. A round sharing fewer than ROUND_MIN_SHARED
    variants with the reference keeps 1.0 (with two, each would carry half the other's difference).
    """
    by_variant: dict[tuple[str, int | None, str], list[ResultRow]] = defaultdict(list)
    for row in rows:
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


def measured_points(rows: Iterable[ResultRow]) -> dict[str, dict[Variant, dict[int, Point]]]:
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
    out: dict[str, dict[Variant, dict[int, Point]]] = {}
    for op, variants in grouped.items():
        out[op] = {}
        for variant, by_size in variants.items():
            out[op][variant] = {
                size: dataclasses.replace(_point(size, rs), measured_us=measured[(op, variant, size)])
                for size, rs in by_size.items()
            }
        _pool_between(out[op])
    return out


def _pool_between(variants: dict[Variant, dict[int, Point]]) -> None:
    """Raise each point's between-round noise to the median of every variant's at its size.

    The load that moves a round's time is the machine's, shared by every algorithm measured at that
    size in that round; one point's gap between two rounds is a poor estimate of it on its own (two
    rounds can agree to 0.5% by chance where runs differ by 10%). The median over the variants is a
    steadier one, and a point noisier than that keeps its own.
    """
    sizes = {size for points in variants.values() for size in points}
    for size in sizes:
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
    round fewer; 0 for a single row)."""
    times = sorted(decision_time_us(r) for r in rows)
    return Point(
        size,
        times[0],
        min(r.time_us_min for r in rows),
        max(r.time_us_max for r in rows),
        sum(max(r.iters, 1) for r in rows),
        (times[1] - times[0]) / times[0] if len(times) > 1 else 0.0,
        any(row_stalled(r) for r in rows),
        len(rows),
        tuple(sorted(_best_per_round(rows).items())),
    )


def select_rules(
    rows: Sequence[ResultRow],
    fits: Sequence[FitLike] = (),
    *,
    settings: SelectionSettings | None = None,
) -> list[Rule]:
    """Rules for every op in ``rows`` (one world size and backend), covering 0 to unbounded.

    ``fits`` place the boundaries between measured sizes and fill ``predicted_us``. Raises ConfigError
    when the rows mix world sizes or backends (a profile is for one of each) or when no row is usable.
    """
    settings = settings or SelectionSettings()
    worlds = {r.world_size for r in rows}
    backends = {r.backend for r in rows}
    if len(worlds) > 1 or len(backends) > 1:
        raise ConfigError(
            f"results mix world sizes {sorted(worlds)} / backends {sorted(backends)}; "
            "a profile is for one world size and one backend: filter the results first"
        )
    points = measured_points(rows)
    if not points:
        raise ConfigError("no usable result rows (every row had wrong data or no time): nothing to select from")
    world_size = next(iter(worlds))
    fit_by_key = {(str(getattr(f.op, "value", f.op)), f.algo): f for f in fits}
    rules: list[Rule] = []
    for op in sorted(points):
        rules.extend(_select_op(op, points[op], fit_by_key, world_size, settings))
    return rules


def _select_op(
    op: str,
    variants: dict[Variant, dict[int, Point]],
    fits: dict[tuple[str, str], FitLike],
    world_size: int,
    settings: SelectionSettings,
) -> list[Rule]:
    def predict(variant: Variant, size: float) -> float | None:
        fit = fits.get((op, variant.algo))
        if fit is None:
            return None
        value = fit.predict_us(int(size), world_size)
        return float(value) if value is not None and math.isfinite(value) and value > 0 else None

    sizes = sorted({s for pts in variants.values() for s in pts})
    winners: list[Variant] = []
    ties: dict[int, tuple[Variant, ...]] = {}
    current: Variant | None = None
    for size in sizes:
        here = {v: pts[size] for v, pts in variants.items() if size in pts}
        current, tied = decide_at(here, current, settings)
        ties[size] = tied
        winners.append(current)

    # Ranges [start, next start) per measured winner, boundaries placed between measured sizes.
    starts: list[tuple[int, Variant]] = [(0, winners[0])]
    for i in range(1, len(sizes)):
        prev, new = winners[i - 1], winners[i]
        if new == prev:
            continue
        lo, hi = sizes[i - 1], sizes[i]
        held = all(_fit_holds(predict, v, size, variants[v].get(size)) for v in (prev, new) for size in (lo, hi))
        boundary = _boundary(lo, hi, prev, new, predict if held else _no_prediction)
        starts.append((boundary, new))
    merged: list[tuple[int, Variant]] = []
    for start, variant in starts:
        if merged and merged[-1][1] == variant:
            continue
        merged.append((start, variant))

    native_pts = next((pts for v, pts in variants.items() if v.algo == NATIVE), None)
    rules: list[Rule] = []
    for i, (start, variant) in enumerate(merged):
        stop = merged[i + 1][0] - 1 if i + 1 < len(merged) else None
        inside = [s for s in sizes if s >= start and (stop is None or s <= stop) and s in variants[variant]]
        at = inside[len(inside) // 2] if inside else _middle(start, stop)
        measured = variants[variant][at].shown_us if at in variants[variant] else None
        predicted = predict(variant, at)
        gain = None
        if variant.algo == NATIVE:
            gain = 1.0
        else:
            mine = measured if measured is not None else predicted
            if native_pts is not None and at in native_pts:
                theirs: float | None = native_pts[at].shown_us
            else:
                theirs = predict(Variant(NATIVE), at)
            if mine and theirs:
                gain = theirs / mine
        tie_with = sorted({t.label() for s in inside if winners[sizes.index(s)] == variant for t in ties[s]})
        separation, noise = _evidence_at(variants, variant, at, settings)
        rules.append(
            Rule(
                op=op,
                min_bytes=start,
                max_bytes=stop,
                algo=variant.algo,
                params=variant.params(),
                at_bytes=at,
                predicted_us=_round(predicted),
                measured_us=_round(measured),
                gain_vs_native=_round(gain, 4),
                tie_with=tuple(tie_with),
                separation=_round(separation, 4),
                noise=_round(noise, 4),
            )
        )
    return rules


def decide_at(
    here: dict[Variant, Point], current: Variant | None, settings: SelectionSettings
) -> tuple[Variant, tuple[Variant, ...]]:
    """The variant to run at one size, and the others it is tied with there.

    The fastest variant and every variant whose time is within the noise bar of it (``settings.
    threshold`` of the two points' noise) cannot be told apart: they are tied. A tie goes to the
    simpler choice: the backend's own collective (native) when it is in the tie, else the variant
    already in use at the size below (so that noise cannot make the rules flap), else the fastest.
    """
    best = min(here, key=lambda v: (here[v].time_us, v.algo != NATIVE))
    fastest = here[best]
    tied = [
        v
        for v in here
        if v == best
        or here[v].time_us <= fastest.time_us * (1.0 + settings.bar(here[v], fastest))
        or not _apart_round_by_round(here[v], fastest, settings)
    ]
    natives = [v for v in tied if v.algo == NATIVE]
    if natives:
        chosen = natives[0]
    elif current is not None and current in tied:
        chosen = current
    else:
        chosen = best
    return chosen, tuple(v for v in tied if v != chosen)


def _apart_round_by_round(slower: Point, faster: Point, settings: SelectionSettings) -> bool:
    """Whether, round by round, ``slower`` stays slower than ``faster`` beyond the noise.

    Each point's time is its best round's, so a variant with one lucky round can lead one that was as
    fast in every other round. Where both were measured in the same two or more rounds, the rounds'
    time ratios must say so too: their mean log ratio, less ``sigmas`` standard errors, above the
    smallest gain that counts. Measured (issue 10's replicate benchmark, pair 20): one-shot led
    recursive doubling by 7% at 16 KiB on its best round, while round by round it was 7%, -1%, 10%
    and 1% faster; the other tune found them equal. Two shared rounds are too few to tell a real lead
    from two rounds that agreed by chance (pair 19: two-tree led native by 5% and 9% in the two rounds
    of one tune; in the other tune's four it ran 211-366 us against native's 228-240): False, so that
    the tune measures the size again (``rounds.unsettled``). Fewer shared rounds: True (nothing to
    add to the comparison of best times).
    """
    mine, theirs = dict(slower.by_round), dict(faster.by_round)
    logs = [math.log(mine[r] / theirs[r]) for r in mine if r in theirs and mine[r] > 0 and theirs[r] > 0]
    if len(logs) < 2:
        return True
    if len(logs) < 3:
        return False
    error = statistics.stdev(logs) / math.sqrt(len(logs))
    return statistics.fmean(logs) - settings.sigmas * error > math.log1p(settings.min_gain)


def separated(here: dict[Variant, Point], settings: SelectionSettings) -> bool:
    """Whether the fastest variant at a size is faster than every other beyond the measured noise."""
    if len(here) < 2:
        return True
    _, tied = decide_at(here, None, settings)
    return not tied


def _evidence_at(
    variants: dict[Variant, dict[int, Point]], chosen: Variant, at: int, settings: SelectionSettings
) -> tuple[float | None, float | None]:
    """(separation, noise bar) of the chosen variant against the fastest other one at ``at``."""
    if at not in variants.get(chosen, {}):
        return None, None
    mine = variants[chosen][at]
    others = [pts[at] for v, pts in variants.items() if v != chosen and at in pts]
    if not others or mine.time_us <= 0:
        return None, None
    rival = min(others, key=lambda p: p.time_us)
    return rival.time_us / mine.time_us - 1.0, settings.bar(mine, rival)


GAP_FIT_TOLERANCE = 0.10
"""How close (relatively) both fits must come to both measured ends of a gap for their crossover to
place the boundary inside it."""


def _fit_holds(predict: Any, variant: Variant, size: int, point: Point | None) -> bool:
    """Whether ``variant``'s fit reproduces its measured time at ``size`` within GAP_FIT_TOLERANCE.

    A model that misses the measured ends of a gap (a cache cliff between them, which no alpha-beta
    line has) says nothing about where inside the gap one algorithm overtakes the other. Measured on
    the 2-core VM: recursive doubling's fit was 26% above its time at 512 KiB and 14% below at 1 MiB;
    the crossover it gave (530 KiB) chose rabenseifner at 674 KiB, where recursive doubling was
    re-measured 22% faster (issue 10's rules benchmark).
    """
    if point is None:
        return True  # not measured at that end: nothing to hold the fit to
    predicted = predict(variant, size)
    return predicted is not None and abs(predicted / point.time_us - 1.0) <= GAP_FIT_TOLERANCE


def _no_prediction(_variant: Variant, _size: float) -> None:
    return None


def _boundary(lo: int, hi: int, old: Variant, new: Variant, predict: Any) -> int:
    """First size in ``(lo, hi]`` where ``new`` is predicted faster than ``old`` (bisection in log size)."""

    def new_wins(size: float) -> bool | None:
        a, b = predict(old, size), predict(new, size)
        if a is None or b is None:
            return None
        return bool(b < a)

    at_lo, at_hi = new_wins(lo), new_wins(hi)
    if at_lo is None or at_hi is None or at_lo or not at_hi:
        # No fits, or the fits disagree with the measurements at the ends: split the gap evenly
        # on a log scale, the scale the sizes were swept on.
        return max(lo + 1, round(math.sqrt(max(lo, 1) * hi)))
    a, b = lo, hi
    while b - a > 1:
        mid = int(math.sqrt(max(a, 1) * b))
        mid = min(max(mid, a + 1), b - 1)
        if new_wins(mid):
            b = mid
        else:
            a = mid
    return b


def _middle(start: int, stop: int | None) -> int:
    if stop is None:
        return max(start, 1)
    return int(math.sqrt(max(start, 1) * max(stop, 1)))


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(float(value), digits)
