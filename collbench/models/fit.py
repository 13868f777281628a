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

Where one line does not explain a group (protocol switches), a piecewise fit (``piecewise.py``) is
kept and reported as ``segments``; the quality figures then describe the piecewise model.

Stalls (a call measured far above the model: a scheduler tick, a page fault) are set aside before the
coefficients are final (``piecewise.nnls_trimmed``: in the joint gamma fit, the single line and inside
every candidate segment), at most a third of a group's points. The fit reports how many in
``outliers`` and in its note. The quality figures (R^2, median and max error) are always computed on
*all* the group's points, outliers included, so a fit never looks better than the data it came from.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from collbench.errors import InputFileError, UserError
from collbench.models.costs import cost_terms, has_cost_model
from collbench.models.crossover import Crossover, find_crossovers
from collbench.models.fit_points import FitPoint, PointSummaries, summarize
from collbench.models.fitted import Fit, Segment
from collbench.models.piecewise import (
    OUTLIER_MIN_EXCESS,
    FloatArray,
    Piece,
    chain_pieces,
    nnls_trimmed,
    piecewise_fit,
)
from collbench.results.noise import decision_time_us
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op

# Gamma/beta coefficient ratios closer than this (relatively) cannot tell gamma from beta.
_RATIO_SPREAD = 0.2
_MIN_POINTS = 2


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
    """(sizes, coefficient matrix [c_a, c_b, c_g], times) of a group: one entry per measured size.

    Rows of one size (rounds, repeats, in place and out of place) are one point (``fit_points.py``),
    whose time is the smallest of their decision times (``decision_time_us``: a row's p25), as
    selection combines them (``selection.measured_points``). The fit then models the time that
    decisions compare, and its quality figures say how well it explains those times; the spread
    between the rounds themselves is noise, reported with each point (``results/noise.py``), not model
    error.
    """
    op, algo, _, p = key
    ordered = sorted(points, key=lambda point: point.size_bytes)
    coefs = []
    for point in ordered:
        terms = cost_terms(op, algo, p, point.size_bytes)
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
    labels = []
    for gi, key in enumerate(keys):
        _, coef, times = groups[key]
        block = np.zeros((len(times), len(keys) + 2))
        block[:, gi] = coef[:, 0]
        block[:, -2] = coef[:, 1]
        block[:, -1] = coef[:, 2]
        blocks.append(block)
        targets.append(times)
        times_all.append(times)
        labels.append(np.full(len(times), gi, dtype=np.int64))
    t = np.concatenate(times_all)
    # Each group keeps at least 3 rows (its alpha plus the shared beta and gamma, plus one to check).
    joint = nnls_trimmed(np.vstack(blocks), np.concatenate(targets), t, groups=np.concatenate(labels), min_kept=3)
    return float(joint.x[-1])


def _quality(pred: FloatArray, times: FloatArray) -> tuple[float, float, float]:
    """(R^2 on log time, median and max absolute percentage error)."""
    pct = 100.0 * np.abs(pred - times) / times
    logt = np.log(times)
    logp = np.log(np.maximum(pred, 1e-12))
    ss_tot = float(np.sum((logt - logt.mean()) ** 2))
    ss_res = float(np.sum((logt - logp) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    return r2, float(np.median(pct)), float(np.max(pct))


def _fit_group(
    key: GroupKey, data: tuple[FloatArray, FloatArray, FloatArray], gamma: float | None, reduces: bool, piecewise: bool
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
            notes.append("gamma folded into beta: one algorithm at one world size cannot tell them apart")
    design = coef[:, :2]
    line = nnls_trimmed(design, target, times)
    x = line.x
    outliers = line.outliers
    alpha, beta = float(x[0]), float(x[1])
    segments: tuple[Segment, ...] = ()
    pred = design @ x + (coef[:, 2] * gamma if gamma is not None else 0.0)
    if piecewise and len(sizes) >= 6:  # one entry per measured size (_design)

        def design_at(size: float) -> FloatArray:
            terms = cost_terms(op, algo, p, size)
            return np.array([terms.alpha, terms.beta], dtype=np.float64)

        def chained(free: list[Piece]) -> list[Piece]:
            return chain_pieces(free, sizes, design, target, times, design_at)

        pieces = piecewise_fit(sizes, design, target, times, refine=chained)
        if len(pieces) > 1:
            segments, pred = _segments(pieces, sizes, design, coef, times, gamma)
            outliers = sum(piece.outliers for piece in pieces)
            edges = ", ".join(str(s.min_bytes) for s in segments[1:])
            notes.append(f"piecewise: {len(segments)} segments, breaks at {edges} bytes")
    if beta == 0 and not any(seg.beta_us_per_byte > 0 for seg in segments):
        if gamma and np.any(coef[:, 2] > 0):
            notes.append("beta fitted as 0: the per-byte cost is gamma's (fitted across the op's algorithms)")
        else:
            notes.append("no bandwidth term measurable (beta fitted as 0)")
    if outliers:
        notes.append(
            f"{outliers} of {len(times)} points set aside as outliers (measured more than "
            f"max({100 * OUTLIER_MIN_EXCESS:.0f}%, 3x the median error) above the model, e.g. "
            "scheduler stalls); error figures include them"
        )
    # On all points, outliers included: the figures describe the data, not only the points kept.
    r2, med, worst = _quality(pred, times)
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
        outliers=outliers,
    )


def _segments(
    pieces: list[Piece],
    sizes: FloatArray,
    design: FloatArray,
    coef: FloatArray,
    times: FloatArray,
    gamma: float | None,
) -> tuple[tuple[Segment, ...], FloatArray]:
    pred = np.zeros_like(times)
    out = []
    for piece in pieces:
        mask = (sizes >= piece.min_bytes) & (sizes <= piece.max_bytes)
        x = np.array(piece.coef)
        seg_pred = design[mask] @ x + piece.offset + (coef[mask, 2] * gamma if gamma is not None else 0.0)
        pred[mask] = seg_pred
        med = float(np.median(100.0 * np.abs(seg_pred - times[mask]) / times[mask]))
        out.append(Segment(piece.min_bytes, piece.max_bytes, float(x[0]), float(x[1]), med, piece.offset))
    return tuple(out), pred


def fit_results(
    rows: Iterable[ResultRow] | PointSummaries, *, piecewise: bool = True, crossovers: bool = True
) -> FitReport:
    """Fit every (op, algo, backend, world size) group of ``rows``; see the module docstring.

    ``rows`` is read once, a row at a time, into per-point summaries (``fit_points.py``: the rows of one
    size are one point at their smallest decision time), or is such summaries already gathered.

    Groups whose algorithm has no closed form, of one rank, or with fewer than two distinct sizes, are skipped and
    listed in ``FitReport.skipped``. Raises UserError when no group can be fitted at all.
    """
    summaries = summarize(rows)
    groups = group_points(summaries.points())
    if not groups:
        failed = f" ({summaries.rows_failed} failed validation)" if summaries.rows_failed else ""
        raise InputFileError("results", f"no rows with a positive time and right data to fit{failed}")
    skipped: list[str] = []
    data: dict[GroupKey, tuple[FloatArray, FloatArray, FloatArray]] = {}
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
        if len(gpoints) < _MIN_POINTS:  # one point per measured size (fit_points)
            skipped.append(f"{label}: needs at least {_MIN_POINTS} sizes to fit, has one")
            continue
        data[key] = _design(key, gpoints)
    if not data:
        raise UserError("nothing to fit: " + "; ".join(skipped) if skipped else "nothing to fit")
    pools: dict[tuple[str, str], dict[GroupKey, tuple[FloatArray, FloatArray, FloatArray]]] = defaultdict(dict)
    for key, value in data.items():
        pools[(key[0], key[2])][key] = value
    fits: list[Fit] = []
    for (op, _backend), pool in pools.items():
        reduces = Op.parse(op).spec.reduces
        gamma = _joint_gamma(pool) if reduces else None
        for key, value in pool.items():
            fits.append(_fit_group(key, value, gamma, reduces, piecewise))
    fits.sort(key=lambda f: (f.op, f.backend, f.world_size, f.algo))
    found = find_crossovers(fits) if crossovers else []
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
