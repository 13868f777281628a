"""The DDP hook never issues a native all-reduce while its worker thread runs a schedule on the same group.

Contract faked here: NCCL's user guide, "Thread Safety": "it is not allowed to issue NCCL operations
to a single communicator in parallel with multiple threads", and it is not safe for independent
communicators of one device either; every rank must issue one communicator's operations in the same
order. ``Communicator`` records each issue with its thread and fails an issue made while another
thread is inside a schedule on it. The schedule (collbench's executor over the group's point-to-point)
and ``dist.all_reduce`` are faked so that the test controls when the schedule ends; torch.distributed
itself is not started (``is_initialized`` and ``get_world_size`` answer as for a group of 2).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch
import torch.distributed as dist

import collbench.torch as ctorch
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule

P = {"segment_bytes": None, "layout": "rank-order"}


class Communicator:
    def __init__(self) -> None:
        self.issued: list[tuple[str, str]] = []
        self.inside: str | None = None
        self.in_schedule = threading.Event()
        self.finish_schedule = threading.Event()

    def all_reduce(self, tensor: torch.Tensor, group: Any = None, async_op: bool = False) -> Any:
        me = threading.current_thread().name
        assert self.inside in (None, me), f"all_reduce issued from {me} while {self.inside} runs a schedule"
        self.issued.append(("all-reduce", me))
        done: torch.futures.Future[list[torch.Tensor]] = torch.futures.Future()
        done.set_result([tensor])

        class Work:
            def wait(self) -> bool:
                return True

            def get_future(self) -> torch.futures.Future[list[torch.Tensor]]:
                return done

        return Work()


class Runner:
    """A compiled schedule: point-to-point on the same communicator, until the test lets it finish."""

    def __init__(self, comm: Communicator) -> None:
        self.comm = comm

    def run(self, buffer: torch.Tensor, redop: str) -> None:
        me = threading.current_thread().name
        self.comm.inside = me
        self.comm.issued.append(("schedule", me))
        self.comm.in_schedule.set()
        self.comm.finish_schedule.wait(10)
        self.comm.inside = None


class _Bucket:
    def __init__(self, buffer: torch.Tensor) -> None:
        self._buffer = buffer

    def buffer(self) -> torch.Tensor:
        return self._buffer


def test_a_native_bucket_waits_for_the_schedule_before_it_on_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fails before the hook queued native buckets behind the worker's: the main thread issued the
    # second bucket's all-reduce while the worker was inside the first bucket's schedule.
    comm = Communicator()
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(dist, "all_reduce", comm.all_reduce)
    monkeypatch.setattr(ctorch._Runners, "runner", lambda self, *args, **kwargs: Runner(comm))
    rules = (Rule("all-reduce", 0, 999, "native", P), Rule("all-reduce", 1000, None, "ring", P))
    profile = Profile(fingerprint="test", host="test", backend="nccl", rule_sets=(RuleSet(2, 1, rules),))
    hook = ctorch.ddp_comm_hook(profile)
    first = hook(None, _Bucket(torch.ones(1000)))  # type: ignore[arg-type]  # 4,000 B: collbench's ring
    assert comm.in_schedule.wait(10)
    second = hook(None, _Bucket(torch.ones(10)))  # type: ignore[arg-type]  # 40 B: native
    assert not second.done()  # queued behind the schedule, not issued beside it
    comm.finish_schedule.set()
    first.wait()
    second.wait()
    worker = {name for _, name in comm.issued}
    assert [what for what, _ in comm.issued] == ["schedule", "all-reduce"] and len(worker) == 1
    assert worker != {threading.current_thread().name}
    torch.testing.assert_close(second.value(), torch.full((10,), 0.5))  # divided by the world size once


def test_native_buckets_before_any_schedule_stay_the_backends_own_async_call(monkeypatch: pytest.MonkeyPatch) -> None:
    comm = Communicator()
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(dist, "all_reduce", comm.all_reduce)
    profile = Profile(
        fingerprint="test",
        host="test",
        backend="nccl",
        rule_sets=(RuleSet(2, 1, (Rule("all-reduce", 0, None, "native", P),)),),
    )
    hook = ctorch.ddp_comm_hook(profile)
    hook(None, _Bucket(torch.ones(10))).wait()  # type: ignore[arg-type]
    assert comm.issued == [("all-reduce", threading.current_thread().name)]  # no thread started for it
