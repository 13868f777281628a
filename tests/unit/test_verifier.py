"""The verifier: every builder passes over a matrix of world sizes and awkward counts, and broken
schedules (a missing step, a double reduction, a wrong peer, a deadlock...) are caught and named."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.errors import CollbenchError
from collbench.schedules.analysis import schedule_stats
from collbench.schedules.ir import Recv, Schedule, Send, Step
from collbench.schedules.ops import Op
from collbench.schedules.registry import algorithm_names, get_algorithm
from collbench.schedules.verifier import ScheduleError, simulate, step_waves, verify

# An algorithm that needs nodes is verified from layouts that have them (tests/unit/test_hierarchical.py).
CASES = [
    (name, op)
    for name in algorithm_names()
    if get_algorithm(name).builder is not None and not get_algorithm(name).needs_nodes
    for op in sorted(get_algorithm(name).ops, key=list(Op).index)
]


def _counts(n: int) -> list[int]:
    return sorted({0, 1, n - 1, n, n + 1, 2 * n + 3, 502, 1000})


@pytest.mark.parametrize(("name", "op"), CASES, ids=[f"{a}-{o.value}" for a, o in CASES])
def test_every_algorithm_op_world_size_and_count(name: str, op: Op) -> None:
    spec = get_algorithm(name)
    for n in range(1, 18):
        roots = sorted({0, n // 2, n - 1}) if op.spec.rooted or name == "direct" else [0]
        for count in _counts(n):
            for root in roots:
                for segments in (1, 3) if spec.segmented else (1,):
                    schedule = spec.build(op, n, count, root=root, segments=segments)
                    # A barrier moves no data: its schedule's count is 0 whatever it was asked (ops.py).
                    assert schedule.world_size == n and schedule.count == (count if op.spec.payload else 0)
                    verify(schedule)


def test_every_op_has_an_algorithm_that_builds_it() -> None:
    assert {op for _, op in CASES} == set(Op)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(CASES),
    st.integers(min_value=1, max_value=17),
    st.integers(min_value=0, max_value=200).map(lambda c: 2 * c + 1) | st.integers(min_value=0, max_value=400),
    st.data(),
)
def test_any_pair_verifies_at_any_world_size_count_and_root(
    case: tuple[str, Op], n: int, count: int, data: st.DataObject
) -> None:
    name, op = case
    root = data.draw(st.integers(min_value=0, max_value=n - 1))
    spec = get_algorithm(name)
    segments = data.draw(st.integers(min_value=1, max_value=4)) if spec.segmented else 1
    verify(spec.build(op, n, count, root=root, segments=segments))


def test_schedule_error_is_a_collbench_error() -> None:
    assert issubclass(ScheduleError, CollbenchError)


def _ring(n: int = 4, count: int = 10) -> Schedule:
    return get_algorithm("ring").build(Op.ALL_REDUCE, n, count)


def _with_steps(schedule: Schedule, rank: int, steps: list[Step]) -> Schedule:
    all_steps = list(schedule.steps)
    all_steps[rank] = tuple(steps)
    return replace(schedule, steps=tuple(all_steps))


def test_missing_step_is_caught() -> None:
    schedule = _ring()
    steps = list(schedule.steps[1])
    del steps[2]
    with pytest.raises(ScheduleError, match=r"rank \d step \d"):
        verify(_with_steps(schedule, 1, steps))


def test_missing_last_steps_leave_partial_sums() -> None:
    schedule = _ring()
    broken = replace(schedule, steps=tuple(steps[:-1] for steps in schedule.steps))
    with pytest.raises(ScheduleError, match=r"after its last step, rank 0 element \d+ holds"):
        verify(broken)


def test_double_reduce_is_caught() -> None:
    schedule = _ring()
    steps = list(schedule.steps[2])
    # Step 4 is in the all-gather: its copy turned into a reduction adds finished sums twice.
    steps[4] = replace(steps[4], recvs=tuple(replace(r, reduce=True) for r in steps[4].recvs))
    with pytest.raises(ScheduleError, match=r"rank 2 step 4 .*count twice"):
        verify(_with_steps(schedule, 2, steps))


def test_wrong_peer_is_caught() -> None:
    schedule = _ring()
    steps = list(schedule.steps[0])
    send = steps[0].sends[0]
    steps[0] = replace(steps[0], sends=(replace(send, peer=2),))
    with pytest.raises(ScheduleError, match=r"rank 0 step \d sends \d elements \[\d, \d\) to rank 1, but"):
        verify(_with_steps(schedule, 0, steps))


def test_size_mismatch_is_caught() -> None:
    schedule = Schedule(
        Op.BROADCAST,
        "hand",
        2,
        4,
        steps=((Step(sends=(Send(1, 0, 4),)),), (Step(recvs=(Recv(0, 0, 3, False),)),)),
    )
    with pytest.raises(ScheduleError, match=r"sends 4 element.* expects 3"):
        verify(schedule)


def test_deadlock_names_stuck_ranks() -> None:
    # Both ranks send first and receive in a later step: under rendezvous neither send completes.
    steps = tuple((Step(sends=(Send(1 - r, 0, 4),)), Step(recvs=(Recv(1 - r, 0, 4, True),))) for r in range(2))
    schedule = Schedule(Op.ALL_REDUCE, "hand", 2, 4, steps=steps)
    with pytest.raises(
        ScheduleError, match=r"deadlock: rank 0 at step 0 waits for rank 1; rank 1 at step 0 waits for rank 0$"
    ):
        verify(schedule)
    with pytest.raises(ScheduleError, match="deadlock"):
        step_waves(schedule)


def test_exchange_in_one_step_is_fine() -> None:
    steps = tuple((Step(sends=(Send(1 - r, 0, 4),), recvs=(Recv(1 - r, 0, 4, True),)),) for r in range(2))
    verify(Schedule(Op.ALL_REDUCE, "hand", 2, 4, steps=steps))


def test_sends_read_the_state_at_step_start() -> None:
    # Rank 1 receives from 0 and forwards to 2 in the same step: it forwards its OLD data, so rank 2
    # never sees rank 0's contribution.
    steps = (
        (Step(sends=(Send(1, 0, 2),)),),
        (Step(sends=(Send(2, 0, 2),), recvs=(Recv(0, 0, 2, True),)),),
        (Step(recvs=(Recv(1, 0, 2, True),)),),
    )
    schedule = Schedule(Op.REDUCE, "hand", 3, 2, steps=steps, root=2)
    with pytest.raises(ScheduleError, match=r"rank 2 element 0 holds the contributions of ranks \{1, 2\}"):
        verify(schedule)


def test_moving_data_to_another_offset_is_tracked() -> None:
    # Rank 0 sends element 0 to rank 1's element 1: reducing it there mixes different elements.
    steps = ((Step(sends=(Send(1, 0, 1),)),), (Step(recvs=(Recv(0, 1, 2, True),)),))
    with pytest.raises(ScheduleError, match="combines element 0 of the sender's data with element 1"):
        verify(Schedule(Op.REDUCE, "hand", 2, 2, steps=steps, root=1))
    # Copied to another offset, it is simply the wrong data there.
    copy = ((Step(sends=(Send(1, 0, 2),)),), (Step(recvs=(Recv(0, 1, 3, False),)),))
    with pytest.raises(ScheduleError, match="to element"):
        verify(Schedule(Op.BROADCAST, "hand", 2, 3, steps=copy))


def test_reducing_undefined_data_is_caught() -> None:
    # In an all-gather rank 1 holds only its own chunk; reducing into rank 1's chunk 0 uses garbage.
    steps = ((Step(sends=(Send(1, 0, 1),)),), (Step(recvs=(Recv(0, 0, 1, True),)),))
    with pytest.raises(ScheduleError, match="never reduces"):
        verify(Schedule(Op.ALL_GATHER, "hand", 2, 2, steps=steps))
    broadcast = ((Step(recvs=(Recv(1, 0, 1, True),)),), (Step(sends=(Send(0, 0, 1),)),))
    with pytest.raises(ScheduleError, match="never reduces"):
        verify(Schedule(Op.BROADCAST, "hand", 2, 1, steps=broadcast))
    reduce = ((Step(sends=(Send(1, 0, 1),)),), (Step(recvs=(Recv(0, 1, 2, False),)),))
    schedule = Schedule(Op.REDUCE, "hand", 2, 2, steps=reduce, root=1)
    with pytest.raises(
        ScheduleError,
        match=r"rank 1 element 0 holds the contribution of rank 1, "
        r"but reduce needs the contributions of ranks \{0, 1\}",
    ):
        verify(schedule)


def test_bad_peer_and_range() -> None:
    outside = ((Step(sends=(Send(2, 0, 1),)),), ())
    with pytest.raises(ScheduleError, match="peer 2, which is not a rank of 2"):
        verify(Schedule(Op.BROADCAST, "hand", 2, 1, steps=outside))
    # A send to oneself is a local copy (ir.py): without its receive in the same step it is unmatched.
    self_send = ((Step(sends=(Send(0, 0, 1),)),), ())
    with pytest.raises(ScheduleError, match=r"rank 0 posts only 0 receives from rank 0$"):
        verify(Schedule(Op.BROADCAST, "hand", 2, 1, steps=self_send))
    split_copy = ((Step(sends=(Send(0, 0, 1),)), Step(recvs=(Recv(0, 0, 1, False),))), ())
    with pytest.raises(ScheduleError, match="a local copy sends and receives in one step"):
        verify(Schedule(Op.BROADCAST, "hand", 2, 1, steps=split_copy))
    beyond = ((Step(sends=(Send(1, 0, 5),)),), (Step(recvs=(Recv(0, 0, 5, False),)),))
    with pytest.raises(ScheduleError, match=r"beyond the buffer of 4 elements$"):
        verify(Schedule(Op.BROADCAST, "hand", 2, 4, steps=beyond))


def test_extra_send_without_receive() -> None:
    schedule = _ring(3, 6)
    steps = list(schedule.steps[0])
    steps.append(Step(sends=(Send(1, 0, 1),)))
    with pytest.raises(ScheduleError, match=r"rank 0 step 4 sends .* but rank 1 posts only 4 receives from rank 0$"):
        verify(_with_steps(schedule, 0, steps))


def test_simulate_reports_waves_and_final_states() -> None:
    schedule = get_algorithm("ring").build(Op.BROADCAST, 4, 8, segments=2)
    waves: list[list[tuple[int, int]]] = []
    states = simulate(schedule, lambda w, done, _: waves.append(done))
    # A chain of 3 links with 2 segments takes 3 + 2 - 1 rounds; each middle rank 3 steps.
    assert len(waves) == 4
    assert schedule_stats(schedule, 4).steps == 4
    assert schedule.num_steps == 3
    assert all(p.contributors == 1 for s in states for p in s.pieces())
    waves_by_step = step_waves(schedule)
    assert max(max(w) for w in waves_by_step if w) == 3
