"""A point clearly behind the fastest of its size is timed once (runtime/sweep/timed.py): the decision
on fake timings, what its row says, and what selection, the later rounds and fits make of it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from synthetic_rows import point_row

from collbench.models.fit_points import summarize
from collbench.results.io import read_rows, write_rows
from collbench.results.row import ResultRow
from collbench.runtime.launch.ranks import RankContext
from collbench.runtime.sweep import timed
from collbench.runtime.sweep.timed import Behind, Leader, SizeLeaders, cut_after_first, looks_behind, time_point
from collbench.tuning.pipeline import cut_short_note
from collbench.tuning.rounds import unsettled, within_reach
from collbench.tuning.selection import (
    SelectionSettings,
    decide_at,
    in_round,
    measured_points,
    points_at,
    round_speeds,
)

KEY = ("all-reduce", 1 << 20, True)
REASON = "1 of 5 timed iterations: 4.00x the slowest iteration of ring at this size (cut over 2x)"


def test_the_leader_of_a_size_is_its_lowest_ceiling_with_correct_data_timed_in_full() -> None:
    leaders = SizeLeaders(2.0)
    assert leaders.bound(KEY, "tree") is None  # nothing measured at the size yet
    leaders.add(KEY, Leader("ring", 110.0), wrong=0, cut=False)
    leaders.add(KEY, Leader("direct", 55.0), wrong=3, cut=False)  # wrong data never leads
    leaders.add(KEY, Leader("one-shot", 45.0), wrong=0, cut=True)  # nor a point cut short
    leaders.add(KEY, Leader("two-tree", 130.0), wrong=0, cut=False)  # a higher ceiling: ring stays
    assert leaders.bound(KEY, "tree") == Behind("ring", 110.0, 2.0)
    assert leaders.bound(KEY, "ring") is None  # the leader is never cut against itself
    assert leaders.bound(("all-reduce", 1 << 20, False), "tree") is None  # another mode, another size
    # A stalled iteration of ring (its median the fastest, its ceiling high) spares nothing after it:
    # the bound is the lowest whole range measured at the size.
    stalled = SizeLeaders(2.0)
    stalled.add(KEY, Leader("ring", 450.0), wrong=0, cut=False)
    stalled.add(KEY, Leader("rabenseifner", 91.0), wrong=0, cut=False)
    assert stalled.bound(KEY, "direct") == Behind("rabenseifner", 91.0, 2.0)
    off = SizeLeaders(None)
    off.add(KEY, Leader("ring", 110.0), wrong=0, cut=False)
    assert off.bound(KEY, "tree") is None  # a plain sweep cuts nothing


def test_resumed_rows_lead_as_measured_ones() -> None:
    leaders = SizeLeaders(2.0)
    leaders.add_rows(
        [
            point_row("ring", 1 << 20, 100.0, spread=0.1),
            point_row("tree", 1 << 20, 10.0, cut_short=REASON),
            point_row("direct", 1 << 20, 5.0, wrong=2),
        ]
    )
    assert leaders.bound(KEY, "tree") == Behind("ring", pytest.approx(110.0), 2.0)


@pytest.mark.parametrize(
    ("first_us", "expected"),
    [
        (250_000.0, True),  # 2.3x the leader's slowest, 5 calls 1.25 s over a 0.05 s budget
        (200_000.0, False),  # within 2x of 110 ms... 220 ms is the bound
        (219_999.0, False),
    ],
)
def test_a_point_looks_behind_over_the_bound_only(first_us: float, expected: bool) -> None:
    behind = Behind("ring", 110_000.0, 2.0)
    assert looks_behind(behind, first_us, 5, 0.05) is expected
    assert cut_after_first(behind, first_us, 5, 0.05) is expected


def test_a_cheap_point_is_never_cut_however_far_behind() -> None:
    # 10x behind a 100 us leader, but 5 calls of 1 ms fit a 50 ms budget: one iteration of it could be
    # a stall (a scheduler tick is 40x such a call), and its full iterations cost nothing.
    behind = Behind("ring", 100.0, 2.0)
    assert not looks_behind(behind, 1000.0, 5, 0.05)
    assert not cut_after_first(behind, 1000.0, 5, 0.05)
    assert not looks_behind(None, 1e9, 5, 0.05)


class _Timer:
    """A CPU-like timer that returns the given times (microseconds) in order, one per call."""

    def __init__(self, times: list[float]) -> None:
        self.times = list(times)
        self.batches: list[int] = []

    def time_iterations(self, fn: Callable[[], object], iters: int) -> list[float]:
        self.batches.append(iters)
        out, self.times = self.times[:iters], self.times[iters:]
        return out + [out[-1] if out else 1.0] * (iters - len(out))

    def sample_iters(self, iters: int) -> list[int]:
        return [1] * iters

    def release(self) -> None:
        pass


@pytest.fixture
def one_rank(monkeypatch: pytest.MonkeyPatch) -> RankContext:
    monkeypatch.setattr(dist, "barrier", lambda group=None: None)
    monkeypatch.setattr(timed, "_slowest_per_iteration", lambda times, group: None)
    return RankContext(rank=0, world_size=1, local_rank=0, backend="gloo", device=torch.device("cpu"), timeout_s=5)


def test_a_point_behind_stops_after_its_first_timed_iteration(one_rank: RankContext) -> None:
    timer = _Timer([440_000.0] * 10)
    got = time_point(one_rank, lambda: None, timer, None, 0.05, Behind("ring", 110_000.0, 2.0))
    assert timer.batches == [1]
    assert got.samples_us == [440_000.0] and got.iters == 1
    assert got.cut_short == REASON


def test_a_point_not_behind_after_all_gets_its_full_iterations(one_rank: RankContext) -> None:
    # Its check call looked behind; its first timed iteration is within 2x: the rest of the first batch
    # (4), then on as -n auto goes (the budget is spent: no more).
    timer = _Timer([200_000.0] * 10)
    got = time_point(one_rank, lambda: None, timer, None, 0.05, Behind("ring", 110_000.0, 2.0))
    assert timer.batches == [1, 4]
    assert got.iters == 5 and got.cut_short is None
    fixed = time_point(one_rank, lambda: None, _Timer([200_000.0] * 10), 7, 0.05, Behind("ring", 110_000.0, 2.0))
    assert fixed.iters == 7 and fixed.cut_short is None


class _Calls:
    """The untimed calls time_point makes itself (the fake timer never calls): its warm-up calls."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def test_a_point_timed_once_first_makes_no_warm_up_call_before_it(one_rank: RankContext) -> None:
    # The data check's call before it was the point's first call: cut after one timed call, the point
    # made two calls, where it made 2 + warm-up before.
    calls, timer = _Calls(), _Timer([440_000.0] * 10)
    probe = Behind("ring", 110_000.0, 2.0, check_us=451_000.0)
    got = time_point(one_rank, calls, timer, None, 0.05, probe, warmup=2)
    assert calls.count == 0 and timer.batches == [1] and got.iters == 1
    assert got.cut_short == (
        "1 of 5 timed iterations: 4.00x the slowest iteration of ring at this size "
        "(cut over 2x; its data check's call 4.10x)"
    )


def test_a_point_not_behind_after_all_is_warmed_up_and_timed_as_any_other(one_rank: RankContext) -> None:
    # Its first timed call was within 2x: that call is one of its 2 warm-up calls, so one more, then
    # 5 iterations afresh; the first call's time is no sample of it.
    calls, timer = _Calls(), _Timer([300_000.0] + [200_000.0] * 10)
    got = time_point(one_rank, calls, timer, None, 0.05, Behind("ring", 180_000.0, 2.0), warmup=2)
    assert calls.count == 1 and timer.batches == [1, 5]
    assert got.iters == 5 and got.samples_us == [200_000.0] * 5 and got.cut_short is None
    # With one warm-up call asked, that first call was all of it.
    calls, timer = _Calls(), _Timer([300_000.0] + [200_000.0] * 10)
    got = time_point(one_rank, calls, timer, None, 0.05, Behind("ring", 180_000.0, 2.0), warmup=1)
    assert calls.count == 0 and timer.batches == [1, 5] and got.samples_us == [200_000.0] * 5
    # With none asked (tune --quick: the data check's call is the point's warm-up), that first timed
    # call is its first sample, and 4 more make its 5.
    calls, timer = _Calls(), _Timer([300_000.0] + [200_000.0] * 10)
    got = time_point(one_rank, calls, timer, None, 0.05, Behind("ring", 180_000.0, 2.0), warmup=0)
    assert calls.count == 0 and timer.batches == [1, 4] and got.iters == 5
    assert got.samples_us == [300_000.0] + [200_000.0] * 4


class _Events(_Timer):
    """The fake timer, noting its batches and the point's untimed calls in the order they come."""

    def __init__(self, times: list[float], events: list[str]) -> None:
        super().__init__(times)
        self.events = events

    def time_iterations(self, fn: Callable[[], object], iters: int) -> list[float]:
        self.events.append(f"timed {iters}")
        return super().time_iterations(fn, iters)


def test_a_point_checked_after_its_first_call_is_warmed_up_once_before_the_call_that_decides(
    one_rank: RankContext,
) -> None:
    # Past buffers.KEEP_OUTPUT_BYTES the data check comes between the point's first call and its timing:
    # the one timed call that decides the cut came right after the check's CPU work and collectives and
    # held their aftermath (timed.py). One warm-up call comes between, as the first call does for others.
    bound = Behind("ring", 110_000.0, 2.0)
    events: list[str] = []
    got = time_point(
        one_rank, lambda: events.append("call"), _Events([440_000.0] * 10, events), None, 0.05, bound,
        warmup=1, checked_before=True,
    )  # fmt: skip
    assert events == ["call", "timed 1"] and got.iters == 1 and got.cut_short == REASON
    # Not behind after all: that warm-up call was all the warm-up the point has (worker: at least 1
    # after a check), so the decided call is its first sample; with 2, it is the second warm-up call.
    for warmup, after, samples in ((1, "timed 4", [200_000.0] * 5), (2, "timed 5", [150_000.0] * 5)):
        events.clear()
        timer = _Events([200_000.0] + [150_000.0] * 10 if warmup == 2 else [200_000.0] * 10, events)
        got = time_point(
            one_rank, lambda: events.append("call"), timer, None, 0.05, bound, warmup=warmup, checked_before=True
        )
        assert events == ["call", "timed 1", after] and got.samples_us == samples and got.cut_short is None


def test_a_point_with_no_bound_is_warmed_up_before_its_iterations(one_rank: RankContext) -> None:
    calls, timer = _Calls(), _Timer([100_000.0] * 10)
    got = time_point(one_rank, calls, timer, None, 0.05, warmup=2)
    assert calls.count == 2 and timer.batches == [5] and got.iters == 5


def test_without_a_bound_the_batches_are_as_before(one_rank: RankContext) -> None:
    timer = _Timer([440_000.0] * 10)
    got = time_point(one_rank, lambda: None, timer, None, 0.05)
    assert timer.batches == [5] and got.iters == 5 and got.cut_short is None


def test_every_rank_takes_the_decision_from_the_slowest_ranks_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # This rank's own iteration is fast (100 ms, within 2x of ring's 110 ms); rank 1's took 400 ms. The
    # decision is on the gathered slowest rank's time, which every rank holds alike: cut on both.
    monkeypatch.setattr(dist, "barrier", lambda group=None: None)

    def slowest(mine: torch.Tensor, group: Any) -> None:  # the MAX all-reduce with rank 1's times
        mine.copy_(torch.maximum(mine, torch.full_like(mine, 400_000.0)))

    monkeypatch.setattr(timed, "_slowest_per_iteration", slowest)
    ctx = RankContext(rank=0, world_size=2, local_rank=0, backend="gloo", device=torch.device("cpu"), timeout_s=5)
    got = time_point(ctx, lambda: None, _Timer([100_000.0] * 10), None, 0.05, Behind("ring", 110_000.0, 2.0))
    assert got.iters == 1 and got.samples_us == [400_000.0] and got.cut_short is not None


def _rows(index: int, tree_cut: bool) -> list[ResultRow]:
    rows = [
        point_row("ring", 1 << 20, 100.0, iters=5, spread=0.05),
        point_row("rabenseifner", 1 << 20, 101.0, iters=5, spread=0.05),
        point_row("tree", 1 << 20, 400.0, iters=1 if tree_cut else 5, cut_short=REASON if tree_cut else None),
    ]
    return in_round(rows, index)


def test_selection_never_ties_nor_chooses_a_point_cut_short() -> None:
    # Made faster than ring on purpose: a point cut short is no candidate whatever its time says.
    rows = in_round(
        [point_row("ring", 1 << 20, 100.0, iters=5, spread=0.05), point_row("tree", 1 << 20, 99.0, cut_short=REASON)],
        0,
    )
    here = points_at(measured_points(rows)["all-reduce"], 1 << 20)
    chosen, tied = decide_at(here, None, SelectionSettings())
    assert chosen.algo == "ring" and tied == ()
    assert not unsettled(measured_points(rows))


def test_later_rounds_leave_a_point_cut_short_out() -> None:
    (kept,), left_out = within_reach(measured_points(_rows(0, tree_cut=True)))
    assert {algo for _, algo in kept.pairs} == {"ring", "rabenseifner"}
    assert left_out == 1


def test_a_point_cut_short_where_its_algorithm_competes_next_door_is_measured_again() -> None:
    # Rabenseifner, cut short at 1 MiB (its check and timed calls both stalled), is within reach of
    # ring at 512 KiB and 2 MiB, measured in full: the next round measures it at 1 MiB again. Tree,
    # cut short at 1 MiB and 4x behind at both neighbours, is left out as before.
    rows = [
        point_row("ring", 1 << 19, 50.0, iters=5, spread=0.05),
        point_row("rabenseifner", 1 << 19, 51.0, iters=5, spread=0.05),
        point_row("tree", 1 << 19, 200.0, iters=5, spread=0.05),
        point_row("ring", 1 << 20, 100.0, iters=5, spread=0.05),
        point_row("rabenseifner", 1 << 20, 400.0, iters=1, cut_short=REASON),
        point_row("tree", 1 << 20, 400.0, iters=1, cut_short=REASON),
        point_row("ring", 1 << 21, 200.0, iters=5, spread=0.05),
        point_row("rabenseifner", 1 << 21, 202.0, iters=5, spread=0.05),
        point_row("tree", 1 << 21, 800.0, iters=5, spread=0.05),
    ]
    (kept,), left_out = within_reach(measured_points(in_round(rows, 0)))
    assert sorted(kept.pairs) == [
        (1 << 19, "rabenseifner"),
        (1 << 19, "ring"),
        (1 << 20, "rabenseifner"),
        (1 << 20, "ring"),
        (1 << 21, "rabenseifner"),
        (1 << 21, "ring"),
    ]
    assert left_out == 3


def test_round_speeds_come_from_points_timed_in_full() -> None:
    # Round 1 shares two points timed in full with round 0 (too few to estimate its speed: 1.0); its
    # tree, cut short at 3x its round-0 time, would make three and move round 1's speed to 1.2x.
    rows = in_round(
        [point_row(a, 1 << 20, t, iters=5) for a, t in (("ring", 100.0), ("rabenseifner", 101.0), ("tree", 400.0))], 0
    )
    rows += in_round(
        [
            point_row("ring", 1 << 20, 100.0, iters=5),
            point_row("rabenseifner", 1 << 20, 121.2, iters=5),
            point_row("tree", 1 << 20, 1200.0, iters=1, cut_short=REASON),
        ],
        1,
    )
    assert round_speeds(rows) == {0: 1.0, 1: 1.0}
    counted = [dataclasses.replace(r, cut_short=None) for r in rows]
    assert round_speeds(counted)[1] == pytest.approx(1.2)


def test_a_fit_takes_a_row_timed_in_full_before_one_cut_short() -> None:
    full = point_row("tree", 1 << 20, 400.0, iters=5)
    cut = point_row("tree", 1 << 20, 380.0, iters=1, cut_short=REASON)
    (point,) = summarize([cut, full]).points()
    assert point.time_us == full.time_us and point.set_aside == ""
    # Where no row of the size was timed in full, the one cut short is the point's time, and data.
    (alone,) = summarize([cut]).points()
    assert alone.time_us == 380.0 and alone.set_aside == ""


def test_the_closing_note_counts_the_points_cut_short() -> None:
    assert cut_short_note(_rows(0, tree_cut=False)) == []
    rows = _rows(0, tree_cut=True) + _rows(1, tree_cut=True)
    (note,) = cut_short_note(rows)
    assert note.startswith("2 points cut short after one timed iteration (it and the data check's call over 2x ")
    assert "selection never chooses them" in note
    (one,) = cut_short_note(_rows(0, tree_cut=True))
    assert one.startswith("1 point cut short ")


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_the_reason_travels_in_every_results_format(tmp_path: Path, suffix: str) -> None:
    rows = _rows(0, tree_cut=True)
    path = tmp_path / f"r{suffix}"
    write_rows(path, rows)
    back = read_rows(path)
    assert [r.cut_short for r in back] == [None, None, REASON]
    assert [r.iters for r in back] == [5, 5, 1]


def test_a_point_timed_in_full_in_one_round_and_cut_short_in_another_is_its_full_measurement() -> None:
    # Round 1 measured rabenseifner first and ring's one iteration there stalled past 2x: ring, the
    # fastest in round 0 timed in full, was then never chosen at all (the point counted as cut short).
    rows = in_round(
        [point_row("ring", 1 << 20, 100.0, iters=5, spread=0.05), point_row("rabenseifner", 1 << 20, 150.0, iters=5)],
        0,
    )
    rows += in_round(
        [
            point_row("rabenseifner", 1 << 20, 150.0, iters=5),
            point_row("ring", 1 << 20, 400.0, iters=1, cut_short=REASON),
        ],
        1,
    )
    here = points_at(measured_points(rows)["all-reduce"], 1 << 20)
    ring = next(point for variant, point in here.items() if variant.algo == "ring")
    assert not ring.cut_short and ring.time_us == 100.0 and ring.rounds == 1
    chosen, _ = decide_at(here, None, SelectionSettings())
    assert chosen.algo == "ring"
    # Cut short in every round it ran: still no candidate.
    only_cut = [r for r in rows if not (r.algo == "ring" and r.cut_short is None)]
    here = points_at(measured_points(only_cut)["all-reduce"], 1 << 20)
    assert decide_at(here, None, SelectionSettings())[0].algo == "rabenseifner"
