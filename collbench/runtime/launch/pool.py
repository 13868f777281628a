"""Local ranks started once, and run any number of steps on one process group.

Run on its own (no launcher), ``launch`` spawns its ranks here: the parent holds a TCPStore on
127.0.0.1 at a port the OS picks, starts ``world_size`` processes that join it and form one process
group, and hands each of them the step to run (a worker and its payload) through a pipe of its own,
parent to child only. A rank sends its result back through the signed store and waits for the next
step; at the end it destroys its process group and exits.

A command of several steps (``tune``: a sweep per round, decided between them) runs them all inside
:func:`local_group`: the first step starts the ranks, every later one of the same shape reuses them
and their group, and the ranks are stopped once, on leaving. Before, every step spawned its ranks
again: a rendezvous, a full mesh of connections and torch's import per rank per round. The parent
decides between steps (it holds every row), so no decision needs to travel between the ranks: each
rank runs exactly the steps the parent hands it, all ranks the same ones.

A step that fails in any rank ends the ranks (a rank that raised exits, its peers' collectives
break): the error names the rank and what it was doing, as for a single step, and the next step, if
any, starts new ranks.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import functools
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from collbench.errors import RankError, UserError
from collbench.runtime.host.affinity import pin_this_process, rank_cpus
from collbench.runtime.host.environment import host_name
from collbench.runtime.host.rank_priority import realtime_rank
from collbench.runtime.launch.launchers import detect_job
from collbench.runtime.launch.rank_process import (
    ProgressFn,
    RankContext,
    device_for,
    die_with_parent,
    init_rank,
    is_comm_error,
    resolve_backend,
    shorten_gil_handoff,
    stop_signals_raise,
)
from collbench.runtime.launch.rankstore import SignedStore, StoreValueError, new_token
from collbench.runtime.launch.watch import collect_results, stop_ranks, watch_ranks

Worker = Callable[[RankContext, Any], Any]

CLOSE_S = 10.0
"""How long ranks told to finish get to destroy their group and exit before they are terminated."""


def _rank_main(
    rank: int,
    world_size: int,
    port: int,
    token: bytes,
    backend: str,
    timeout_s: float,
    steps: Connection,
    parent_pid: int,
    cpu: int | None = None,
) -> None:
    """One local rank: join the group once, then run each step the parent sends until it sends None."""
    # Blocked since the parent started this process (_start_ranks); ignored from here on, the pending
    # one discarded: the parent alone answers a Ctrl-C, and stops its ranks itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    die_with_parent(parent_pid)
    # A core of its own and one intra-op thread (runtime/host/affinity.py), before torch starts threads.
    pinned = pin_this_process(cpu)
    if not pinned and "OMP_NUM_THREADS" not in os.environ:
        # As torchrun does: ranks share the cores, and idle OpenMP workers spin-wait on them, which
        # delays every other rank's wake-up by a scheduler time slice.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    shorten_gil_handoff()
    # Before the process group starts its threads, which inherit it (runtime/host/rank_priority.py).
    realtime_rank(backend)
    timeout = datetime.timedelta(seconds=timeout_s)
    raw_store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timeout)
    store = SignedStore(raw_store, token)
    device = device_for(backend, rank)
    ctx = RankContext(
        rank=rank,
        world_size=world_size,
        local_rank=rank,
        backend=backend,
        device=device,
        timeout_s=timeout_s,
        store=store,
    )
    try:
        ctx.doing("joining the process group")
        control = init_rank(backend, rank, world_size, timeout_s, raw_store, device, store.prefix)
        while (step := _next_step(steps)) is not None:
            worker, payload = step
            ctx.control = control
            ctx.doing("starting")
            result = worker(ctx, payload)
            store.put(f"result/{rank}", {"status": "ok", "value": result})
    except BaseException as exc:
        record = {
            "status": "error",
            "problem": f"{type(exc).__name__}: {exc}",
            "doing": ctx.current,
            "comm": is_comm_error(exc),
            # A mistake in the input every rank finds alike (nothing to measure): the parent says it as one.
            "user": isinstance(exc, UserError),
        }
        try:
            store.put(f"result/{rank}", record)
        finally:
            # A process group whose peer died can hang in its destructor: leave at once.
            os._exit(1)
    dist.destroy_process_group()


def _start_ranks(procs: Sequence[BaseProcess]) -> None:
    """Start the ranks with SIGINT blocked, as CPython starts its resource tracker
    (``multiprocessing/resource_tracker.py``, ``ensure_running``): the block is inherited through fork
    and exec, and each rank ignores SIGINT before it unblocks it (:func:`_rank_main`).

    A Ctrl-C at a terminal signals the whole foreground process group, the ranks too: one that came
    while a rank imported torch (seconds on a loaded machine, before any of collbench's code ran in it)
    printed multiprocessing's traceback above the command's one line. A SIGINT to the parent meanwhile
    waits until the ranks are started, then raises as any other (``stop_signals_raise``)."""
    if not hasattr(signal, "pthread_sigmask"):
        for proc in procs:
            proc.start()
        return
    # Started first: starting it (in the first rank's start) unblocks SIGINT again when it is done.
    resource_tracker.ensure_running()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        for proc in procs:
            proc.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _next_step(steps: Connection) -> tuple[Worker, Any] | None:
    """The parent's next step; None when it says the ranks are done, or is gone."""
    try:
        step: tuple[Worker, Any] | None = steps.recv()
    except EOFError:
        return None
    return step


class LocalRanks:
    """``world_size`` local ranks on ``backend``, started once, running one step at a time."""

    def __init__(self, world_size: int, backend: str, timeout_s: float, progress: ProgressFn | None) -> None:
        self.world_size = world_size
        self.backend = backend
        self.timeout_s = timeout_s
        self.broken = False
        """True after a step failed or was interrupted: the ranks are stopped, none runs another step."""
        timeout = datetime.timedelta(seconds=timeout_s)
        # Bind the store's socket ourselves: given only a port, TCPStore listens on every interface.
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        port = listener.getsockname()[1]
        self._raw_store = dist.TCPStore(
            "127.0.0.1",
            port,
            is_master=True,
            wait_for_workers=False,
            timeout=timeout,
            master_listen_fd=listener.detach(),
            # libuv's server refuses any message past 8 MiB: that bounds each read of the store (rankstore).
            use_libuv=True,
        )
        cpus = rank_cpus(world_size, backend, progress)
        token = new_token()
        self.store = SignedStore(self._raw_store, token)
        context = mp.get_context("spawn")
        self._steps: list[Connection] = []
        self._readers: list[Connection] = []
        self.procs: list[BaseProcess] = []
        for rank in range(world_size):
            reader, writer = context.Pipe(duplex=False)
            self._steps.append(writer)
            self._readers.append(reader)
            self.procs.append(
                context.Process(
                    target=_rank_main,
                    # The token goes through the spawn pipe: not the store, the environment or argv.
                    args=(rank, world_size, port, token, backend, timeout_s, reader, os.getpid(), cpus[rank]),
                    daemon=True,
                    name=f"collbench-rank-{rank}",
                )
            )
        self._started = False

    def run(
        self, worker: Worker, payload: Any, progress: ProgressFn | None, result_types: tuple[type, ...]
    ) -> list[Any]:
        """``worker(ctx, payload)`` on every rank; their results by rank. Raises RankError (the ranks
        are then stopped) when a rank fails, and Interrupted on a stop signal."""
        assert not self.broken, "a step after a failed one"
        finished = False
        with stop_signals_raise() as guard:
            try:
                if not self._started:
                    self._started = True
                    _start_ranks(self.procs)
                    # The children hold their own ends now; the parent's copies would keep their
                    # pipes open after a child died.
                    for reader in self._readers:
                        reader.close()
                # From a thread: a payload larger than a pipe's buffer blocks until its rank reads it,
                # which a rank that died never does; the ranks are watched meanwhile.
                threading.Thread(target=self._hand_out, args=((worker, payload),), daemon=True).start()
                came = functools.partial(self._result_came, result_types=result_types)
                stopped = watch_ranks(self.procs, self.store, progress, self.timeout_s, came)
                results = collect_results(self.procs, self.store, stopped, result_types)
                finished = True
                return results
            finally:
                guard.hold()
                for rank in range(self.world_size):
                    # Each step's results are its own: the next step's are read afresh.
                    self.store.forget(f"result/{rank}")
                if not finished:
                    self.broken = True
                    stop_ranks(self.procs)

    def _hand_out(self, step: tuple[Worker, Any]) -> None:
        for send in self._steps:
            # A rank that died has closed its end: the watch names it.
            with contextlib.suppress(OSError):
                send.send(step)

    def _result_came(self, rank: int, result_types: tuple[type, ...]) -> bool:
        try:
            return self.store.latest(f"result/{rank}", result_types) is not None
        except StoreValueError as exc:
            # A local writer of the store, not the rank: nothing of it was executed or kept.
            raise RankError(
                rank, host_name(), "sending its result", f"the value in the store was rejected: {exc}"
            ) from None

    def close(self) -> None:
        """Tell every rank it is done, give them ``CLOSE_S`` to leave their group, stop any left."""
        if self._started and not self.broken:
            for send in self._steps:
                with contextlib.suppress(OSError):
                    send.send(None)
            deadline = time.monotonic() + CLOSE_S
            for proc in self.procs:
                proc.join(timeout=max(0.0, deadline - time.monotonic()))
        for send in self._steps:
            send.close()
        if self._started:
            stop_ranks(self.procs)


@dataclass(slots=True)
class _Slot:
    """The ranks a :func:`local_group` keeps: started by the first step of its shape."""

    world_size: int
    backend: str
    timeout_s: float
    ranks: LocalRanks | None = None


_kept: contextvars.ContextVar[_Slot | None] = contextvars.ContextVar("collbench_local_ranks", default=None)


@contextlib.contextmanager
def local_group(world_size: int | None, backend: str, timeout_s: float) -> Iterator[None]:
    """Run on its own, every ``launch`` of ``world_size`` ranks on ``backend`` inside runs on one set
    of ranks and one process group, started by the first of them and stopped on leaving (at once,
    however it is left). A step of another shape (world size, backend, timeout) starts ranks of its
    own as before. Under a launcher, or with no world size, nothing: the launcher's job is the group.

    ``backend`` as the steps are given it (``auto`` allowed, resolved as they resolve it).
    """
    if detect_job() is not None or world_size is None or world_size < 1:
        yield
        return
    try:
        resolved = resolve_backend(backend, world_size)
    except UserError:
        # The command's own check refuses it, in its own words, before any step.
        yield
        return
    slot = _Slot(world_size, resolved, timeout_s)
    token = _kept.set(slot)
    try:
        yield
    finally:
        _kept.reset(token)
        if slot.ranks is not None:
            slot.ranks.close()


def run_local(
    world_size: int,
    worker: Worker,
    payload: Any,
    backend: str,
    timeout_s: float,
    progress: ProgressFn | None,
    result_types: tuple[type, ...],
) -> list[Any]:
    """One step on local ranks: those :func:`local_group` keeps for this shape, else ranks of its own."""
    slot = _kept.get()
    if slot is None or (slot.world_size, slot.backend, slot.timeout_s) != (world_size, backend, timeout_s):
        ranks = LocalRanks(world_size, backend, timeout_s, progress)
        try:
            return ranks.run(worker, payload, progress, result_types)
        finally:
            ranks.close()
    if slot.ranks is not None and slot.ranks.broken:
        slot.ranks.close()
        slot.ranks = None
    if slot.ranks is None:
        slot.ranks = LocalRanks(world_size, backend, timeout_s, progress)
    return slot.ranks.run(worker, payload, progress, result_types)
