"""How the executor cuts transfers into segments: bounded in number whatever ``segment_bytes`` says,
and its scratch found without cutting anything (what the memory estimate counts)."""

from __future__ import annotations

import itertools

import pytest

from collbench.runtime.executor import schedule_runner
from collbench.runtime.executor.schedule_runner import MAX_TRANSFER_SEGMENTS, ScheduleRunner, scratch_elems
from collbench.schedules.ops import Op, op_count
from collbench.schedules.registry import algorithms_for, get_algorithm

MiB = 1 << 20


@pytest.mark.parametrize("algo", ["ring", "tree", "direct", "recursive-doubling"])
@pytest.mark.parametrize("segment_bytes", [4, 4096, 4 << 20])
def test_every_element_of_every_transfer_is_in_exactly_one_segment(algo: str, segment_bytes: int) -> None:
    spec = get_algorithm(algo)
    count = 3 * MAX_TRANSFER_SEGMENTS * 7 + 5
    schedule = spec.build(Op.ALL_REDUCE, 4, count, segments=spec.segments_for(count * 4, segment_bytes))
    for rank in range(4):
        runner = ScheduleRunner(schedule, rank=rank, segment_bytes=segment_bytes, elem_bytes=4)
        assert runner.scratch_elems == scratch_elems(schedule, rank)
        for step, plan in zip(schedule.steps[rank], runner._plans, strict=True):
            assert len(plan.rounds) <= MAX_TRANSFER_SEGMENTS
            for transfers, kind in ((step.sends, "sends"), (step.recvs, "recvs")):
                for t in (t for t in transfers if t.count > 0):
                    covered = sorted(
                        (seg.start, seg.stop)
                        for rnd in plan.rounds
                        for seg in getattr(rnd, kind)
                        if seg.peer == t.peer and t.start <= seg.start < t.stop
                    )
                    assert covered[0][0] == t.start and covered[-1][1] == t.stop
                    assert all(a[1] == b[0] for a, b in itertools.pairwise(covered))


def test_transfer_segments_grow_past_the_bound() -> None:
    assert schedule_runner.transfer_segment_elems(1000, 1) == 1
    assert schedule_runner.transfer_segment_elems(MAX_TRANSFER_SEGMENTS * 10, 1) == 10
    assert schedule_runner.transfer_segment_elems(MAX_TRANSFER_SEGMENTS * 10 + 1, 1) == 11
    assert schedule_runner.transfer_segment_elems(0, 4) == 4


def test_a_tree_at_16_mib_in_4_byte_segments_compiles_to_bounded_rounds() -> None:
    """4 M segments took more than 180 s and gigabytes to compile: now no step is cut into more than
    MAX_TRANSFER_SEGMENTS rounds, however small ``segment_bytes`` (it compiles in ~1 s)."""
    spec = get_algorithm("tree")
    count = (16 << 20) // 4
    schedule = spec.build(Op.ALL_REDUCE, 4, count, segments=spec.segments_for(16 << 20, 4))
    runner = ScheduleRunner(schedule, rank=0, segment_bytes=4, elem_bytes=4)
    assert runner._plans and all(len(plan.rounds) <= MAX_TRANSFER_SEGMENTS for plan in runner._plans)


NEW_PAIRS = [
    (spec.name, op)
    for op in (Op.ALL_TO_ALL, Op.SCATTER, Op.GATHER, Op.SENDRECV, Op.BARRIER)
    for spec in algorithms_for(op)
    if spec.builder is not None
]


@pytest.mark.parametrize(("algo", "op"), NEW_PAIRS, ids=[f"{a}-{o.value}" for a, o in NEW_PAIRS])
@pytest.mark.parametrize("n", [1, 3, 4])
def test_new_ops_send_nothing_to_themselves_and_cut_every_transfer_whole(algo: str, op: Op, n: int) -> None:
    count = op_count(op, 3 * 1024 + 5, n)
    schedule = get_algorithm(algo).build(op, n, count)
    for rank in range(n):
        runner = ScheduleRunner(schedule, rank=rank, segment_bytes=4 * 100, elem_bytes=4)
        assert runner.scratch_elems == scratch_elems(schedule, rank)
        for step, plan in zip(schedule.steps[rank], runner._plans, strict=True):
            sends = [seg for rnd in plan.rounds for seg in rnd.sends]
            recvs = [seg for rnd in plan.rounds for seg in rnd.recvs]
            # A local copy is read by its receive (source set), never posted as a send to oneself.
            assert all(seg.peer != rank for seg in sends)
            assert all((seg.source >= 0) == (seg.peer == rank) for seg in recvs)
            network = sum(t.count for t in step.sends if t.peer != rank)
            assert sum(seg.stop - seg.start for seg in sends) == network
            assert sum(seg.stop - seg.start for seg in recvs) == sum(t.count for t in step.recvs)
