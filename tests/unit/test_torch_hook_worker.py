"""The DDP hook's worker thread: buckets run in the order handed over, each future completes with its
bucket, and a failure reaches DDP through the future (DDP raises a hook future's error in backward),
failing every later bucket too, since the peers' messages no longer line up with this rank's."""

from __future__ import annotations

import gc
import queue
import threading

import pytest
import torch

from collbench.runtime.ddp import ScheduleWorker, stop_worker


class _FakeReduce:
    """Stands in for what all-reduces a bucket (the hook hands the worker its schedule's run with the
    reduction bound, or the backend's all-reduce): records the order it ran in, adds one, or fails."""

    def __init__(self, name: str, ran: list[str], *, fails: bool = False, gate: threading.Event | None = None) -> None:
        self.name, self.ran, self.fails, self.gate = name, ran, fails, gate

    def __call__(self, buffer: torch.Tensor) -> None:
        if self.gate is not None:
            assert self.gate.wait(timeout=30)
        self.ran.append(self.name)
        if self.fails:
            raise RuntimeError(f"peer gone in {self.name}")
        buffer.add_(1)


def test_buckets_run_in_order_and_futures_complete_after_submit_returns() -> None:
    worker = ScheduleWorker()
    ran: list[str] = []
    gate = threading.Event()
    buffers = [torch.zeros(3) for _ in range(3)]
    futures = [
        worker.submit(_FakeReduce(f"b{i}", ran, gate=gate if i == 0 else None), buf) for i, buf in enumerate(buffers)
    ]
    # The first schedule is held back: nothing has completed, yet every submit has returned.
    assert not any(f.done() for f in futures)
    gate.set()
    for buf, fut in zip(buffers, futures, strict=True):
        assert fut.wait() is buf
        assert torch.equal(buf, torch.ones(3))
    assert ran == ["b0", "b1", "b2"]


def test_a_failed_schedule_fails_its_bucket_and_every_later_one() -> None:
    worker = ScheduleWorker()
    ran: list[str] = []
    first = worker.submit(_FakeReduce("ok", ran), torch.zeros(2))
    bad = worker.submit(_FakeReduce("bad", ran, fails=True), torch.zeros(2))
    later = worker.submit(_FakeReduce("later", ran), torch.zeros(2))
    assert torch.equal(first.wait(), torch.ones(2))
    with pytest.raises(RuntimeError, match="peer gone in bad"):
        bad.wait()
    with pytest.raises(RuntimeError, match="an earlier bucket's all-reduce failed: peer gone in bad"):
        later.wait()
    assert ran == ["ok", "bad"]  # the later schedule never ran


def test_a_dropped_worker_ends_its_thread_and_is_joined() -> None:
    # The same function runs at the interpreter's exit (weakref.finalize): the thread must have left
    # torch's Future.set_result before finalisation, or CPython ends it inside a C++ destructor and
    # the process aborts (collbench.runtime.ddp.ScheduleWorker says how).
    worker = ScheduleWorker()
    thread = worker.thread
    worker.submit(_FakeReduce("last", []), torch.zeros(2)).wait()
    del worker
    gc.collect()
    assert not thread.is_alive()  # joined, not merely told to stop


def test_stopping_from_the_workers_own_thread_does_not_wait_for_itself() -> None:
    jobs: queue.SimpleQueue[object] = queue.SimpleQueue()
    stop_worker(jobs, threading.current_thread())  # type: ignore[arg-type]  # returns at once
    assert jobs.get_nowait() is None
