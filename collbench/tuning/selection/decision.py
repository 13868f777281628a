"""The decision at one size: which variant runs there, and which others it cannot be told apart from.

* To switch from A to B, B must be faster by more than the two points' combined noise,
  ``sigmas * sqrt(noise_A^2 + noise_B^2)``, and at least ``min_gain`` (3% by default); the bar is
  capped at ``max_threshold`` (25%) so that on a very noisy machine a clearly faster algorithm (2x at
  large sizes) still wins, except where a point stalled (results/noise.py) or its rounds disagree by
  more than the cap: there the noise is uncapped, since a difference inside it is no finding.
* A winner must also stay ahead of the others round by round (:func:`apart_round_by_round`): a
  point's time is its best round's, and one lucky round must not decide. Over three rounds or more
  that is a one-sided test of the rounds' mean log ratio with Student's t (the standard error comes
  from the rounds themselves), at the confidence ``sigmas`` normal standard errors give: 97.7% at 2.
* Ties. Every variant within that bar of the fastest, or not ahead of it round by round, cannot be
  told apart from it: they are tied, and a tie goes to the simpler choice: native when it is in the
  tie, else the variant in use at the size below (so that noise cannot make the rules flap), else
  the fastest.
* A variant measured in fewer rounds than the fastest because the tune left it out
  (``rounds.within_reach``: more than ``REACH_FACTOR`` behind) is never tied nor chosen
  (:func:`left_behind`): it is not let back in on less evidence than the others had. Nor is a point
  the tune cut short and never timed in full (``Point.cut_short``: its one timed iteration more than
  ``REACH_FACTOR`` times the slowest iteration of a point measured in full beside it; a round that
  timed it in full gives the point instead).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from collbench.errors import ConfigError
from collbench.profile.rules import Variant
from collbench.results.noise import student_t_factor
from collbench.tuning.selection.points import Point

NATIVE = "native"
"""The backend's own collective: the default a profile departs from only where that pays."""
DEFAULT_MIN_GAIN = 0.03
DEFAULT_MAX_THRESHOLD = 0.25
REACH_FACTOR = 2.0
"""How many times slower than the fastest variant's slowest iteration an algorithm's fastest one must
be for a tune to leave it out of its later rounds (``rounds.within_reach``)."""
DEFAULT_SIGMAS = 2.0
"""How many times the combined noise of two points their times must differ by to be told apart, as
``collbench compare`` asks of a change. At one, two algorithms that run the same exchange (one-shot
and recursive doubling on 2 ranks) are called apart at sizes where repeated tunes of one quiet
machine disagree on which is faster; at two they are tied there. Tests over a few rounds' ratios
take the confidence it stands for (97.7% one-sided) with Student's t instead: :func:`round_ratio_interval`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectionSettings:
    """How far a challenger must beat the incumbent before the rules switch algorithm."""

    min_gain: float = DEFAULT_MIN_GAIN
    """Smallest relative gain that counts, whatever the measured noise (0.03 = 3%)."""
    max_threshold: float = DEFAULT_MAX_THRESHOLD
    """Largest threshold the noise can raise the bar to."""
    sigmas: float = DEFAULT_SIGMAS
    """Multiples of the two points' combined noise that a gain must exceed; over a few rounds' time ratios,
    the confidence this many normal standard errors give, reached with Student's t
    (:func:`round_ratio_interval`)."""

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
        stalled, or when its rounds disagree by more than the cap: the machine itself changed speed
        between them, and a round that ran faster for the algorithms it measured first would, capped,
        let their best times beat the others "beyond the noise". A difference inside that noise is not
        a finding, whatever its size.
        """
        steady = not (a.stalled or b.stalled) and max(a.between, b.between) <= self.max_threshold
        return self.threshold(a.noise, b.noise, capped=steady)


def decide_at(
    here: dict[Variant, Point], current: Variant | None, settings: SelectionSettings
) -> tuple[Variant, tuple[Variant, ...]]:
    """The variant to run at one size, and the others it is tied with there.

    The fastest variant and every variant it has not beaten (:func:`beaten_by`: its time within the
    noise bar of the fastest's, ``settings.bar``, or not behind it round by round) cannot be told
    apart: they are tied. A tie goes to the
    simpler choice: the backend's own collective (native) when it is in the tie, else the variant
    already in use at the size below (so that noise cannot make the rules flap), else the fastest.
    """
    # A point cut short (one iteration, clearly behind) is no candidate, unless nothing else is.
    candidates = [v for v in here if not here[v].cut_short] or list(here)
    best = min(candidates, key=lambda v: (here[v].time_us, v.algo != NATIVE))
    fastest = here[best]
    tied = [
        v
        for v in candidates
        if v == best or (not left_behind(here[v], fastest) and not beaten_by(here[v], fastest, settings))
    ]
    natives = [v for v in tied if v.algo == NATIVE]
    if natives:
        chosen = natives[0]
    elif current is not None and current in tied:
        chosen = current
    else:
        chosen = best
    return chosen, tuple(v for v in tied if v != chosen)


def beaten_by(slower: Point, faster: Point, settings: SelectionSettings) -> bool:
    """Whether ``faster`` is ahead of ``slower`` by what a winner must show: its time below ``slower``'s
    beyond the pair's noise bar (``settings.bar``), and ahead round by round
    (:func:`apart_round_by_round`). Otherwise the two are tied."""
    bar = settings.bar(slower, faster)
    return slower.time_us > faster.time_us * (1.0 + bar) and apart_round_by_round(slower, faster, settings)


def left_behind(slower: Point, faster: Point) -> bool:
    """Whether ``slower`` was measured in fewer of a tune's rounds than ``faster``, and in every round
    both were measured in it was more than ``REACH_FACTOR`` times slower: the tune left it out of the
    rounds after (``rounds.within_reach``), so those rounds' noise says nothing about it."""
    mine, theirs = dict(slower.by_round), dict(faster.by_round)
    shared = [r for r in mine if r in theirs]
    if not shared or len(mine) >= len(theirs):
        return False
    return all(mine[r] > REACH_FACTOR * theirs[r] for r in shared)


def apart_round_by_round(slower: Point, faster: Point, settings: SelectionSettings) -> bool:
    """Whether, round by round, ``slower`` stays slower than ``faster`` beyond the noise.

    Each point's time is its best round's, so a variant with one lucky round can lead one that was as
    fast in every other round. Where both were measured in the same three or more rounds, the rounds'
    time ratios must say so too: their mean log ratio, less :func:`round_ratio_interval`'s half-width
    (Student's t standard errors), above the smallest gain that counts. That is a one-sided test at
    the confidence ``sigmas`` normal standard errors give (97.7% at the default 2): a pair whose true
    ratio is no more than ``1 + min_gain`` is called apart in at most 2.3% of tunes, with 3 rounds as
    with 6. Two shared rounds give no standard error worth the name (one degree of freedom: t's
    factor is 14), and a small lead in both can vanish in the next two (7% ahead, then 1% behind,
    10% and 1% ahead: issue 10): they are apart only when each round alone is behind by more than
    any bar the decision holds a pair to, :func:`far_apart_in_each`. Otherwise False, so that the
    tune measures the size again (``rounds.unsettled``). Fewer shared rounds: True (nothing to add to
    the comparison of best times).
    """
    logs = _shared_log_ratios(slower, faster)
    if len(logs) < 2:
        return True
    if len(logs) < 3:
        return far_apart_in_each(logs, slower, faster, settings)
    mean, half_width = round_ratio_interval(logs, settings)
    return mean - half_width > math.log1p(settings.min_gain)


def round_ratio_interval(logs: list[float], settings: SelectionSettings) -> tuple[float, float]:
    """The mean of three or more rounds' log time ratios ``logs``, and the half-width of its interval.

    The half-width is ``student_t_factor(sigmas, n - 1)`` standard errors (results/noise.py), not
    ``sigmas``: the standard error is estimated from the n rounds' own scatter, and with 3 rounds
    2 standard errors bound the mean with 90.8% confidence one-sided, where ``sigmas`` = 2 claims
    97.7% (4.53 standard errors give it). Rounds are independent blocks of the machine's time, each
    ratio taken within one round (so a round's speed cancels): the rounds' ratios are independent
    samples, which the t quantile asks.
    """
    error = statistics.stdev(logs) / math.sqrt(len(logs))
    return statistics.fmean(logs), student_t_factor(settings.sigmas, len(logs) - 1) * error


def _shared_log_ratios(a: Point, b: Point) -> list[float]:
    """log(a's time / b's time) in every round both were measured in (``Point.by_round``)."""
    mine, theirs = dict(a.by_round), dict(b.by_round)
    return [math.log(mine[r] / theirs[r]) for r in mine if r in theirs and mine[r] > 0 and theirs[r] > 0]


def far_apart_in_each(logs: list[float], slower: Point, faster: Point, settings: SelectionSettings) -> bool:
    """Whether every shared round's log time ratio ``logs`` (slower over faster) is beyond both the
    pair's noise bar, uncapped (``sigmas`` times the combined noise of the two points, their rounds'
    gap, pooled over the size's algorithms, included), and the cap any steady pair's bar stops at
    (``settings.max_threshold``, 25%).

    That is a lead no noise the tune measured explains in either round, nor any a steady machine is
    allowed: the decision's own bar between best times is never higher for steady points. On the
    namespace cluster recursive doubling was 1.34-1.48x behind the fastest in both fixed rounds at
    every size (bars 3-19%): a tie round of it re-measured 18 points (15 s) to learn that again.
    Leads of a few percent, where two rounds can agree by chance, still need a third round.

    ``sigmas`` here stays a normal multiplier, not Student's t: the bar is no interval of a mean of the
    two ratios, whose one degree of freedom would ask 14 standard errors (and re-measure that recursive
    doubling). Its noise is pooled over every algorithm at the size, and each round must clear it alone.
    On simulated rounds (benchmarks/bench_selection_confidence.py) a pair 3% apart is called apart in at
    most 0.6% of tunes where every point's rounds scatter by 10%, 2.1-2.3% at 15%, as ``sigmas`` = 2
    claims (on the 2-core VM a point's rounds scatter by 2-15%, median 4-8%), and 2.8-4.1% at 20-50%,
    somewhat more: there the pooled noise of two rounds varies as much as the ratios. A larger
    multiplier would send clear leads to a third round more often, on every machine.
    """
    bar = max(settings.max_threshold, settings.threshold(slower.noise, faster.noise, capped=False))
    return all(log > math.log1p(bar) for log in logs)


def equal_round_by_round(a: Point, b: Point, settings: SelectionSettings) -> bool:
    """Whether, over three or more shared rounds, ``a`` and ``b`` are shown to differ by less than the
    smallest gain that counts: the mean log ratio of their rounds' times, give or take
    :func:`round_ratio_interval`'s half-width (Student's t standard errors), inside
    ``settings.min_gain`` either way.

    Each side is a one-sided test at the confidence ``sigmas`` normal standard errors give (97.7% at
    the default 2; the interval, 95.4%): a pair whose true ratio is ``1 + min_gain`` or more either
    way is shown equal in at most 2.3% of tunes. With 3 rounds the interval is 4.53 standard errors
    wide each way, so rounds within 1-2% of each other may need a fourth round to show it.
    Such a pair is a tie more rounds cannot undo: whichever is faster, it is faster by less than any
    bar the decision asks a switch to clear, and the tie goes to the simpler choice either way. A tie
    round has nothing left to learn there (``rounds.unsettled``). On the namespace cluster ring and
    rabenseifner took the same time at 1-4 MiB (within 1-2% in every round), and each tie round
    re-measured them there again. Fewer than three shared rounds give no standard error: False.
    """
    logs = _shared_log_ratios(a, b)
    if len(logs) < 3:
        return False
    mean, half_width = round_ratio_interval(logs, settings)
    return abs(mean) + half_width < math.log1p(settings.min_gain)


def separated(here: dict[Variant, Point], settings: SelectionSettings) -> bool:
    """Whether the fastest variant at a size is faster than every other beyond the measured noise."""
    if len(here) < 2:
        return True
    _, tied = decide_at(here, None, settings)
    return not tied
