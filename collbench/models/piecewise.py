"""Least squares for relative error, and piecewise fits with breakpoints found from the data.

Times span decades (a few microseconds at 8 bytes, seconds at a gigabyte), so every fit here minimises
the squared *relative* error: each row of the design matrix and the target is divided by the measured
time. Coefficients are non-negative (scipy's NNLS): a negative latency or bandwidth is never physical.

A piecewise fit splits the sorted sizes into contiguous segments (a protocol switch, eager vs
rendezvous) and fits each alone. The split is found by dynamic programming over the sorted distinct
sizes: for every segment count K, the best K-segment split (least total squared relative error); then
K is chosen by BIC, ``N ln(SSE/N + floor) + (3K - 1) ln N`` (two coefficients and one breakpoint per
extra segment). The ``floor`` (1% relative error squared) keeps a perfect fit from splitting further
to chase rounding.

Outliers. On a shared or virtualised host a fraction of calls stall (a scheduler tick when an idle CPU
wakes: milliseconds on a call of a few hundred microseconds), and a point's median can land on the
stall. Stalls only ever make a call slower, so :func:`nnls_trimmed` sets aside the points measured far
*above* the model (more than ``max(50%, 3 x the median absolute relative residual)`` of the kept
points), refits, and repeats a few times; it never sets aside more than a third of the points (of each
group, for a joint fit) nor leaves fewer than one point more than there are coefficients. A point set
aside is charged in the SSE as if it sat exactly on the threshold (a truncated squared loss), so that
setting points aside is never free: see :func:`piecewise_fit` for why that matters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import nnls

FloatArray = NDArray[np.float64]

MIN_SIZES_PER_SEGMENT = 3
MAX_SEGMENTS = 6
_BIC_FLOOR = 1e-4

OUTLIER_MIN_EXCESS = 0.5
"""A point is an outlier only if measured above the model by more than this (relative to the model)..."""
OUTLIER_MEDIAN_FACTOR = 3.0
"""...and by more than this many times the median absolute relative residual of the kept points."""
OUTLIER_MAX_DIVISOR = 3
"""At most a third of a group's points (rounded down) are ever set aside."""
OUTLIER_ITERATIONS = 5


def nnls_relative(design: FloatArray, target: FloatArray, times: FloatArray) -> tuple[FloatArray, float]:
    """Non-negative least squares of ``design @ x ~ target`` in relative error (divided by ``times``).

    Columns are scaled to unit norm before solving (bytes and step counts differ by 10^8) and the
    solution is scaled back. Returns ``(x, sse)``, sse being the sum of squared relative residuals.
    """
    a = design / times[:, None]
    y = target / times
    norms = np.linalg.norm(a, axis=0)
    norms[norms == 0] = 1.0
    x_scaled, _ = nnls(a / norms, y)
    x = x_scaled / norms
    resid = a @ x - y
    return x, float(resid @ resid)


@dataclass(frozen=True, slots=True)
class TrimmedFit:
    """A fit with outliers set aside: coefficients, charged SSE and which rows were kept."""

    x: FloatArray
    sse: float
    """Squared relative residuals of the kept rows, plus the threshold's squared residual per row set aside."""
    kept: NDArray[np.bool_]

    @property
    def outliers(self) -> int:
        return int(np.count_nonzero(~self.kept))


def _outlier_mask(
    excess: FloatArray, keep: NDArray[np.bool_], groups: NDArray[np.int64], min_kept: int
) -> tuple[NDArray[np.bool_], FloatArray]:
    """Rows to keep under the current fit, and each row's threshold (relative excess over the model)."""
    new_keep = np.ones(len(excess), dtype=bool)
    thresholds = np.full(len(excess), OUTLIER_MIN_EXCESS)
    for g in np.unique(groups):
        rows = np.flatnonzero(groups == g)
        # The spread comes from the points currently trusted, so that stalls do not widen it.
        trusted = rows[keep[rows]] if np.any(keep[rows]) else rows
        threshold = max(OUTLIER_MIN_EXCESS, OUTLIER_MEDIAN_FACTOR * float(np.median(np.abs(excess[trusted]))))
        thresholds[rows] = threshold
        cap = max(0, min(len(rows) // OUTLIER_MAX_DIVISOR, len(rows) - min_kept))
        above = rows[excess[rows] > threshold]
        if cap == 0 or len(above) == 0:
            continue
        # Only ever above the model (stalls slow a call down, nothing speeds it up); worst first.
        worst = above[np.argsort(-excess[above], kind="stable")][:cap]
        new_keep[worst] = False
    return new_keep, thresholds


def nnls_trimmed(
    design: FloatArray,
    target: FloatArray,
    times: FloatArray,
    *,
    groups: NDArray[np.int64] | None = None,
    min_kept: int | None = None,
) -> TrimmedFit:
    """:func:`nnls_relative` with points measured far above the model set aside (see the module docstring).

    ``target`` is ``times`` less any fixed part of the model (``times - target`` is added back to judge a
    point against the whole model). ``groups`` labels rows whose cap (a third) is counted separately;
    ``min_kept`` (default: coefficients + 1) is the fewest rows a group keeps. With no outlier the result
    is exactly :func:`nnls_relative`'s.
    """
    n = len(times)
    labels = np.zeros(n, dtype=np.int64) if groups is None else groups
    least = design.shape[1] + 1 if min_kept is None else min_kept
    fixed = times - target
    keep = np.ones(n, dtype=bool)
    x, _ = nnls_relative(design, target, times)
    thresholds = np.full(n, OUTLIER_MIN_EXCESS)
    for _ in range(OUTLIER_ITERATIONS):
        model = np.maximum(design @ x + fixed, 1e-12)
        new_keep, thresholds = _outlier_mask(times / model - 1.0, keep, labels, least)
        if np.array_equal(new_keep, keep):
            break
        keep = new_keep
        # Refit on the kept rows; rows set aside come back next round if the new fit explains them.
        x, _ = nnls_relative(design[keep], target[keep], times[keep])
    resid = (design[keep] @ x - target[keep]) / times[keep]
    # A row set aside costs what a row exactly on the threshold would: t = (1 + e) m, so |m - t| / t = e / (1 + e).
    charge = (thresholds[~keep] / (1.0 + thresholds[~keep])) ** 2
    return TrimmedFit(x, float(resid @ resid + charge.sum()), keep)


@dataclass(frozen=True, slots=True)
class Piece:
    """One segment of a piecewise fit: rows with sizes in [min_bytes, max_bytes], and its coefficients."""

    min_bytes: int
    max_bytes: int
    coef: tuple[float, ...]
    sse: float
    rows: int
    outliers: int = 0
    """Rows of this piece set aside as outliers (see :func:`nnls_trimmed`)."""
    offset: float = 0.0
    """Added to ``design @ coef`` so that the piece starts where the previous one ends (see :func:`chain_pieces`)."""

    def value(self, row: FloatArray) -> float:
        """The piece's model at one design row."""
        return float(np.asarray(row, dtype=np.float64) @ np.asarray(self.coef)) + self.offset


def piecewise_fit(
    sizes: FloatArray,
    design: FloatArray,
    target: FloatArray,
    times: FloatArray,
    *,
    max_segments: int = MAX_SEGMENTS,
    min_sizes: int = MIN_SIZES_PER_SEGMENT,
    refine: Callable[[list[Piece]], list[Piece]] | None = None,
) -> list[Piece]:
    """The best split of the rows (by size) into 1..max_segments pieces, chosen by BIC.

    ``refine`` (e.g. :func:`chain_pieces`) turns each candidate split into the model that will be
    used, and the split is chosen by BIC on *that* model: a split that looks best with its pieces free
    can explain the data worse than fewer pieces once each piece must start where the previous ends
    (a piece whose slope followed one noisy point forces the next far above its own data).

    ``sizes`` give each row's message size; rows of one size always stay in one piece. Returns one
    piece when no split pays for itself (or there are too few distinct sizes to split).

    Outliers are set aside inside each candidate piece (:func:`nnls_trimmed`), not once before
    segmenting: a single line over a range with a real protocol switch would call the slower regime's
    points "outliers" and hide the switch. Because every row set aside is charged at the threshold's
    squared residual, a split cannot lower the cost just by isolating a stall (the stall costs the same
    whether the long piece or a short one sets it aside, and a short piece keeps at least one row more
    than it has coefficients, so it cannot fit a stall exactly), while a real switch, whose rows sit
    near a line of their own, still pays for its extra segment.
    """
    order = np.argsort(sizes, kind="stable")
    sizes, design, target, times = sizes[order], design[order], target[order], times[order]
    distinct = np.unique(sizes)
    m = len(distinct)
    # Row index where each distinct size starts, plus the end.
    starts = [int(i) for i in np.searchsorted(sizes, distinct, side="left")] + [len(sizes)]
    n_rows = len(sizes)
    k_max = max(1, min(max_segments, m // min_sizes))

    def fit_range(i: int, j: int) -> TrimmedFit:
        lo, hi = starts[i], starts[j]
        return nnls_trimmed(design[lo:hi], target[lo:hi], times[lo:hi])

    cost: dict[tuple[int, int], float] = {}
    for i in range(m):
        for j in range(i + min_sizes, m + 1):
            cost[(i, j)] = fit_range(i, j).sse
    if k_max == 1 or not cost:
        whole = fit_range(0, m)
        return [
            Piece(
                int(distinct[0]),
                int(distinct[-1]),
                tuple(float(v) for v in whole.x),
                whole.sse,
                n_rows,
                whole.outliers,
            )
        ]

    inf = math.inf
    # best[k][j]: least SSE covering distinct sizes [0, j) with k pieces; back[k][j]: where the last starts.
    best = [[inf] * (m + 1) for _ in range(k_max + 1)]
    back = [[-1] * (m + 1) for _ in range(k_max + 1)]
    best[0][0] = 0.0
    for k in range(1, k_max + 1):
        for j in range(k * min_sizes, m + 1):
            for i in range((k - 1) * min_sizes, j - min_sizes + 1):
                prev = best[k - 1][i]
                if prev == inf:
                    continue
                total = prev + cost[(i, j)]
                if total < best[k][j]:
                    best[k][j] = total
                    back[k][j] = i

    def pieces_of(k: int) -> list[Piece]:
        bounds: list[tuple[int, int]] = []
        j = m
        for kk in range(k, 0, -1):
            i = back[kk][j]
            bounds.append((i, j))
            j = i
        out: list[Piece] = []
        for i, j in reversed(bounds):
            piece = fit_range(i, j)
            out.append(
                Piece(
                    int(distinct[i]),
                    int(distinct[j - 1]),
                    tuple(float(v) for v in piece.x),
                    piece.sse,
                    starts[j] - starts[i],
                    piece.outliers,
                )
            )
        return out

    candidates: dict[int, list[Piece]] = {}
    scores: dict[int, float] = {}
    for k in range(1, k_max + 1):
        if best[k][m] == inf:
            continue
        pieces = pieces_of(k)
        if refine is not None:
            pieces = refine(pieces)
        candidates[k] = pieces
        scores[k] = bic(sum(p.sse for p in pieces), n_rows, k)
    k_best = min(scores, key=lambda k: (scores[k], k))
    return candidates[k_best]


def bic(sse: float, n_rows: int, segments: int) -> float:
    """The score splits are chosen by: ``N ln(SSE/N + floor) + (3K - 1) ln N`` (lower is better)."""
    return n_rows * math.log(sse / n_rows + _BIC_FLOOR) + (3 * segments - 1) * math.log(n_rows)


def switch_point(lower: Piece, upper: Piece) -> float:
    """Where the model hands over from ``lower`` to ``upper``: the geometric middle of the gap between them."""
    return math.sqrt(max(lower.max_bytes, 1) * max(upper.min_bytes, 1))


def chain_pieces(
    pieces: list[Piece],
    sizes: FloatArray,
    design: FloatArray,
    target: FloatArray,
    times: FloatArray,
    design_at: Callable[[float], FloatArray],
) -> list[Piece]:
    """The pieces refitted so that the model is continuous and never decreases with message size.

    Real costs do not drop when a message grows, nor jump at a size no one measured: a protocol switch
    changes the slope, not the time at the switch. Piece ``k`` is refitted to start where piece
    ``k - 1`` ends at their switch point ``s``: its model is ``v + (design(n) - design(s)) @ x`` with
    ``x >= 0`` (NNLS, outliers set aside as before), so with design columns that do not decrease in
    size (step counts, bytes) it rises from ``v`` and never falls. ``design_at(size)`` is the design
    row at any size. The first piece is kept as fitted. Each piece's ``offset`` carries
    ``v - design(s) @ x``.
    """
    if len(pieces) < 2:
        return list(pieces)
    out = [pieces[0]]
    for piece in pieces[1:]:
        prev = out[-1]
        at = switch_point(prev, piece)
        base = np.asarray(design_at(at), dtype=np.float64)
        start = prev.value(base)
        mask = (sizes >= piece.min_bytes) & (sizes <= piece.max_bytes)
        fit = nnls_trimmed(design[mask] - base, target[mask] - start, times[mask])
        out.append(
            Piece(
                piece.min_bytes,
                piece.max_bytes,
                tuple(float(v) for v in fit.x),
                fit.sse,
                int(np.count_nonzero(mask)),
                fit.outliers,
                offset=start - float(base @ fit.x),
            )
        )
    return out
