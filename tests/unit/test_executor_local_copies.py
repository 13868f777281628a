"""The executor's local copies (a transfer to oneself), out-of-place buffers and barrier tokens.

A local copy is never a torch.distributed message; it reads its source when the step starts and
writes its destination when the step ends (ir.py), through scratch only where the step touches the
destination otherwise. Schedules of one rank run without any process group (nothing is posted);
on more ranks ``dist.batch_isend_irecv`` is replaced by a recorder of what would be posted.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.distributed as dist
from hand_schedules import hand_schedule

from collbench.runtime.executor import schedule_runner
from collbench.runtime.executor.schedule_runner import ScheduleRunner, scratch_elems
from collbench.schedules.ir import Recv, Schedule, Send, Step
from collbench.schedules.ops import Op


def _one_rank(op: Op, steps: tuple[Step, ...], count: int) -> Schedule:
    return Schedule(op, "hand", 1, count, (steps,))


def test_one_rank_all_to_all_and_shift_are_copies_of_the_input() -> None:
    for op in (Op.ALL_TO_ALL, Op.SENDRECV):
        schedule = hand_schedule(op, 1, 6)
        runner = ScheduleRunner(schedule, rank=0, elem_bytes=4)
        buf = torch.cat([torch.arange(6, dtype=torch.float32), torch.full((6,), -1.0)])
        runner.run(buf, "sum")  # no process group: a local copy posts nothing
        assert buf[6:].tolist() == list(range(6))
        assert runner.scratch_elems == 0  # the output is not read in the step: copied straight there


def test_copies_read_when_the_step_starts_so_a_swap_in_one_step_swaps() -> None:
    # [0,3) -> [3,6) and [3,6) -> [0,3) in one step: each reads the buffer as the step found it.
    step = Step(sends=(Send(0, 0, 3), Send(0, 3, 6)), recvs=(Recv(0, 3, 6, False), Recv(0, 0, 3, False)))
    schedule = _one_rank(Op.ALL_REDUCE, (step,), 6)
    runner = ScheduleRunner(schedule, rank=0, elem_bytes=4)
    assert runner.scratch_elems == scratch_elems(schedule, 0) == 6
    buf = torch.arange(6, dtype=torch.float32)
    runner.run(buf, "sum")
    assert buf.tolist() == [3, 4, 5, 0, 1, 2]


def test_a_copy_whose_source_a_later_copy_overwrites_still_reads_the_old_value() -> None:
    # Step 1 copies [0,2) to [2,4) and [2,4) to [4,6): [4,6) must get what [2,4) held before step 1.
    step = Step(sends=(Send(0, 0, 2), Send(0, 2, 4)), recvs=(Recv(0, 2, 4, False), Recv(0, 4, 6, False)))
    runner = ScheduleRunner(_one_rank(Op.ALL_REDUCE, (step,), 6), rank=0, elem_bytes=4)
    buf = torch.arange(6, dtype=torch.float32)
    runner.run(buf, "sum")
    assert buf.tolist() == [0, 1, 0, 1, 2, 3]


def test_a_local_copy_may_reduce() -> None:
    step = Step(sends=(Send(0, 0, 3),), recvs=(Recv(0, 3, 6, True),))
    runner = ScheduleRunner(_one_rank(Op.ALL_REDUCE, (step,), 6), rank=0, elem_bytes=4)
    buf = torch.tensor([1.0, 2, 3, 10, 20, 30])
    runner.run(buf, "max")
    assert buf.tolist() == [1, 2, 3, 10, 20, 30]
    buf = torch.tensor([1.0, 2, 3, 10, 20, 30])
    runner.run(buf, "sum")
    assert buf.tolist() == [1, 2, 3, 11, 22, 33]


def test_unpaired_local_copies_are_refused() -> None:
    step = Step(sends=(Send(0, 0, 3),), recvs=())
    with pytest.raises(ValueError, match="local copies do not pair up"):
        ScheduleRunner(_one_rank(Op.ALL_REDUCE, (step,), 6), rank=0, elem_bytes=4)


def test_the_buffer_is_the_schedules_buffer_elems() -> None:
    runner = ScheduleRunner(hand_schedule(Op.ALL_TO_ALL, 1, 4), rank=0, elem_bytes=4)
    with pytest.raises(ValueError, match="8 elements"):
        runner.run(torch.zeros(4), "sum")


class _Recorder:
    """Stands in for ``dist.P2POp`` and ``dist.batch_isend_irecv``: what would be posted, and to whom."""

    def __init__(self) -> None:
        self.posted: list[tuple[str, int, int]] = []

    def p2p(self, fn: Any, tensor: torch.Tensor, peer: int | None = None, **kwargs: Any) -> tuple[str, int, int]:
        return (fn.__name__, peer if peer is not None else kwargs["group_peer"], tensor.numel())

    def batch(self, ops: list[tuple[str, int, int]]) -> list[Any]:
        self.posted.extend(ops)
        return []


@pytest.mark.parametrize("n", [2, 3, 5])
def test_no_message_goes_to_oneself_and_barrier_tokens_are_sent(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    rec = _Recorder()
    monkeypatch.setattr(dist, "P2POp", rec.p2p)
    monkeypatch.setattr(dist, "batch_isend_irecv", rec.batch)
    reduced: list[int] = []
    monkeypatch.setattr(schedule_runner, "reduce_many", lambda dst, sources, redop: reduced.append(len(sources)))
    count = 4 * n
    for rank in range(n):
        rec.posted.clear()
        runner = ScheduleRunner(hand_schedule(Op.ALL_TO_ALL, n, count), rank=rank, elem_bytes=4)
        buf = torch.cat([torch.arange(count, dtype=torch.float32), torch.full((count,), -1.0)])
        runner.run(buf, "sum")
        assert {peer for _, peer, _ in rec.posted} == set(range(n)) - {rank}
        assert len(rec.posted) == 2 * (n - 1)
        # The own block was copied locally: input block r to output block r.
        assert buf[count + 4 * rank : count + 4 * rank + 4].tolist() == list(range(4 * rank, 4 * rank + 4))
    for rank in range(n):
        rec.posted.clear()
        runner = ScheduleRunner(hand_schedule(Op.BARRIER, n, 0), rank=rank, elem_bytes=4)
        runner.run(torch.zeros(1), "sum")
        # Dissemination: one token sent and one received per round, ceil(log2 n) rounds.
        rounds = (n - 1).bit_length()
        assert sorted(rec.posted) == sorted(
            [("isend", (rank + (1 << k)) % n, 1) for k in range(rounds)]
            + [("irecv", (rank - (1 << k)) % n, 1) for k in range(rounds)]
        )
    # A barrier's tokens carry no data: "has heard from" needs no reduction of them.
    assert reduced == []


def test_a_subgroups_peers_are_handed_to_p2pop_by_their_global_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    # P2POp given group_peer finds the global rank by scanning the group's rank map (torch's
    # get_global_rank): 127 us an op at 16,384 ranks, 8.3 s of CPU per ring all-reduce. The runner reads
    # the group's global ranks once (get_process_group_ranks: "ordered by group rank", torch's docstring)
    # and hands P2POp the global rank, which torch looks up.
    made: list[tuple[str, Any, Any, Any]] = []

    def p2p(fn: Any, tensor: torch.Tensor, peer: Any = None, group: Any = None, group_peer: Any = None) -> Any:
        made.append((fn.__name__, peer, group, group_peer))
        return (fn.__name__, peer, tensor.numel())

    asked: list[object] = []
    group = object()
    monkeypatch.setattr(dist, "P2POp", p2p)
    monkeypatch.setattr(dist, "batch_isend_irecv", lambda ops: [])
    monkeypatch.setattr(dist, "get_process_group_ranks", lambda g: asked.append(g) or [10, 20, 30])
    monkeypatch.setattr(schedule_runner, "reduce_many", lambda dst, sources, redop: None)
    runner = ScheduleRunner(hand_schedule(Op.ALL_TO_ALL, 3, 12), rank=1, elem_bytes=4, group=group)
    for _ in range(2):
        runner.run(torch.zeros(24), "sum")
    assert {(peer, g, gp) for _, peer, g, gp in made} == {(10, group, None), (30, group, None)}
    assert asked == [group]  # once per runner, not per op
