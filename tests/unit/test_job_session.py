"""A launcher's job as one session: decisions the same on every rank (broadcast from rank 0), and a
rank that is elsewhere named by the step it last recorded (signed; a record not signed with the job's
token is ignored)."""

from __future__ import annotations

import datetime
from collections.abc import Callable

import pytest
import torch
import torch.distributed as dist

from collbench.errors import RankError
from collbench.runtime.launch import session as session_module
from collbench.runtime.launch.launchers import JobEnv
from collbench.runtime.launch.rankstore import SignedStore, new_token
from collbench.runtime.launch.session import JobSession, KeptGroup, agree


def _store() -> dist.TCPStore:
    return dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=5))


def _job(rank: int, port: int) -> JobEnv:
    return JobEnv(
        launcher="torchrun", rank=rank, world_size=3, local_rank=rank, local_world_size=3,
        master_addr="127.0.0.1", master_port=port, local_only=True,
    )  # fmt: skip


def test_a_decision_on_its_own_comes_back_as_the_other_ranks_would_receive_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    assert agree("which sizes", lambda: [("all-reduce", (1024, 2048))], timeout_s=5) == [["all-reduce", [1024, 2048]]]


def test_rank_0_names_the_rank_that_recorded_another_step() -> None:
    store = _store()
    token = new_token()
    session = JobSession(_job(0, store.port), store)
    session.signed = SignedStore(store, token)
    for rank, step in ((1, "step 4 (round 2)"), (2, "decision 1 (which sizes round 3 re-measures)")):
        peer = SignedStore(store, token)
        peer.put(f"step/{rank}", {"step": step, "host": f"h{rank}"})
    error = session.missing("step 4 (round 2)", RuntimeError("Socket Timeout"), 60)
    assert isinstance(error, RankError)
    assert str(error) == (
        "rank 2 on h2 failed while at decision 1 (which sizes round 3 re-measures): it did not join step 4 "
        "(round 2), where rank 0 waited 60 s: the ranks took different steps"
    )


def test_a_step_record_not_signed_by_the_job_is_not_believed() -> None:
    store = _store()
    session = JobSession(_job(0, store.port), store)
    session.signed = SignedStore(store, new_token())
    SignedStore(store, new_token()).put("step/1", {"step": "forged", "host": "evil"})
    error = session.missing("step 2 (round 1)", RuntimeError("Socket Timeout\nmore"), 30)
    assert error.rank == 0 and "evil" not in str(error) and "\n" not in str(error)
    assert "not every rank of the job joined within 30 s" in str(error) and "Socket Timeout" in str(error)


class _Wire:
    """Rank 0's broadcasts, replayed to each other rank in order: ``dist.broadcast``'s contract (the
    tensor holds what ``src`` sends, in place on every other rank; torch.distributed docs,
    "broadcast"), for ranks run one after another in one process."""

    def __init__(self) -> None:
        self.sent: list[torch.Tensor] = []
        self.read: dict[int, int] = {}

    def end(self, rank: int) -> Callable[[torch.Tensor, object], None]:
        def broadcast(tensor: torch.Tensor, group: object) -> None:
            if rank == 0:
                self.sent.append(tensor.clone())
                return
            index = self.read.get(rank, 0)
            if index >= len(self.sent):
                raise RuntimeError("[gloo] Timed out waiting 200ms for recv operation to complete")
            sent = self.sent[index]
            assert sent.shape == tensor.shape, "every rank posts the same broadcast"
            tensor.copy_(sent)
            self.read[rank] = index + 1

        return broadcast


def _sessions(n: int) -> tuple[list[JobSession], _Wire]:
    store = _store()
    token = new_token()
    wire = _Wire()
    sessions = [JobSession(_job(rank, store.port), store) for rank in range(n)]
    for rank, session in enumerate(sessions):
        session.signed = SignedStore(store, token)
        session.kept = KeptGroup("gloo", lambda prefix: pytest.fail("the group is made"), made=True)
        session.broadcast = wire.end(rank)
    return sessions, wire


def test_a_rank_waiting_for_a_decision_that_never_comes_says_so() -> None:
    (_, follower), _ = _sessions(2)
    with pytest.raises(RankError, match=r"rank 1 .* waiting for decision 0 \(which sizes\): rank 0 sent no decision"):
        follower.agree("which sizes", lambda: [], 0.2, ())


def test_a_decision_reaches_every_other_rank() -> None:
    sessions, wire = _sessions(3)
    decided = [["all-reduce", [4096]]]
    assert sessions[0].agree("which sizes", lambda: [("all-reduce", [4096])], 5, ()) == decided
    for follower in sessions[1:]:  # each of them, not only the first to look
        assert follower.agree("which sizes", lambda: pytest.fail("only rank 0 decides"), 5, ()) == decided
    # Two broadcasts (rank 0's step and length, then the value), whatever the number of ranks.
    assert len(wire.sent) == 2


def test_a_rank_at_another_decision_says_which_rank_0_is_at() -> None:
    (leader, follower), _ = _sessions(2)
    leader.agree("which points round 3 re-measures", lambda: [], 5, ())
    with pytest.raises(
        RankError, match=r"rank 1 .* at decision 0 \(checking\): rank 0 is at decision 0 \(which points"
    ):
        follower.agree("checking", lambda: None, 5, ())


def test_a_store_port_the_last_store_left_behind_is_bound_again() -> None:
    """The namespace cluster's srun step after its torchrun step: the same MASTER_PORT, the torchrun
    store's port left in TIME_WAIT ('Address already in use' before SO_REUSEADDR)."""
    import dataclasses
    import time

    from collbench.runtime.launch.session import _listen

    job = JobEnv(
        launcher="srun", rank=0, world_size=2, local_rank=0, local_world_size=2,
        master_addr="127.0.0.1", master_port=0, rendezvous="unused",
    )  # fmt: skip
    timeout = datetime.timedelta(seconds=5)
    for _ in range(3):  # whichever end closes first, each time
        first, port = _listen(job, "0.0.0.0", timeout)
        client = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timeout)
        client.set("step", "done")
        del first
        time.sleep(0.2)
        del client
        again, bound = _listen(dataclasses.replace(job, master_port=port), "0.0.0.0", timeout)
        assert bound == port
        del again


class _OtherRanks:
    """Ranks 1 and 2 at ``steps``, as torch.distributed's contracts give their part to rank 0: all_reduce
    MAX leaves the elementwise largest of every rank's tensor, all_gather_into_tensor every rank's in
    rank order (torch.distributed docs, "all_reduce", "all_gather_into_tensor")."""

    def __init__(self, steps: tuple[str, str]) -> None:
        self.rows = [session_module._fixed_width(f"{step}\0h{r}") for r, step in enumerate(steps, 1)]
        self.gathers = 0

    def all_reduce(self, tensor: torch.Tensor, op: object = None, group: object = None) -> None:
        assert op == dist.ReduceOp.MAX
        for row in self.rows:
            digest = session_module._step_digest(row)
            tensor.copy_(torch.maximum(tensor, torch.tensor([digest, -digest], dtype=torch.int64)))

    def all_gather_into_tensor(self, output: torch.Tensor, tensor: torch.Tensor, group: object = None) -> None:
        self.gathers += 1
        output.copy_(torch.cat([tensor, *self.rows]))


def _joining(monkeypatch: pytest.MonkeyPatch, steps: tuple[str, str]) -> tuple[JobSession, _OtherRanks]:
    others = _OtherRanks(steps)
    monkeypatch.setattr(dist, "all_reduce", others.all_reduce)
    monkeypatch.setattr(dist, "all_gather_into_tensor", others.all_gather_into_tensor)
    monkeypatch.setattr(dist, "all_gather_single", None, raising=False)
    store = _store()
    session = JobSession(_job(0, store.port), store)
    session.signed = SignedStore(store, new_token())
    session.membership = object()  # type: ignore[assignment]  # gathered at the job's first step
    return session, others


def test_ranks_at_one_step_are_checked_without_gathering_their_names(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every rank's step name gathered to every rank at every step: 3.8 MiB a rank at 16,384 ranks. Now one
    # all-reduce of two integers, and the names only where the steps differ.
    session, others = _joining(monkeypatch, ("step 4 (round 2)", "step 4 (round 2)"))
    session.joined(None, "step 4 (round 2)")
    assert others.gathers == 0


def test_a_rank_at_another_step_is_named_after_the_all_reduce_finds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    session, others = _joining(monkeypatch, ("step 4 (round 2)", "step 5 (round 2 at the second segment size)"))
    with pytest.raises(RankError) as caught:
        session.joined(None, "step 4 (round 2)")
    assert others.gathers == 1 and caught.value.rank == 2
    assert "starting step 5 (round 2 at the second segment size)" in str(caught.value)
    assert "rank 0 is starting step 4 (round 2): the ranks took different steps" in str(caught.value)
