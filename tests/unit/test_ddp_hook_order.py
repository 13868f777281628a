"""On NCCL the DDP hook never issues a native all-reduce while its worker thread runs a schedule on the
same group; on gloo a native bucket is torch's own ``allreduce_hook`` on the caller's thread, always.

Contract faked here: NCCL's user guide, "Thread Safety": "it is not allowed to issue NCCL operations
to a single communicator in parallel with multiple threads", and it is not safe for independent
communicators of one device either; every rank must issue one communicator's operations in the same
order. ``Communicator`` records each issue with its thread and, as NCCL's, fails an issue made while
another thread is inside a schedule on it (gloo's takes it: ``strict=False``). The schedule
(collbench's executor over the group's point-to-point) and ``dist.all_reduce`` are faked so that the
test controls when the schedule ends; torch.distributed itself is not started (``is_initialized``,
``get_world_size`` and ``get_backend`` answer as for a group of 2, and the group is an object with
``size()``, which is what torch's ``allreduce_hook`` asks of it).
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

import pytest
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

import collbench.torch as ctorch
import collbench.torch.rules as torch_rules
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.runtime.launch import membership as membership_module
from collbench.runtime.launch.membership import GroupMemberships, HostReport, membership

P = {"segment_bytes": None, "layout": "rank-order"}


class Communicator:
    def __init__(self, strict: bool = True) -> None:
        self.strict = strict
        self.issued: list[tuple[str, str]] = []
        self.inside: str | None = None
        self.in_schedule = threading.Event()
        self.finish_schedule = threading.Event()

    def all_reduce(self, tensor: torch.Tensor, group: Any = None, async_op: bool = False) -> Any:
        me = threading.current_thread().name
        assert not self.strict or self.inside in (None, me), f"all_reduce from {me} while {self.inside} runs a schedule"
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


class Group:
    """What torch's allreduce_hook asks of the process group it is given: its size."""

    def size(self) -> int:
        return 2


class _Bucket:
    def __init__(self, buffer: torch.Tensor) -> None:
        self._buffer = buffer

    def buffer(self) -> torch.Tensor:
        return self._buffer


def _fake_group(monkeypatch: pytest.MonkeyPatch, comm: Communicator, backend: str) -> None:
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 0)
    monkeypatch.setattr(dist, "get_backend", lambda group=None: backend)
    monkeypatch.setattr(dist, "all_reduce", comm.all_reduce)
    monkeypatch.setattr(torch_rules.Runners, "runner", lambda self, *args, **kwargs: Runner(comm))
    # Both ranks on one host: what the all-gather of their host reports would give (runtime/ddp.group_nodes).
    one_host = GroupMemberships(gather=lambda group, world, device: membership([HostReport("h", "b")] * world))
    monkeypatch.setattr(membership_module, "GROUPS", one_host)


MIXED = (Rule("all-reduce", 0, 999, "native", P), Rule("all-reduce", 1000, None, "ring", P))


def test_a_native_bucket_waits_for_the_schedule_before_it_on_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fails before the hook queued native buckets behind the worker's: the main thread issued the
    # second bucket's all-reduce while the worker was inside the first bucket's schedule.
    comm = Communicator()
    _fake_group(monkeypatch, comm, "nccl")
    profile = Profile(fingerprint="test", host="test", backend="nccl", rule_sets=(RuleSet(2, 1, MIXED),))
    hook = ctorch.ddp_comm_hook(profile)
    group = Group()
    first = hook(group, _Bucket(torch.ones(1000)))  # type: ignore[arg-type]  # 4,000 B: collbench's ring
    assert comm.in_schedule.wait(10)
    second = hook(group, _Bucket(torch.ones(10)))  # type: ignore[arg-type]  # 40 B: native
    assert not second.done()  # queued behind the schedule, not issued beside it
    comm.finish_schedule.set()
    first.wait()
    second.wait()
    worker = {name for _, name in comm.issued}
    assert [what for what, _ in comm.issued] == ["schedule", "all-reduce"] and len(worker) == 1
    assert worker != {threading.current_thread().name}
    torch.testing.assert_close(second.value(), torch.full((10,), 0.5))  # divided by the world size once


def test_on_gloo_a_native_bucket_is_torchs_own_hook_while_a_schedule_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fails before gloo's native buckets left the worker's queue: the second bucket waited behind the
    # first one's schedule (not done until the schedule ends), issued by the worker's thread.
    comm = Communicator(strict=False)
    _fake_group(monkeypatch, comm, "gloo")
    profile = Profile(fingerprint="test", host="test", backend="gloo", rule_sets=(RuleSet(2, 1, MIXED),))
    hook = ctorch.ddp_comm_hook(profile)
    group = Group()
    first = hook(group, _Bucket(torch.ones(1000)))  # type: ignore[arg-type]  # collbench's ring
    assert comm.in_schedule.wait(10)
    second = hook(group, _Bucket(torch.ones(10)))  # type: ignore[arg-type]  # native
    assert second.wait() is not None and not first.done()  # done while the schedule still runs
    comm.finish_schedule.set()
    first.wait()
    me = threading.current_thread().name
    assert comm.issued[1] == ("all-reduce", me) and comm.issued[0][1] != me
    torch.testing.assert_close(second.value(), torch.full((10,), 0.5))  # divided by the world size once


def test_a_profile_native_at_every_size_gives_torchs_own_hook_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    comm = Communicator()
    _fake_group(monkeypatch, comm, "nccl")
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 0)
    native = (Rule("all-reduce", 0, None, "native", P),)
    profile = Profile(fingerprint="test", host="test", backend="nccl", rule_sets=(RuleSet(2, 1, native),))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("default")  # Python's own filter for UserWarning: once per place
        hooks = [ctorch.ddp_comm_hook(profile) for _ in range(3)]
    # Three hooks made at one place in the user's code: one line.
    assert [w.category for w in said] == [ctorch.DDPDefaultPath]
    assert "torch's own allreduce_hook" in str(said[0].message)
    assert all(hook is allreduce_hook for hook in hooks)
    hooks[0](Group(), _Bucket(torch.ones(10))).wait()  # type: ignore[arg-type]
    assert comm.issued == [("all-reduce", threading.current_thread().name)]  # no thread started for it


def test_only_rank_0_says_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_group(monkeypatch, Communicator(), "nccl")
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 1)
    native = (Rule("all-reduce", 0, None, "native", P),)
    profile = Profile(fingerprint="test", host="test", backend="nccl", rule_sets=(RuleSet(2, 1, native),))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ctorch.ddp_comm_hook(profile) is allreduce_hook
