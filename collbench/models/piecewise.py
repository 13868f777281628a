"""Least squares for relative error, and continuous piecewise fits with breakpoints found from the data.

Times span decades (a few microseconds at 8 bytes, seconds at a gigabyte), so every fit here minimises
the squared *relative* error: each row of the design matrix and the target is divided by the measured
time. Coefficients are non-negative: a negative latency or bandwidth is never physical.

A piecewise fit splits the sorted sizes into contiguous pieces (a protocol switch such as LL to Simple
or eager to rendezvous, a cache level). Every piece has its own latency (alpha) and per-byte cost
(beta), both non-negative, and neighbouring pieces meet at their *knot*, the geometric middle of the
gap between the last size of one and the first of the next: the model is continuous there, so it
never jumps at a size no one measured. Because the design's columns (steps, bytes) never decrease with
size and the coefficients are non-negative, each piece rises with size, so the joined model never
decreases. The pieces are fitted together, as one least-squares problem under those constraints
(:func:`joined_fit`), not one after another: a lower piece is not frozen before the upper one is
known. The constraints are linear inequalities, solved exactly by Lawson and Hanson's reduction of
inequality-constrained least squares to non-negative least squares (:func:`lsq_inequality`).

The split. For each piece count K, dynamic programming over the sorted distinct sizes finds the split
whose pieces, fitted each on its own, have the least total squared relative error; that split is then
fitted joined, and its breakpoints moved one size at a time while the joined error falls (a split that
is best for free pieces need not be best once they must meet). The candidates, one per K, are scored
by BIC, ``N ln(SSE/N + floor) + 2K ln N`` (two coefficients for the first piece, then per extra piece
one more coefficient, the other being fixed by continuity, and one breakpoint). The ``floor`` (1%
relative error squared) keeps a perfect fit from splitting further to chase rounding. Which candidate a
fit keeps is the caller's choice (``fit.py``: the best BIC among those that follow every point).

Every point given is data: nothing here sets a point aside. A point whose own measurement says it
cannot be trusted (stalls, two modes, rounds that disagree) is left out before fitting, by the caller
(``fit_points.py``), which names it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

MIN_SIZES_PER_SEGMENT = 3
MAX_SEGMENTS = 6
_BIC_FLOOR = 1e-4
_REFINE_ROUNDS = 24
"""At most this many breakpoint moves per candidate (each strictly lowers the joined error)."""


def _nnls(a: FloatArray, b: FloatArray, maxiter: int | None = None) -> tuple[FloatArray, float]:
    """scipy's non-negative least squares, imported on the first fit, not with this module: scipy.optimize
    costs 0.2 s of CPU, and every ``collbench ... --help`` imports this module without fitting anything."""
    from scipy.optimize import nnls

    x, rnorm = nnls(a, b, maxiter=maxiter)
    return x, float(rnorm)


def nnls_relative(design: FloatArray, target: FloatArray, times: FloatArray) -> tuple[FloatArray, float]:
    """Non-negative least squares of ``design @ x ~ target`` in relative error (divided by ``times``).

    Columns are scaled to unit norm before solving (bytes and step counts differ by 10^8) and the
    solution is scaled back. Returns ``(x, sse)``, sse being the sum of squared relative residuals.
    """
    a = design / times[:, None]
    y = target / times
    norms = np.linalg.norm(a, axis=0)
    norms[norms == 0] = 1.0
    x_scaled, _ = _nnls(a / norms, y)
    x = x_scaled / norms
    resid = a @ x - y
    return x, float(resid @ resid)


def lsq_inequality(e: FloatArray, f: FloatArray, g: FloatArray, h: FloatArray | None = None) -> FloatArray:
    """The x minimising ``||e x - f||`` subject to ``g x >= h`` (``h`` defaults to 0).

    Lawson and Hanson, *Solving Least Squares Problems*, ch. 23: with ``e = QR`` and ``z = Rx - Q^T f``
    the problem becomes the least-distance problem ``min ||z||`` subject to ``g R^-1 z >= h - g R^-1
    Q^T f``, whose solution comes from one non-negative least-squares problem in the constraints' dual.
    Columns of ``e`` are scaled to unit norm first, and each constraint row to unit norm (neither
    changes the solution). ``e`` must have full column rank. Raises ValueError when the constraints
    cannot all hold.
    """
    n = e.shape[1]
    bound = np.zeros(g.shape[0]) if h is None else np.asarray(h, dtype=np.float64)
    scale = np.linalg.norm(e, axis=0)
    scale[scale == 0] = 1.0
    q, r = np.linalg.qr(e / scale)
    if np.min(np.abs(np.diag(r))) <= 1e-12 * np.max(np.abs(np.diag(r))):
        raise ValueError("the design does not determine every coefficient (rank deficient)")
    r_inv = np.linalg.inv(r)
    qf = q.T @ f
    cons = (g / scale) @ r_inv
    rhs = bound - cons @ qf
    row_norms = np.linalg.norm(cons, axis=1)
    if np.any((row_norms == 0) & (rhs > 0)):
        raise ValueError("the constraints cannot all hold")
    row_norms[row_norms == 0] = 1.0
    cons, rhs = cons / row_norms[:, None], rhs / row_norms
    dual = np.vstack([cons.T, rhs[None, :]])
    unit = np.zeros(n + 1)
    unit[-1] = 1.0
    u, _ = _nnls(dual, unit, maxiter=50 * dual.shape[1])
    resid = dual @ u - unit
    if abs(resid[-1]) <= 1e-12:
        raise ValueError("the constraints cannot all hold")
    z = -resid[:n] / resid[-1]
    return (r_inv @ (z + qf)) / scale


@dataclass(frozen=True, slots=True)
class Piece:
    """One segment of a piecewise fit: rows with sizes in [min_bytes, max_bytes], and its coefficients."""

    min_bytes: int
    max_bytes: int
    coef: tuple[float, ...]
    """(alpha, beta): the piece's own latency per step and cost per byte, both >= 0."""
    sse: float
    """Squared relative residuals of the piece's rows under the joined model."""
    rows: int

    def value(self, row: FloatArray) -> float:
        """The piece's model at one design row."""
        return float(np.asarray(row, dtype=np.float64) @ np.asarray(self.coef))


@dataclass(frozen=True, slots=True)
class JoinedFit:
    """A continuous, non-decreasing piecewise model of sorted rows: its pieces, error and predictions."""

    pieces: tuple[Piece, ...]
    sse: float
    """Sum of squared relative residuals over all rows."""
    pred: FloatArray
    """The model's value (design part, without what the caller fixed) at each row, in the rows' order."""

    @property
    def segments(self) -> int:
        return len(self.pieces)


def switch_point(lower: Piece, upper: Piece) -> float:
    """Where the model hands over from ``lower`` to ``upper``: the geometric middle of the gap between them."""
    return math.sqrt(max(lower.max_bytes, 1) * max(upper.min_bytes, 1))


def joined_fit(
    sizes: FloatArray,
    design: FloatArray,
    target: FloatArray,
    times: FloatArray,
    starts: Sequence[int],
    design_at: Callable[[float], FloatArray],
) -> JoinedFit:
    """The best continuous piecewise model of rows sorted by size, pieces starting at row ``starts``.

    ``starts`` are the first row of each piece after the first (rows of one size stay together).
    Piece ``k + 1``'s coefficients are piece ``k``'s plus ``lambda_k`` times a vector orthogonal to
    the design row at their knot ``s_k`` (``design_at(s_k)``), so the two pieces agree at ``s_k``
    whatever ``lambda_k`` is; the unknowns are the first piece's coefficients and the lambdas, under
    the constraint that every piece's coefficients are >= 0 (:func:`lsq_inequality`). Two design
    columns (alpha, beta).
    """
    bounds = [0, *starts, len(sizes)]
    k = len(bounds) - 1
    piece_of = np.zeros(len(sizes), dtype=np.int64)
    for i in range(k):
        piece_of[bounds[i] : bounds[i + 1]] = i
    knots = [math.sqrt(max(sizes[b - 1], 1.0) * max(sizes[b], 1.0)) for b in bounds[1:-1]]
    normals = [np.array([row[1], -row[0]]) for row in (np.asarray(design_at(s), dtype=np.float64) for s in knots)]
    if k == 1:
        coef, _ = nnls_relative(design, target, times)
        coefs = coef[None, :]
    else:
        e = np.zeros((len(sizes), 2 + k - 1))
        e[:, :2] = design
        for j, normal in enumerate(normals):
            later = piece_of > j
            e[later, 2 + j] = design[later] @ normal
        g = np.zeros((2 * k, 2 + k - 1))
        for piece in range(k):
            g[2 * piece : 2 * piece + 2, :2] = np.eye(2)
            for j in range(piece):
                g[2 * piece : 2 * piece + 2, 2 + j] = normals[j]
        y = lsq_inequality(e / times[:, None], target / times, g)
        # Round-off may leave a coefficient a hair below zero; a negative cost is never meant.
        coefs = np.maximum((g @ y).reshape(k, 2), 0.0)
        # A term worth less than round-off of the piece's time at its largest size is none at all
        # (else a flat piece shows a bandwidth of 1e17 GB/s).
        tops = design[np.array(bounds[1:]) - 1]
        terms = coefs * tops
        coefs[terms < 1e-12 * terms.sum(axis=1, keepdims=True)] = 0.0
    pred = np.einsum("ij,ij->i", design, coefs[piece_of])
    resid = (pred - target) / times
    pieces = tuple(
        Piece(
            int(sizes[bounds[i]]),
            int(sizes[bounds[i + 1] - 1]),
            tuple(float(v) for v in coefs[i]),
            float(resid[bounds[i] : bounds[i + 1]] @ resid[bounds[i] : bounds[i + 1]]),
            bounds[i + 1] - bounds[i],
        )
        for i in range(k)
    )
    return JoinedFit(pieces, float(resid @ resid), pred)


def piecewise_candidates(
    sizes: FloatArray,
    design: FloatArray,
    target: FloatArray,
    times: FloatArray,
    design_at: Callable[[float], FloatArray],
    *,
    max_segments: int = MAX_SEGMENTS,
    min_sizes: int = MIN_SIZES_PER_SEGMENT,
) -> list[JoinedFit]:
    """One joined model per piece count K = 1.. (see the module docstring), K ascending.

    Rows must be sorted by size; rows of one size always stay in one piece. Only one candidate (one
    line) when there are too few distinct sizes to split.
    """
    if np.any(np.diff(sizes) < 0):
        raise ValueError("rows must be sorted by size")
    distinct = np.unique(sizes)
    m = len(distinct)
    # Row index where each distinct size starts, plus the end.
    first_row = [int(i) for i in np.searchsorted(sizes, distinct, side="left")] + [len(sizes)]
    k_max = max(1, min(max_segments, m // min_sizes))
    one = joined_fit(sizes, design, target, times, [], design_at)
    if k_max == 1:
        return [one]
    cost: dict[tuple[int, int], float] = {}
    for i in range(m):
        for j in range(i + min_sizes, m + 1):
            lo, hi = first_row[i], first_row[j]
            cost[(i, j)] = nnls_relative(design[lo:hi], target[lo:hi], times[lo:hi])[1]
    inf = math.inf
    # best[k][j]: least SSE covering distinct sizes [0, j) with k free pieces; back[k][j]: where the last starts.
    best = [[inf] * (m + 1) for _ in range(k_max + 1)]
    back = [[-1] * (m + 1) for _ in range(k_max + 1)]
    best[0][0] = 0.0
    for k in range(1, k_max + 1):
        for j in range(k * min_sizes, m + 1):
            for i in range((k - 1) * min_sizes, j - min_sizes + 1):
                total = best[k - 1][i] + cost[(i, j)]
                if total < best[k][j]:
                    best[k][j] = total
                    back[k][j] = i

    def joined(breaks: tuple[int, ...]) -> JoinedFit:
        return joined_fit(sizes, design, target, times, [first_row[b] for b in breaks], design_at)

    out = [one]
    for k in range(2, k_max + 1):
        if best[k][m] == inf:
            continue
        breaks: list[int] = []
        j = m
        for kk in range(k, 1, -1):
            j = back[kk][j]
            breaks.append(j)
        try:
            out.append(_refined(tuple(sorted(breaks)), m, min_sizes, joined))
        except ValueError:
            # Sizes many orders of magnitude apart can leave a split's joined design without full rank:
            # the rows cannot tell its coefficients apart, so that piece count is no candidate.
            continue
    return out


def _refined(
    breaks: tuple[int, ...], m: int, min_sizes: int, joined: Callable[[tuple[int, ...]], JoinedFit]
) -> JoinedFit:
    """The joined model of ``breaks`` (indices of distinct sizes where pieces start), with each break
    moved one size at a time, the best move first, while the joined error falls."""
    current = joined(breaks)
    for _ in range(_REFINE_ROUNDS):
        moves = []
        for i in range(len(breaks)):
            for step in (-1, 1):
                moved = list(breaks)
                moved[i] += step
                edges = [0, *moved, m]
                if all(b - a >= min_sizes for a, b in itertools.pairwise(edges)):
                    moves.append(tuple(moved))
        if not moves:
            break
        tried = [(joined(mv), mv) for mv in moves]
        fit, where = min(tried, key=lambda pair: pair[0].sse)
        if fit.sse >= current.sse * (1 - 1e-9):
            break
        current, breaks = fit, where
    return current


def bic(sse: float, n_rows: int, segments: int) -> float:
    """The score splits are chosen by: ``N ln(SSE/N + floor) + 2K ln N`` (lower is better)."""
    return n_rows * math.log(sse / n_rows + _BIC_FLOOR) + 2 * segments * math.log(n_rows)
