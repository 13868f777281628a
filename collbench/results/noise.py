"""Noise in a point's per-iteration times: the stall regime, and the statistics decisions can use.

On a busy or oversubscribed machine a fraction of calls *stall*: a rank waits for a core (a scheduler
tick, milliseconds) while the call itself takes microseconds. Stalls only ever make a call slower, so
they show as a heavy right tail, or as a second mode far above the first when they are common. A
point's median is then at their mercy: with 40% of calls stalled the median sits on the edge of the
stall mode and moves by several times between runs.

``stall_fraction`` is the figure rows carry: the fraction of timed iterations slower than
``STALL_FACTOR`` (3) times the fastest one. A collective's own variation (cache misses, a page fault,
a rank arriving late to the barrier) stays well inside 3x; a wait for the scheduler does not, at any
size where the call is shorter than a few scheduler ticks. A point is *stalled* (marked in tables,
named in the summary) when that fraction reaches ``STALL_MARK`` (5%), or when its times fall into
two modes (a gap of more than 2x in the sorted times with at least 5% on each side).

The statistics here are the candidates for the time that decisions compare; ``benchmarks/
bench_statistics.py`` measures their stability under this noise (docs/tuning.md, "Which time decisions use").
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from collbench.results.row import ResultRow

STALL_FACTOR = 3.0
"""An iteration slower than this many times the point's fastest is a stall."""
STALL_MARK = 0.05
"""A point with at least this fraction of stalled iterations is marked as stalled."""
MODE_GAP = 2.0
"""Two modes: sorted times jump by more than this factor between neighbours..."""
MODE_MIN_SHARE = 0.05
"""...with at least this fraction of the iterations on each side."""
TRIM = 0.2
"""The trimmed mean drops this fraction at each end."""


def stall_fraction(samples: Sequence[float], factor: float = STALL_FACTOR) -> float:
    """Fraction of samples slower than ``factor`` times the fastest; ValueError when empty."""
    if not samples:
        raise ValueError("no samples")
    fastest = min(samples)
    if fastest <= 0:
        return 0.0
    return sum(1 for s in samples if s > factor * fastest) / len(samples)


def two_modes(samples: Sequence[float]) -> bool:
    """Whether the times split into two groups more than ``MODE_GAP`` apart, each ``MODE_MIN_SHARE`` or more."""
    xs = sorted(s for s in samples if s > 0)
    n = len(xs)
    least = max(1, math.ceil(MODE_MIN_SHARE * n))
    return any(xs[i] > MODE_GAP * xs[i - 1] for i in range(least, n - least + 1))


@dataclass(frozen=True, slots=True)
class StallVerdict:
    """What the samples of one point say about stalls."""

    fraction: float
    """Iterations slower than 3x the fastest, as a fraction."""
    bimodal: bool

    @property
    def stalled(self) -> bool:
        return self.fraction >= STALL_MARK or self.bimodal


def detect_stalls(samples: Sequence[float]) -> StallVerdict:
    """The stall regime of one point's per-iteration times (see the module docstring)."""
    return StallVerdict(stall_fraction(samples), two_modes(samples))


def quantile(samples: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) with linear interpolation between order statistics."""
    xs = sorted(samples)
    if not xs:
        raise ValueError("no samples")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def trimmed_mean(samples: Sequence[float], trim: float = TRIM) -> float:
    """Mean of the samples left after dropping ``trim`` of them at each end."""
    xs = sorted(samples)
    if not xs:
        raise ValueError("no samples")
    cut = int(len(xs) * trim)
    kept = xs[cut : len(xs) - cut] or xs
    return statistics.fmean(kept)


@functools.lru_cache(maxsize=64)
def student_t_factor(sigmas: float, degrees_of_freedom: int) -> float:
    """Standard errors a mean must clear to carry the confidence ``sigmas`` normal standard errors carry.

    ``mean - sigmas * se > x`` holds with one-sided confidence Phi(sigmas) (97.7% at 2; the interval
    ``mean +- sigmas * se``, 95.4%) only when ``se`` is known. Where ``se`` is estimated from the
    samples' own scatter, with ``degrees_of_freedom`` (n - 1 for a mean of n), the same confidence needs
    Student's t quantile at Phi(sigmas): at 2, 4.53 standard errors for 3 samples, 3.31 for 4, 2.87
    for 5, 2.28 for 11, tending to 2. With 3 samples, 2 standard errors give 90.8%, not 97.7%.
    Raises ValueError for no degree of freedom or a non-positive ``sigmas``.
    """
    if degrees_of_freedom < 1:
        raise ValueError(f"a standard error needs a degree of freedom, got {degrees_of_freedom}")
    if not sigmas > 0:
        raise ValueError(f"sigmas must be positive, got {sigmas}")
    # scipy.special rather than scipy.stats (whose import takes a second): stdtrit(df, p) is the t
    # quantile scipy.stats.t.ppf(p, df) computes, ndtr the normal distribution function.
    from scipy.special import ndtr, stdtrit

    return float(stdtrit(degrees_of_freedom, ndtr(sigmas)))


def min_of_medians(rounds: Sequence[Sequence[float]]) -> float:
    """The smallest of the rounds' medians: the round least disturbed by the machine's load."""
    medians = [statistics.median(r) for r in rounds if r]
    if not medians:
        raise ValueError("no samples")
    return min(medians)


def decision_time_us(row: ResultRow) -> float:
    """The time decisions and fits use for one measured row: its first quartile where the row has one.

    Stalls only ever add time, and on a busy machine they hit up to half of a point's iterations, so
    the median lands on their edge and moves by several times between runs; the first quartile stays
    on the calls that ran undisturbed (benchmarks/bench_statistics.py measures the alternatives; see
    docs/tuning.md). Rows from older files or other tools, without it, give their p50. Across repeated
    rows (rounds), selection takes the smallest: a round that a burst of load hit must not decide.
    """
    p25 = _p25(row)
    return p25 if p25 is not None else row.time_us


def _p25(row: ResultRow) -> float | None:
    """The row's first quartile where it carries a usable one."""
    p25 = row.time_us_p25
    return p25 if p25 is not None and p25 > 0 and math.isfinite(p25) else None


def decision_time_consistent(row: ResultRow) -> bool:
    """Whether a row's decision time (``decision_time_us``) lies among its undisturbed calls.

    A row in the stall regime still has one where its stalls leave the quantile untouched: with 10%
    of its iterations stalled, its p25 is a call that ran undisturbed. The statistic is itself a
    stall when at least as many iterations stalled as the quantile leaves above it (75% for a p25,
    50% for a p50), or when it lies in the upper of two modes (above ``MODE_GAP`` times the fastest
    iteration in a two-moded row). A row without a stall fraction (older files, other tools' logs)
    is consistent: nothing in it says otherwise, and its fastest iteration alone does not (one lucky
    call on an oversubscribed machine sits 3x below every other).
    """
    if row.stall_fraction is None:
        return True
    p25 = _p25(row)
    if row.stall_fraction >= (0.5 if p25 is None else 0.75):
        return False
    time = row.time_us if p25 is None else p25
    fastest = row.time_us_min
    return not (row.bimodal and fastest > 0 and time > MODE_GAP * fastest)


def row_stalled(row: ResultRow) -> bool:
    """Whether a measured point is in the stall regime (False when its rows carry no noise figures)."""
    return (row.stall_fraction or 0.0) >= STALL_MARK or bool(row.bimodal)


STALL_MARKER = "*"
"""What tables append to a stalled point's time."""
