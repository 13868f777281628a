"""Timing one point of a sweep: batches of iterations on every rank, and when a point is cut short.

A point's timed iterations come in batches between two barriers; after each batch one MAX all-reduce
leaves every rank the slowest rank's time per iteration (:func:`_slowest_per_iteration`), so every
rank holds the same samples and takes the same decision about the next batch, with no broadcast.

A point clearly behind (``SweepConfig.cut_behind``, tune's rounds). On the namespace cluster a tune's
first round measured five algorithms that were 4-10x behind the fastest at every size, each call of
them 0.2-7 s, and each made 7 times (the data check, the warm-up, 5 timed): 82% of the round. Where a
point looks that far behind, it is timed one iteration first, and stopped there when that iteration is
over ``cut_behind`` times the slowest timed iteration of a point already measured in full at its size
in this sweep (the smallest such ceiling: :class:`SizeLeaders`), and its full iterations would overrun
its time budget. The basis is measured on both sides: that point's whole range against the point's
own timed call (and its data-check call before it), at the factor the tune's later rounds leave
algorithms out at (``tuning.rounds.within_reach``, 2x: ranges apart by 2x, where selection's bar is
at most 25%). The decision needs no extra
collective: the leaders come from the samples every rank holds, and whether to time one iteration
first comes from the slowest rank's data-check call, agreed in the all-reduce of the check's flags
(:func:`looks_behind`). A cheap point is never cut (its full iterations fit its budget, and a single
iteration of it can be a stall: a scheduler tick is 40x a 100 us call), nor a point with no leader at
its size yet, nor one whose timed iteration is within the bound: those get their full iterations, in
the same batches as before.

A point timed one iteration first makes no warm-up call before it where its first call was the last
before the timing. That call (whose output the check reads after the timing, ``worker.py``) built the plan,
allocated and touched the same buffers and, over gloo, opened every connection the schedule uses: a
warm-up after it is one more call of a schedule whose time is the links'. On the namespace cluster
those warm-ups were a third of the cut points' time (63 of 189 s in round 0, benchmarks/README.md,
where the warm-up was still made). Each cut row's reason gives its check call beside its timed one:
over the 35 cut rows of a quick tune there the check call was 1.003x the timed one (median), and the
timed calls 0.999x those timed after a warm-up in the run before (benchmarks/README.md, "The quick
tune's last 84 s"). A point past ``buffers.KEEP_OUTPUT_BYTES`` is checked right after its first call
instead: the check's CPU work and collectives come between that call and the timing, and the first
call after them was often slow (benchmarks/README.md, "A quick tune without its warm-up call"), so the
one timed call that decides would hold the check's aftermath and cut a point for it. It makes one
warm-up call first (``checked_before``), as the first call is for the others. A point that is not
behind after all gets the rest of its warm-up then, and its full iterations afresh: that first timed
call counts as one of its warm-up calls, not as a sample, so every point timed in full is timed as any
other."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from collbench.results.row import ResultRow
from collbench.runtime.executor.timing import AutoIters, IterationTimer
from collbench.runtime.launch.ranks import RankContext


@dataclass(frozen=True, slots=True)
class TimedPoint:
    """A point's timed samples (slowest rank's microseconds per iteration) and the iterations behind them."""

    samples_us: list[float]
    iters: int
    cut_short: str | None = None
    """Why the point has fewer timed iterations than asked (``ResultRow.cut_short``); None: it has them all."""


@dataclass(frozen=True, slots=True)
class Leader:
    """A point measured in full at one size: what a point there may be cut short against."""

    algo: str
    time_us_max: float
    """Its slowest timed iteration."""


class SizeLeaders:
    """Per (op, size_bytes, in place), the point a sweep measured there whose slowest timed iteration is
    the smallest (with correct data, timed in full): the tightest measured ceiling of the size.

    A point over twice that ceiling is over twice a whole measured range, so it cannot be the fastest
    there, whichever point turns out fastest; taking the fastest point's own ceiling instead would let
    one stalled iteration of it (a 4 ms scheduler tick, or a burst of load) spare every point after it.
    Every rank adds the same points from the same samples (the slowest rank's, gathered), so every rank
    holds the same leaders. ``factor`` is ``SweepConfig.cut_behind`` (None: no point is ever cut).
    """

    __slots__ = ("_leaders", "factor")

    def __init__(self, factor: float | None) -> None:
        self.factor = factor
        self._leaders: dict[tuple[str, int, bool], Leader] = {}

    def add(self, key: tuple[str, int, bool], leader: Leader, *, wrong: int, cut: bool) -> None:
        """Take a measured point as its size's leader if its ceiling is below the one there.

        A point with wrong data, or cut short itself, never leads: neither is a full measurement.
        """
        if wrong > 0 or cut:
            return
        held = self._leaders.get(key)
        if held is None or leader.time_us_max < held.time_us_max:
            self._leaders[key] = leader

    def add_rows(self, rows: Iterable[ResultRow]) -> None:
        """Take the rows of points done before (a resumed sweep's), as measured points."""
        for row in rows:
            self.add(
                (row.op, row.size_bytes, row.in_place),
                Leader(row.algo, row.time_us_max),
                wrong=row.wrong,
                cut=row.cut_short is not None,
            )

    def bound(self, key: tuple[str, int, bool], algo: str) -> Behind | None:
        """What a point of ``algo`` at ``key`` is cut short against; None: nothing (no leader, or it leads)."""
        held = self._leaders.get(key)
        if self.factor is None or held is None or held.algo == algo:
            return None
        return Behind(held.algo, held.time_us_max, self.factor)


@dataclass(frozen=True, slots=True)
class Behind:
    """The bound one point is cut short at: ``factor`` times its size's leader's slowest iteration."""

    leader: str
    leader_max_us: float
    factor: float
    check_us: float | None = None
    """The slowest rank's data-check call at the point, the point's first call, where it looked behind
    (:func:`looks_behind`); the reason shows it beside the timed call."""

    @property
    def bound_us(self) -> float:
        return self.factor * self.leader_max_us

    def reason(self, sample_us: float, timed: int, asked: int) -> str:
        """What a row cut short by this bound records (``ResultRow.cut_short``)."""
        check = "" if self.check_us is None else f"; its data check's call {self.check_us / self.leader_max_us:.2f}x"
        return (
            f"{timed} of {asked} timed iterations: {sample_us / self.leader_max_us:.2f}x the slowest "
            f"iteration of {self.leader} at this size (cut over {self.factor:g}x{check})"
        )


def looks_behind(behind: Behind | None, first_call_us: float, iters: int, budget_s: float) -> bool:
    """Whether a point is timed one iteration first, to be cut short there if that one is behind.

    ``first_call_us`` is the slowest rank's untimed data-check call (the same on every rank): the point
    looks behind when it is over the bound, and costly when its ``iters`` iterations at that time would
    overrun ``budget_s``. Otherwise the point is timed exactly as any other.
    """
    if behind is None:
        return False
    return first_call_us > behind.bound_us and first_call_us * 1e-6 * iters > budget_s


def cut_after_first(behind: Behind, sample_us: float, iters: int, budget_s: float) -> bool:
    """Whether a point whose first timed iteration took ``sample_us`` (slowest rank) stops there:
    over the bound, and its ``iters`` iterations at that time would overrun ``budget_s``."""
    return sample_us > behind.bound_us and sample_us * 1e-6 * iters > budget_s


def time_point(
    ctx: RankContext,
    call: Callable[[], None],
    timer: IterationTimer,
    iters: int | None,
    budget_s: float,
    behind: Behind | None = None,
    *,
    warmup: int = 0,
    checked_before: bool = False,
) -> TimedPoint:
    """Slowest-rank samples of the point (the same on every rank) and the iterations timed, after
    ``warmup`` untimed calls.

    A sample is one iteration on the CPU, a round of iterations with CUDA events (``timer.sample_iters``).
    ``behind``: time one iteration first, and stop there if it is behind (:func:`cut_after_first`); given
    only where :func:`looks_behind` said so on every rank. No warm-up call comes before that iteration,
    but one where ``checked_before`` (the data check came after the point's first call; ``warmup`` is
    then at least 1, and that call is one of them). Not behind after all, that iteration is one of the
    point's warm-up calls too where any are left: the rest of them, then its iterations.
    """
    policy = AutoIters(budget_s=budget_s)
    asked = iters if iters is not None else policy.min_iters
    samples: list[float] = []
    covered: list[int] = []
    if behind is None:
        _warm_up(call, warmup)
        batch = asked
    else:
        settle = 1 if checked_before else 0
        _warm_up(call, settle)  # the check's aftermath in this call, not in the one that decides
        _time_batch(ctx, call, timer, 1, samples, covered)
        if cut_after_first(behind, samples[0], asked, budget_s):
            return TimedPoint(samples, 1, behind.reason(samples[0], 1, asked))
        batch = asked - 1
        if warmup > settle:
            # Timed as every point is: that call was one of its warm-up calls, not a sample.
            samples.clear()
            covered.clear()
            _warm_up(call, warmup - settle - 1)
            batch = asked
    while batch > 0:
        _time_batch(ctx, call, timer, batch, samples, covered)
        if iters is not None:
            break
        # Every rank holds the same samples, so every rank takes the same decision: no broadcast.
        elapsed_s = sum(t * k for t, k in zip(samples, covered, strict=True)) * 1e-6
        batch = policy.next_batch(samples, elapsed_s, iters_done=sum(covered))
    return TimedPoint(samples, sum(covered))


def _warm_up(call: Callable[[], None], calls: int) -> None:
    """``calls`` untimed calls (the sweep's ``--warmup``)."""
    for _ in range(calls):
        call()


def _time_batch(
    ctx: RankContext,
    call: Callable[[], None],
    timer: IterationTimer,
    batch: int,
    samples: list[float],
    covered: list[int],
) -> None:
    """Time ``batch`` iterations on every rank; append the slowest rank's samples and their iterations."""
    if ctx.device.type == "cuda":
        # The barrier is on the gloo control group: it must not release a rank whose GPU still
        # runs the previous batch or the warm-up, or that rank's first event waits for them.
        torch.cuda.synchronize(ctx.device)
    dist.barrier(group=ctx.control)
    sizes = timer.sample_iters(batch)
    mine = torch.tensor(timer.time_iterations(call, batch), dtype=torch.float64)
    assert mine.numel() == len(sizes), "a timer returned other samples than sample_iters said"
    _slowest_per_iteration(mine, ctx.control)
    samples.extend(mine.tolist())
    covered.extend(sizes)


def _slowest_per_iteration(times: torch.Tensor, group: Any) -> None:
    """``times`` (this rank's, one per sample) becomes, per sample, the largest over the group's ranks.

    One MAX all-reduce of the batch's samples, the same on every rank (max is exact in any order). It
    was an all-gather of every rank's samples to every rank, folded in Python: per batch, 2.5 MiB to
    each rank and 71 ms of its CPU at 16,384 ranks, where this is O(samples).
    """
    dist.all_reduce(times, op=dist.ReduceOp.MAX, group=group)
