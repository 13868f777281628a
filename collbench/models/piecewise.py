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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import nnls

FloatArray = NDArray[np.float64]

MIN_SIZES_PER_SEGMENT = 3
MAX_SEGMENTS = 6
_BIC_FLOOR = 1e-4


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
class Piece:
    """One segment of a piecewise fit: rows with sizes in [min_bytes, max_bytes], and its coefficients."""

    min_bytes: int
    max_bytes: int
    coef: tuple[float, ...]
    sse: float
    rows: int


def piecewise_fit(
    sizes: FloatArray,
    design: FloatArray,
    target: FloatArray,
    times: FloatArray,
    *,
    max_segments: int = MAX_SEGMENTS,
    min_sizes: int = MIN_SIZES_PER_SEGMENT,
) -> list[Piece]:
    """The best split of the rows (by size) into 1..max_segments pieces, chosen by BIC.

    ``sizes`` give each row's message size; rows of one size always stay in one piece. Returns one
    piece when no split pays for itself (or there are too few distinct sizes to split).
    """
    order = np.argsort(sizes, kind="stable")
    sizes, design, target, times = sizes[order], design[order], target[order], times[order]
    distinct = np.unique(sizes)
    m = len(distinct)
    # Row index where each distinct size starts, plus the end.
    starts = [int(i) for i in np.searchsorted(sizes, distinct, side="left")] + [len(sizes)]
    n_rows = len(sizes)
    k_max = max(1, min(max_segments, m // min_sizes))

    def fit_range(i: int, j: int) -> tuple[FloatArray, float]:
        lo, hi = starts[i], starts[j]
        return nnls_relative(design[lo:hi], target[lo:hi], times[lo:hi])

    cost: dict[tuple[int, int], float] = {}
    for i in range(m):
        for j in range(i + min_sizes, m + 1):
            cost[(i, j)] = fit_range(i, j)[1]
    if k_max == 1 or not cost:
        x, sse = fit_range(0, m)
        return [Piece(int(distinct[0]), int(distinct[-1]), tuple(float(v) for v in x), sse, n_rows)]

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
    scores = {
        k: n_rows * math.log(best[k][m] / n_rows + _BIC_FLOOR) + (3 * k - 1) * math.log(n_rows)
        for k in range(1, k_max + 1)
        if best[k][m] < inf
    }
    k_best = min(scores, key=lambda k: (scores[k], k))
    bounds: list[tuple[int, int]] = []
    j = m
    for k in range(k_best, 0, -1):
        i = back[k][j]
        bounds.append((i, j))
        j = i
    pieces: list[Piece] = []
    for i, j in reversed(bounds):
        x, sse = fit_range(i, j)
        pieces.append(
            Piece(
                int(distinct[i]),
                int(distinct[j - 1]),
                tuple(float(v) for v in x),
                sse,
                starts[j] - starts[i],
            )
        )
    return pieces
