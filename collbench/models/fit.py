"""Fit the closed-form costs (``costs.py``) to measured times: alpha, beta and, where possible, gamma.

One ``Fit`` (``fitted.py``) per (op, algorithm, backend, world size) group of measured points: result
rows are read once, a row at a time, into one summary per measured size (``fit_points.py``), so a
fit's memory does not grow with the size of its input. The model is
``t = c_a(p, n) alpha + c_b(p, n) beta + c_g(p, n) gamma``, fitted by non-negative least squares in
relative error (``piecewise.nnls_relative``).

gamma (reduction cost per byte) and beta (transfer cost per byte) can only be told apart where the
ratio of their coefficients varies: within one group (one algorithm, one world size) it does not
(ring all-reduce always reduces half of what it sends). So gamma is estimated per (op, backend) from
all groups together when their gamma/beta ratios differ (for example ring and recursive doubling,
or recursive doubling at a power of two and at a non-power of two): a joint fit with one alpha per
group and one shared beta and gamma. Each group then refits its own alpha and beta with that gamma
fixed. Otherwise gamma is folded into beta (``gamma_folded: true``, ``gamma_gbps: null``) and the
fit says so in its ``note``.

Where one line does not explain a group (protocol switches, cache levels), a continuous piecewise
model (``piecewise.py``) is kept and reported as ``segments``, each with its own alpha and beta. Of
the candidates (one per segment count), the fit keeps the best by BIC among those within the
usability bounds at every point (``fitted.bound_failure``), else the best by BIC.

Every point is data, however far it sits from a line: only a point whose own measurement marks it
(no row with its time among its undisturbed calls: ``fit_points.py``) is left out, and the fit's
note names each such point and why. A point's time is the fastest consistent row's (a round slower
than the others of its size is the outlier). The quality figures (R^2, median and max error:
``error_pct``) are those of the points fitted. A fit that misses any of them by more than 25%, or has a
median error above 10%, is marked not usable with the reason (``Fit.unusable_because``): it is shown,
and nothing else uses it (crossovers, predictions, predicted rules, the report's curves).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from collbench.errors import InputFileError, UserError
from collbench.models.costs import cost_terms, has_cost_model, segments_of
from collbench.models.crossover import Crossover, find_crossovers
from collbench.models.fit_latency import fit_latency_only
from collbench.models.fit_points import FitPoint, PointSummaries, set_aside_note, summarize
from collbench.models.fitted import MEDIAN_ERROR_BOUND_PCT, Fit, Segment, bound_failure, op_has_payload
from collbench.models.piecewise import (
    MAX_SEGMENTS,
    FloatArray,
    JoinedFit,
    bic,
    nnls_relative,
    piecewise_candidates,
)
from collbench.results.noise import decision_time_us
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op
from collbench.units import format_bytes

# Gamma/beta coefficient ratios closer than this (relatively) cannot tell gamma from beta.
_RATIO_SPREAD = 0.2
_MIN_POINTS = 2
_MAX_SEGMENTS = MAX_SEGMENTS
_FOLDED = "gamma folded into beta: one algorithm at one world size cannot tell them apart"


@dataclass(frozen=True, slots=True)
class FitReport:
    fits: list[Fit]
    crossovers: list[Crossover] = field(default_factory=list)
    """Crossovers between algorithms of the same op, backend and world size."""
    skipped: list[str] = field(default_factory=list)
    """One line per group that could not be fitted, and why."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "fits": [f.to_dict() for f in self.fits],
            "crossovers": [c.to_dict() for c in self.crossovers],
            "skipped": list(self.skipped),
        }


GroupKey = tuple[str, str, str, int]


def group_points(points: Iterable[FitPoint]) -> dict[GroupKey, list[FitPoint]]:
    """Points by (op, algo, backend, world size), in the order they came."""
    groups: dict[GroupKey, list[FitPoint]] = defaultdict(list)
    for point in points:
        groups[point.group].append(point)
    return dict(groups)


def _design(key: GroupKey, points: list[FitPoint]) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(sizes, coefficient matrix [c_a, c_b, c_g], times) of a group: one entry per measured size that
    is data (points their own measurement marks are left out: ``fit_points.py``).

    Rows of one size (rounds, repeats, in place and out of place) are one point (``fit_points.py``),
    whose time is the smallest of their decision times (``decision_time_us``: a row's p25), as
    selection combines them (``selection.measured_points``). The fit then models the time that
    decisions compare, and its quality figures say how well it explains those times; the spread
    between the rounds themselves is noise, reported with each point (``results/noise.py``), not model
    error.
    """
    op, algo, _, p = key
    ordered = sorted((point for point in points if not point.set_aside), key=lambda point: point.size_bytes)
    coefs = []
    for point in ordered:
        # A pipelined schedule ran in the segments its rows' segment size gave it: a step each.
        segments = segments_of(algo, point.size_bytes, point.segment_bytes)
        terms = cost_terms(op, algo, p, point.size_bytes, segments=segments)
        coefs.append((terms.alpha, terms.beta, terms.gamma))
    sizes = np.array([point.size_bytes for point in ordered], dtype=np.float64)
    times = np.array([point.time_us for point in ordered], dtype=np.float64)
    return sizes, np.array(coefs, dtype=np.float64), times


def _joint_gamma(groups: dict[GroupKey, tuple[FloatArray, FloatArray, FloatArray]]) -> float | None:
    """Shared gamma (us/byte) of groups whose gamma/beta ratios differ enough; None otherwise."""
    ratios = []
    for _, coef, _ in groups.values():
        big = coef[np.argmax(coef[:, 1])]
        if big[1] > 0:
            ratios.append(big[2] / big[1])
    if len(ratios) < 2 or max(ratios) <= 0:
        return None
    if (max(ratios) - min(ratios)) / max(ratios) < _RATIO_SPREAD:
        return None
    keys = list(groups)
    blocks = []
    targets = []
    times_all = []
    for gi, key in enumerate(keys):
        _, coef, times = groups[key]
        block = np.zeros((len(times), len(keys) + 2))
        block[:, gi] = coef[:, 0]
        block[:, -2] = coef[:, 1]
        block[:, -1] = coef[:, 2]
        blocks.append(block)
        targets.append(times)
        times_all.append(times)
    t = np.concatenate(times_all)
    joint, _ = nnls_relative(np.vstack(blocks), np.concatenate(targets), t)
    return float(joint[-1])


def error_pct(model_us: FloatArray, measured_us: FloatArray) -> FloatArray:
    """The model's signed error at each point, in percent of the measured time: 100 (model - measured)
    / measured. The one computation of a fit's error: the fit table's median and worst are of its
    absolute value, and ``fit --plot``'s error panel draws it (``point_errors_pct``)."""
    return 100.0 * (model_us - measured_us) / measured_us


def point_errors_pct(fit: Fit, points: Iterable[FitPoint]) -> list[tuple[int, float]]:
    """(size, signed error %) of the fit at each of its points that is data (``error_pct``), in size
    order: the points and figure whose median and max absolute value are the fit's own."""
    group = (fit.op, fit.algo, fit.backend, fit.world_size)
    mine = sorted(
        (q for q in points if q.group == group and not q.set_aside and q.size_bytes > 0),
        key=lambda q: q.size_bytes,
    )
    model = np.array([fit.predict_us(q.size_bytes) for q in mine], dtype=np.float64)
    measured = np.array([q.time_us for q in mine], dtype=np.float64)
    return [(q.size_bytes, float(e)) for q, e in zip(mine, error_pct(model, measured), strict=True)]


def _quality(pred: FloatArray, times: FloatArray) -> tuple[float, float, float]:
    """(R^2 on log time, median and max absolute percentage error)."""
    pct = np.abs(error_pct(pred, times))
    logt = np.log(times)
    logp = np.log(np.maximum(pred, 1e-12))
    ss_tot = float(np.sum((logt - logt.mean()) ** 2))
    ss_res = float(np.sum((logt - logp) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    return r2, float(np.median(pct)), float(np.max(pct))


FALL_NAMED = 1.0 + MEDIAN_ERROR_BOUND_PCT / 100.0
"""A measured time this many times a larger size's is named in a missing fit's reason: a cost that
grows with the size cannot follow it, and a fall within the median bound is not worth a reader's eye."""


def largest_fall(sizes: FloatArray, times: FloatArray) -> str:
    """Where the measured time falls most as the size grows (``sizes`` ascending), as a clause for a fit
    that misses; empty when no later time is below an earlier one by ``FALL_NAMED`` or more.

    Every cost model here grows with the size, so a point measured faster than a smaller one is a fact
    of the measurement that no such model can meet; saying where shows a reader that the miss is the
    times' shape, not the fitter (gloo's point-to-point exchanges of up to ~64 KiB were measured slower
    than larger ones: benchmarks/README.md, bench_gloo_sweep section). O(points).
    """
    best = (1.0, 0, 0)
    top = 0  # index of the slowest point so far
    for j in range(1, len(times)):
        if times[j - 1] > times[top]:
            top = j - 1
        if times[j] > 0 and times[top] / times[j] > best[0]:
            best = (float(times[top] / times[j]), top, j)
    ratio, i, j = best
    if ratio < FALL_NAMED:
        return ""
    return (
        f"; the measured time falls {100.0 * (1.0 - 1.0 / ratio):.0f}% as the size grows, from "
        f"{times[i]:.4g} us at {format_bytes(int(sizes[i]))} to {times[j]:.4g} us at {format_bytes(int(sizes[j]))}"
    )


def _fit_group(
    key: GroupKey,
    data: tuple[FloatArray, FloatArray, FloatArray],
    gamma: float | None,
    reduces: bool,
    piecewise: bool,
    set_aside: list[FitPoint],
    segment_bytes: int | None = None,
) -> Fit:
    sizes, coef, times = data
    op, algo, backend, p = key
    notes: list[str] = []
    if gamma is not None:
        target = times - coef[:, 2] * gamma
        gamma_out: float | None = gamma
        folded = False
    else:
        target = times
        gamma_out = None
        folded = reduces and bool(np.any(coef[:, 2] > 0))
        if folded:
            notes.append(_FOLDED)
    fixed = coef[:, 2] * gamma if gamma is not None else np.zeros_like(times)
    design = coef[:, :2]

    def design_at(size: float) -> FloatArray:
        terms = cost_terms(op, algo, p, size, segments=segments_of(algo, size, segment_bytes))
        return np.array([terms.alpha, terms.beta], dtype=np.float64)

    candidates = piecewise_candidates(
        sizes, design, target, times, design_at, max_segments=_MAX_SEGMENTS if piecewise and len(sizes) >= 6 else 1
    )
    chosen = _choose(candidates, fixed, times)
    pred = chosen.pred + fixed
    segments: tuple[Segment, ...] = ()
    first, last = chosen.pieces[0], chosen.pieces[-1]
    # One line: its alpha and beta. Pieces: the latency of the smallest messages and the bandwidth of
    # the largest, the two figures a reader asks of a network; every piece's own are in ``segments``.
    alpha, beta = first.coef[0], last.coef[1]
    if len(chosen.pieces) > 1:
        segments = _segments(chosen, sizes, pred, times)
        edges = ", ".join(str(s.min_bytes) for s in segments[1:])
        notes.append(f"piecewise: {len(segments)} segments, breaks at {edges} bytes")
    if all(piece.coef[1] == 0 for piece in chosen.pieces):
        if gamma and np.any(coef[:, 2] > 0):
            notes.append("beta fitted as 0: the per-byte cost is gamma's (fitted across the op's algorithms)")
        else:
            notes.append("no bandwidth term measurable (beta fitted as 0)")
    if set_aside:
        notes.append(set_aside_note(set_aside))
    r2, med, worst = _quality(pred, times)
    why = bound_failure(med, worst)
    params = parameters(chosen.segments)
    if not why and len(times) < params + SPARE_POINTS:
        # With as many points as parameters the model passes through every one: its 0% error says
        # nothing. Two spare points are the least that show how well it follows the machine.
        why = (
            f"{len(times)} points for {params} parameters: a fit needs at least {params + SPARE_POINTS} "
            f"(two more than its parameters) to show its error; measure more sizes"
        )
    elif why:
        at = int(np.argmax(np.abs(pred - times) / times))
        why = (
            f"{why}: at {format_bytes(int(sizes[at]))} measured {times[at]:.4g} us, "
            f"model {pred[at]:.4g} us; no continuous non-decreasing model of "
            f"{'up to ' + str(_MAX_SEGMENTS) + ' segments' if piecewise else 'one line'} follows every point"
            f"{largest_fall(sizes, times)}"
        )
    return Fit(
        op=op,
        algo=algo,
        backend=backend,
        world_size=p,
        alpha_us=alpha,
        beta_us_per_byte=beta,
        gamma_us_per_byte=gamma_out,
        r2=r2,
        median_abs_pct_error=med,
        max_abs_pct_error=worst,
        min_bytes=int(sizes.min()),
        max_bytes=int(sizes.max()),
        segments=segments,
        gamma_folded=folded,
        points=len(times),
        note="; ".join(notes),
        outliers=len(set_aside),
        unusable_because=why,
        segment_bytes=segment_bytes,
    )


def _segment_bytes_of(points: list[FitPoint]) -> int | None:
    """The segment size most of a group's points ran with (None where most ran unsegmented); a tie goes
    to unsegmented, then to the smaller size."""
    counts: dict[int | None, int] = defaultdict(int)
    for point in points:
        counts[point.segment_bytes] += 1
    if not counts:
        return None
    return min(counts, key=lambda seg: (-counts[seg], seg is not None, seg or 0))


SPARE_POINTS = 2
"""Points a usable fit needs beyond its parameters (issue 32): with no spare point the model meets
every point whatever the machine does, and its error figure is 0 by construction."""


def parameters(segments: int) -> int:
    """A model's parameters: each segment's latency and per-byte cost (the breaks between segments are
    at measured sizes; gamma is fitted across the op's algorithms, not per fit)."""
    return 2 * segments


def _choose(candidates: list[JoinedFit], fixed: FloatArray, times: FloatArray) -> JoinedFit:
    """The candidate with the best BIC among those within the usability bounds at every point and with
    two points to spare over its parameters; the best BIC of all when none is (the fit is then marked
    not usable)."""

    def within(candidate: JoinedFit) -> bool:
        if len(times) < parameters(candidate.segments) + SPARE_POINTS:
            return False
        _, med, worst = _quality(candidate.pred + fixed, times)
        return not bound_failure(med, worst)

    def score(candidate: JoinedFit) -> tuple[float, int]:
        return bic(candidate.sse, len(times), candidate.segments), candidate.segments

    good = [c for c in candidates if within(c)]
    return min(good or candidates, key=score)


def _segments(chosen: JoinedFit, sizes: FloatArray, pred: FloatArray, times: FloatArray) -> tuple[Segment, ...]:
    out = []
    for piece in chosen.pieces:
        mask = (sizes >= piece.min_bytes) & (sizes <= piece.max_bytes)
        med = float(np.median(100.0 * np.abs(pred[mask] - times[mask]) / times[mask]))
        out.append(Segment(piece.min_bytes, piece.max_bytes, piece.coef[0], piece.coef[1], med))
    return tuple(out)


def fit_results(
    rows: Iterable[ResultRow] | PointSummaries,
    *,
    piecewise: bool = True,
    crossovers: bool = True,
    source: str = "results",
) -> FitReport:
    """Fit every (op, algo, backend, world size) group of ``rows``; see the module docstring.

    ``rows`` is read once, a row at a time, into per-point summaries (``fit_points.py``: the rows of one
    size are one point at their smallest decision time), or is such summaries already gathered.

    Barrier's groups (no data, one point at 0 bytes) get a latency-only model (``fit_latency.py``).
    Groups whose algorithm has no closed form (or none for the op), of one rank, or with fewer than two
    distinct sizes, are skipped and listed in ``FitReport.skipped``.
    Raises UserError when no group can be fitted at all, and InputFileError naming ``source`` (the
    files the rows came from) when no row has a positive time and right data.
    """
    summaries = summarize(rows)
    groups = group_points(summaries.points())
    if not groups:
        failed = f" ({summaries.rows_failed} failed validation)" if summaries.rows_failed else ""
        raise InputFileError(source, f"no rows with a positive time and right data to fit{failed}")
    skipped: list[str] = []
    latency_fits: list[Fit] = []
    data: dict[GroupKey, tuple[FloatArray, FloatArray, FloatArray]] = {}
    aside_of: dict[GroupKey, list[FitPoint]] = {}
    segment_of: dict[GroupKey, int | None] = {}
    for key, gpoints in sorted(groups.items()):
        op, algo, backend, p = key
        label = f"{op} {algo} {backend} x{p}"
        try:
            known = has_cost_model(op, algo)
        except UserError as exc:
            skipped.append(f"{label}: {exc}")
            continue
        if not known:
            skipped.append(f"{label}: no closed-form cost for algorithm {algo!r}")
            continue
        if p < 2:
            # A single rank sends nothing: every cost term is zero, so there is no alpha or beta to find.
            skipped.append(f"{label}: one rank moves no data; there is no communication to model")
            continue
        try:
            cost_terms(op, algo, p, 1.0)
        except UserError as exc:  # an algorithm without a formula for this op
            skipped.append(f"{label}: {exc}")
            continue
        kept = [q for q in gpoints if not q.set_aside]
        if not op_has_payload(op):
            if not kept:
                skipped.append(f"{label}: its one point is set aside ({gpoints[0].set_aside})")
                continue
            try:
                latency_fits.append(fit_latency_only(key, kept, [q for q in gpoints if q.set_aside]))
            except UserError as exc:
                skipped.append(f"{label}: {exc}")
            continue
        if len(kept) < _MIN_POINTS:  # one point per measured size (fit_points)
            aside = len(gpoints) - len(kept)
            why = f" ({aside} set aside as their measurement marks them)" if aside else ""
            skipped.append(f"{label}: needs at least {_MIN_POINTS} sizes to fit, has {len(kept)}{why}")
            continue
        data[key] = _design(key, gpoints)
        aside_of[key] = [q for q in gpoints if q.set_aside]
        segment_of[key] = _segment_bytes_of(kept)
    if not data and not latency_fits:
        raise UserError("nothing to fit: " + "; ".join(skipped) if skipped else "nothing to fit")
    pools: dict[tuple[str, str], dict[GroupKey, tuple[FloatArray, FloatArray, FloatArray]]] = defaultdict(dict)
    for key, value in data.items():
        pools[(key[0], key[2])][key] = value
    fits: list[Fit] = list(latency_fits)
    for (op, _backend), pool in pools.items():
        reduces = Op.parse(op).spec.reduces
        gamma = _joint_gamma(pool) if reduces else None
        for key, value in pool.items():
            fit = _fit_group(key, value, gamma, reduces, piecewise, aside_of[key], segment_of[key])
            if gamma is not None and fit.unusable_because:
                # The shared gamma sets a least per-byte cost; where that keeps the model off this
                # algorithm's own points, the algorithm's per-byte cost is fitted whole (gamma folded).
                folded = _fit_group(key, value, None, reduces, piecewise, aside_of[key], segment_of[key])
                if folded.max_abs_pct_error < fit.max_abs_pct_error:
                    shared = (
                        "gamma folded into beta: with the gamma fitted across the op's algorithms the model "
                        f"missed a point of this one by {fit.max_abs_pct_error:.0f}%, folded by "
                        f"{folded.max_abs_pct_error:.0f}%"
                    )
                    fit = dataclasses.replace(folded, note=folded.note.replace(_FOLDED, shared, 1))
            fits.append(fit)
    fits.sort(key=lambda f: (f.op, f.backend, f.world_size, f.algo))
    # A fit that does not follow its points places no crossover (Fit.distrust).
    found = find_crossovers([f for f in fits if f.usable]) if crossovers else []
    return FitReport(fits=fits, crossovers=found, skipped=skipped)


def median_abs_pct_error(fit: Fit, rows: Iterable[ResultRow]) -> float:
    """Median absolute percentage error of a fit's predictions on rows (e.g. held-out sizes)."""
    errors = [
        100.0 * abs(fit.predict_us(r.size_bytes, r.world_size) - decision_time_us(r)) / decision_time_us(r)
        for r in rows
    ]
    if not errors:
        raise ValueError("no rows to score")
    return statistics.median(errors)
