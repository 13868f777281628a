"""The building of ranges: walking an op's sizes upwards, placing boundaries in the gaps, merging.

* Walking the sizes upwards, the winner at each size is decided (decision.py) with the variant in use
  below as the incumbent, so a switch must be earned beyond the noise. The walk starts with the
  backend's default, ``native``, where it was measured, so a profile departs from the default only
  where that pays.
* Between two measured sizes with different winners, the boundary is where the fitted models (when
  given) predict the new winner becomes faster than the old one; without fits, when the predictions
  do not cross inside the gap, or when either fit misses a measured end of the gap by more than 10%
  (``GAP_FIT_TOLERANCE``), the geometric middle of the gap. Only the two measured winners compete
  there: an algorithm that won at neither neighbouring measured size is not claimed on predictions
  alone.
* Adjacent ranges with the same winner are merged. Each rule records its evidence at ``at_bytes`` (a
  measured size inside it): the variants it was tied with (``tie_with``), how far the fastest other
  variant was (``separation``) against the bar (``noise``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol

from collbench.errors import ConfigError
from collbench.profile.rules import AlgoRef, Rule, Variant
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op
from collbench.tuning.selection.decision import NATIVE, SelectionSettings, decide_at
from collbench.tuning.selection.points import (
    Point,
    Points,
    PointsByOp,
    measured_points,
    points_at,
    ratio_error,
    sizes_of,
)


class FitLike(Protocol):
    """What selection needs from a fitted model (``collbench.models.fitted.Fit`` is one)."""

    @property
    def op(self) -> str: ...

    @property
    def algo(self) -> str: ...

    def predict_us(self, size_bytes: int, world_size: int | None = None) -> float: ...


Predict = Callable[[Variant, float], float | None]
"""A variant's predicted time (us) at a size, or None where no fit says."""


def select_rules(
    rows: Sequence[ResultRow],
    fits: Sequence[FitLike] = (),
    *,
    settings: SelectionSettings | None = None,
    points: PointsByOp | None = None,
) -> list[Rule]:
    """Rules for every op in ``rows`` (one world size and backend), covering 0 to unbounded.

    ``fits`` place the boundaries between measured sizes and fill ``predicted_us``. ``points`` is
    ``measured_points(rows)`` where the caller has folded the rows already (a tune does, to count its
    settled sizes), so that they are folded once. Raises ConfigError when the rows mix world sizes or
    backends (a profile is for one of each) or when no row is usable.
    """
    settings = settings or SelectionSettings()
    worlds = {r.world_size for r in rows}
    backends = {r.backend for r in rows}
    if len(worlds) > 1 or len(backends) > 1:
        raise ConfigError(
            f"results mix world sizes {sorted(worlds)} / backends {sorted(backends)}; "
            "a profile is for one world size and one backend: filter the results first"
        )
    if points is None:
        points = measured_points(rows)
    if not points:
        raise ConfigError("no usable result rows (every row had wrong data or no time): nothing to select from")
    world_size = next(iter(worlds))
    fit_by_key = {(f.op, f.algo): f for f in fits}
    rules: list[Rule] = []
    for op in sorted(points):
        rules.extend(_select_op(op, points[op], fit_by_key, world_size, settings))
    return rules


def _select_op(
    op: str,
    variants: Points,
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

    sizes = sizes_of(variants)
    winners: list[Variant] = []
    ties: dict[int, tuple[Variant, ...]] = {}
    current: Variant | None = None
    for size in sizes:
        current, tied = decide_at(points_at(variants, size), current, settings)
        ties[size] = tied
        winners.append(current)
    merged = _ranges(sizes, winners, variants, predict)

    native_pts = next((pts for v, pts in variants.items() if v.algo == NATIVE), None)
    rules: list[Rule] = []
    for i, (start, variant) in enumerate(merged):
        stop = merged[i + 1][0] - 1 if i + 1 < len(merged) else None
        inside = [s for s in sizes if s >= start and (stop is None or s <= stop) and s in variants[variant]]
        at = inside[len(inside) // 2] if inside else _middle(start, stop)
        measured = variants[variant][at].shown_us if at in variants[variant] else None
        predicted = predict(variant, at)
        gain = gain_err = None
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
                if measured is not None and native_pts is not None and at in native_pts:
                    # Both measured at the size: said with its standard error, as a check's regret is.
                    gain_err = ratio_error(gain, variants[variant][at], native_pts[at])
        tie_with = sorted({t.label() for s in inside if winners[sizes.index(s)] == variant for t in ties[s]})
        separation, noise = _evidence_at(variants, variant, at, settings)
        rules.append(
            Rule(
                op=Op(op),
                min_bytes=start,
                max_bytes=stop,
                algo=AlgoRef(variant.algo),
                params=variant.params(),
                at_bytes=at,
                predicted_us=_round(predicted),
                measured_us=_round(measured),
                gain_vs_native=_round(gain, 4),
                gain_err=_round(gain_err, 4),
                tie_with=tuple(tie_with),
                separation=_round(separation, 4),
                noise=_round(noise, 4),
            )
        )
    return rules


def _ranges(sizes: list[int], winners: list[Variant], variants: Points, predict: Predict) -> list[tuple[int, Variant]]:
    """(start, variant) per range, boundaries placed between measured sizes, equal neighbours merged."""
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
    return merged


def _evidence_at(
    variants: Points, chosen: Variant, at: int, settings: SelectionSettings
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


def _fit_holds(predict: Predict, variant: Variant, size: int, point: Point | None) -> bool:
    """Whether ``variant``'s fit reproduces its measured time at ``size`` within GAP_FIT_TOLERANCE.

    A model that misses the measured ends of a gap (a cache cliff between them, which no alpha-beta
    line has) says nothing about where inside the gap one algorithm overtakes the other: its crossover
    can land anywhere in the gap and hand sizes there to the algorithm that is slower at them.
    """
    if point is None:
        return True  # not measured at that end: nothing to hold the fit to
    predicted = predict(variant, size)
    return predicted is not None and abs(predicted / point.time_us - 1.0) <= GAP_FIT_TOLERANCE


def _no_prediction(_variant: Variant, _size: float) -> None:
    return None


def _boundary(lo: int, hi: int, old: Variant, new: Variant, predict: Predict) -> int:
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
