"""Start ranks (or join a torchrun job), run a worker on each, and turn failures into RankError.

Local ranks: the parent holds a TCPStore on 127.0.0.1 at a port the OS picks (never a fixed one),
spawns ``world_size`` processes that join it, and watches them. Ranks publish what they are doing
and their results through that store, so when one dies the parent can say which rank, where, doing
what. A rank blocked on a dead or hung peer gives up after the process group's timeout.

Under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set), this process is one rank of that
job: it joins through ``env://`` and runs the worker itself; nothing is spawned.

Workers run ``worker(ctx, payload)``: module-level functions (they are pickled into the children).

Ranks die with the launcher: while it watches them, SIGTERM and SIGHUP (and SIGINT, where Python's
own handler is in place) raise :class:`Interrupted` in it, which stops every rank before it
propagates; and each rank asks the kernel (Linux ``PR_SET_PDEATHSIG``) for SIGKILL when the
launcher dies in any other way, SIGKILL included.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import json
import os
import pickle
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from collbench.errors import BackendUnavailableError, ConfigError, RankError, UnknownNameError
from collbench.runtime.affinity import pin_this_process, rank_cpus
from collbench.runtime.environment import host_name

BACKENDS = ("gloo", "nccl", "auto")
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
_KEY = "collbench/"
_POLL_S = 0.1
_GRACE_S = 10.0
"""After a rank fails, how long the others get to notice and report before they are terminated."""

_PR_SET_PDEATHSIG = 1
"""prctl(2) option: the signal this process gets when its parent (the thread that made it) exits."""
_STOP_SIGNALS = ("SIGTERM", "SIGHUP", "SIGINT")

P = TypeVar("P")
R = TypeVar("R")
ProgressFn = Callable[[dict[str, Any]], None]


class RankContext:
    """What a worker knows about its rank, and how it tells the launcher what it is doing.

    ``group`` is the default process group (the measured backend); ``control`` a gloo group for
    small control messages (times, decisions), which is the default group itself under gloo.
    """

    def __init__(
        self,
        *,
        rank: int,
        world_size: int,
        local_rank: int,
        backend: str,
        device: torch.device,
        timeout_s: float,
        store: Any = None,
        progress: ProgressFn | None = None,
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.local_rank = local_rank
        self.backend = backend
        self.device = device
        self.timeout_s = timeout_s
        self.host = host_name()
        self.current = "starting"
        self.control: Any = None
        self._store = store
        self._progress = progress
        self._events = 0

    def doing(self, what: str) -> None:
        """Record what this rank is doing now (named in the error if it dies)."""
        self.current = what
        if self._store is not None:
            self._store.set(f"{_KEY}doing/{self.rank}", what)

    def report(self, event: dict[str, Any]) -> None:
        """Send a progress event (JSON-serialisable) to whoever launched the job; rank 0 only."""
        if self.rank != 0:
            return
        if self._store is not None:
            # Numbered keys, so that the launcher sees every event however fast they come.
            self._store.set(f"{_KEY}event/{self._events + 1}", json.dumps(event))
            self._events = int(self._store.add(f"{_KEY}events", 1))
        elif self._progress is not None:
            self._progress(event)


class Interrupted(KeyboardInterrupt):
    """The launcher got a signal to stop (SIGTERM, SIGHUP, SIGINT) and stopped its ranks.

    A KeyboardInterrupt, so that callers treat it as Ctrl-C: what was measured is on disk.
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")


class _SignalGuard:
    """Turns stop signals into :class:`Interrupted` while the ranks run (main thread only).

    ``hold`` makes later signals wait: the cleanup that stops the ranks must not be cut short by a
    second Ctrl-C or SIGTERM. A held signal is raised when the guard is left, unless an exception
    is already on its way out.
    """

    def __init__(self) -> None:
        self._holding = False
        self.held: int | None = None

    def handler(self, signum: int, frame: Any) -> None:
        if self._holding:
            self.held = self.held or signum
            return
        raise Interrupted(signum)

    def hold(self) -> None:
        self._holding = True


@contextlib.contextmanager
def _stop_signals_raise() -> Iterator[_SignalGuard]:
    guard = _SignalGuard()
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for name in _STOP_SIGNALS:
            signum = getattr(signal, name, None)
            if signum is None:
                continue
            current = signal.getsignal(signum)
            # Leave alone what someone chose: an ignored SIGHUP (nohup), a handler of the caller's.
            if current is not (signal.default_int_handler if name == "SIGINT" else signal.SIG_DFL):
                continue
            previous[signum] = signal.signal(signum, guard.handler)
    try:
        yield guard
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if guard.held is not None:
        raise Interrupted(guard.held)


def _die_with_parent(parent_pid: int) -> None:
    """Have the kernel kill this rank when the launcher exits, however it exits (Linux only)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:
        # The launcher died before prctl took effect: nobody waits for this rank any more.
        os._exit(1)


def under_torchrun() -> bool:
    """Whether this process is one rank of a job started by torchrun (or a launcher like it)."""
    return all(var in os.environ for var in TORCHRUN_VARS)


def resolve_backend(backend: str, local_ranks: int) -> str:
    """``gloo`` or ``nccl`` for a requested backend; checks that it can run here.

    ``auto`` is nccl when CUDA sees at least ``local_ranks`` GPUs, else gloo.
    Raises UnknownNameError for an unknown name and BackendUnavailableError for nccl without GPUs.
    """
    name = backend.strip().lower()
    if name not in BACKENDS:
        raise UnknownNameError("backend", backend, list(BACKENDS))
    has_gpus = torch.cuda.is_available() and torch.cuda.device_count() >= local_ranks
    if name == "auto":
        return "nccl" if has_gpus else "gloo"
    if name == "nccl":
        if not torch.cuda.is_available():
            raise BackendUnavailableError("--backend nccl needs CUDA GPUs and none is visible here; use --backend gloo")
        # Imported here only: the NCCL module talks to the GPU runtime.
        from collbench.runtime.nccl import check_nccl_usable

        check_nccl_usable(local_ranks)
    return name


def _device_for(backend: str, local_rank: int) -> torch.device:
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def _init_rank(backend: str, rank: int, world_size: int, timeout_s: float, store: Any, device: torch.device) -> Any:
    timeout = datetime.timedelta(seconds=timeout_s)
    kwargs: dict[str, Any] = {"backend": backend, "rank": rank, "world_size": world_size, "timeout": timeout}
    if store is not None:
        kwargs["store"] = dist.PrefixStore("pg/", store)
    else:
        kwargs["init_method"] = "env://"
    if backend == "nccl":
        kwargs["device_id"] = device
    dist.init_process_group(**kwargs)
    if backend == "gloo":
        return dist.group.WORLD
    return dist.new_group(backend="gloo", timeout=timeout)


def _is_comm_error(exc: BaseException) -> bool:
    """Whether an error is this rank noticing a peer's failure, rather than a failure of its own."""
    backend_error = getattr(dist, "DistBackendError", None)
    if backend_error is not None and isinstance(exc, backend_error):
        return True
    text = str(exc).lower()
    return any(s in text for s in ("connection closed", "connection reset", "timed out", "timeout", "broken pipe"))


GIL_SWITCH_INTERVAL_S = 1e-4


def _shorten_gil_handoff() -> None:
    """Hand the GIL to a waiting thread within 0.1 ms instead of Python's default 5 ms.

    A point-to-point operation completes on a backend thread that takes the GIL before the waiting
    rank can return; while the rank's main thread holds it, that thread waits out the switch
    interval. Measured here with gloo on 2 ranks: a batched isend/irecv exchange of 64 KiB took more
    than 2 ms in 36% of iterations (p90 4.0 ms, p50 77 us) at the default interval, and in 2% (p90
    72 us) at 0.2 ms. Without this, collbench's own algorithms would be timed against the
    interpreter rather than the network.
    """
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)


def _child_main(
    rank: int,
    world_size: int,
    port: int,
    backend: str,
    timeout_s: float,
    worker: Callable[[RankContext, Any], Any],
    payload: Any,
    parent_pid: int,
    cpu: int | None = None,
) -> None:
    _die_with_parent(parent_pid)
    # A core of its own and one intra-op thread (runtime/affinity.py), before torch starts threads.
    pinned = pin_this_process(cpu)
    if not pinned and "OMP_NUM_THREADS" not in os.environ:
        # As torchrun does: ranks share the cores, and idle OpenMP workers spin-wait on them, which
        # delays every other rank's wake-up by a scheduler time slice.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    _shorten_gil_handoff()
    timeout = datetime.timedelta(seconds=timeout_s)
    store: Any = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timeout)
    device = _device_for(backend, rank)
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
        ctx.control = _init_rank(backend, rank, world_size, timeout_s, store, device)
        result = worker(ctx, payload)
        store.set(f"{_KEY}result/{rank}", pickle.dumps(("ok", result)))
    except BaseException as exc:
        record = ("error", f"{type(exc).__name__}: {exc}", ctx.current, _is_comm_error(exc), traceback.format_exc())
        try:
            store.set(f"{_KEY}result/{rank}", pickle.dumps(record))
        finally:
            # A process group whose peer died can hang in its destructor: leave at once.
            os._exit(1)
    dist.destroy_process_group()


def launch(
    world_size: int | None,
    worker: Callable[[RankContext, P], R],
    payload: P,
    *,
    backend: str,
    timeout_s: float = 60.0,
    progress: ProgressFn | None = None,
) -> list[R]:
    """Run ``worker(ctx, payload)`` on every rank and return the results of the ranks run from here.

    Locally (not under torchrun) it spawns ``world_size`` ranks and returns all their results, by
    rank. Under torchrun this process is one rank and the list holds its own result only; pass
    ``world_size`` None (or torchrun's) there. ``backend`` is gloo, nccl or auto. ``progress``
    receives the events rank 0 reports. ``timeout_s`` bounds every collective and the wait for a
    peer that died or hung.

    Raises ConfigError for a world size below 1 (or one that contradicts torchrun's),
    BackendUnavailableError/UnknownNameError for the backend, and RankError when a rank fails.
    """
    if under_torchrun():
        return [_join_torchrun(world_size, worker, payload, backend=backend, timeout_s=timeout_s, progress=progress)]
    if world_size is None or world_size < 1:
        raise ConfigError(f"--ranks must be at least 1, got {world_size}")
    resolved = resolve_backend(backend, world_size)
    return _launch_local(world_size, worker, payload, resolved, timeout_s, progress)


def _join_torchrun(
    world_size: int | None,
    worker: Callable[[RankContext, P], R],
    payload: P,
    *,
    backend: str,
    timeout_s: float,
    progress: ProgressFn | None,
) -> R:
    rank = int(os.environ["RANK"])
    size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    _shorten_gil_handoff()
    if world_size is not None and world_size != size:
        raise ConfigError(f"--ranks {world_size} contradicts torchrun's WORLD_SIZE={size}; leave --ranks out")
    local_size = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    resolved = resolve_backend(backend, local_size)
    device = _device_for(resolved, local_rank)
    ctx = RankContext(
        rank=rank,
        world_size=size,
        local_rank=local_rank,
        backend=resolved,
        device=device,
        timeout_s=timeout_s,
        progress=progress,
    )
    try:
        ctx.doing("joining the process group")
        ctx.control = _init_rank(resolved, rank, size, timeout_s, None, device)
        result = worker(ctx, payload)
    except Exception as exc:
        raise RankError(rank, ctx.host, ctx.current, f"{type(exc).__name__}: {exc}") from exc
    dist.destroy_process_group()
    return result


def _launch_local(
    world_size: int,
    worker: Callable[[RankContext, P], R],
    payload: P,
    backend: str,
    timeout_s: float,
    progress: ProgressFn | None,
) -> list[R]:
    timeout = datetime.timedelta(seconds=timeout_s)
    # Bind the store's socket ourselves: given only a port, TCPStore listens on every interface.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = listener.getsockname()[1]
    store = dist.TCPStore(
        "127.0.0.1",
        port,
        is_master=True,
        wait_for_workers=False,
        timeout=timeout,
        master_listen_fd=listener.detach(),
    )
    cpus = rank_cpus(world_size, backend, progress)
    context = mp.get_context("spawn")
    procs = [
        context.Process(
            target=_child_main,
            args=(rank, world_size, store.port, backend, timeout_s, worker, payload, os.getpid(), cpus[rank]),
            daemon=True,
            name=f"collbench-rank-{rank}",
        )
        for rank in range(world_size)
    ]
    with _stop_signals_raise() as guard:
        try:
            for proc in procs:
                proc.start()
            _watch(procs, store, progress, timeout_s)
            return _collect(procs, store)
        finally:
            guard.hold()
            _stop(procs)


def _stop(procs: list[Any]) -> None:
    """Terminate the ranks still running (SIGTERM, then SIGKILL after 5 s) and reap them all."""
    started = [proc for proc in procs if proc.pid is not None]
    for proc in started:
        if proc.is_alive():
            proc.terminate()
    for proc in started:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
            proc.join()


def _watch(procs: list[Any], store: Any, progress: ProgressFn | None, timeout_s: float) -> None:
    """Wait for every rank; after the first failure, give the others a grace period, then stop them."""
    failed_at: float | None = None
    finished_at: float | None = None
    seen = 0
    while True:
        seen = _forward_events(store, seen, progress)
        if not any(p.is_alive() for p in procs):
            _forward_events(store, seen, progress)
            return
        now = time.monotonic()
        if failed_at is None and any(p.exitcode not in (None, 0) for p in procs):
            failed_at = now
        if finished_at is None and any(p.exitcode == 0 for p in procs):
            finished_at = now
        if failed_at is not None and now - failed_at > min(_GRACE_S, timeout_s):
            return
        # Ranks that finish while another still runs: that one hangs outside any collective.
        if finished_at is not None and now - finished_at > timeout_s + _GRACE_S:
            return
        time.sleep(_POLL_S)


def _forward_events(store: Any, seen: int, progress: ProgressFn | None) -> int:
    """Hand rank 0's events numbered ``seen + 1``.. to ``progress``; the new count of events handled."""
    total = int(store.add(f"{_KEY}events", 0))
    for number in range(seen + 1, total + 1):
        raw = store.get(f"{_KEY}event/{number}")
        if progress is not None:
            progress(json.loads(raw))
    return total


def _stored(store: Any, key: str) -> bytes | None:
    return store.get(key) if store.check([key]) else None


def _collect(procs: list[Any], store: Any) -> list[Any]:
    """Each rank's result, or RankError for the rank that caused a failure."""
    results: list[Any] = []
    crashed: list[tuple[int, str]] = []
    own_errors: list[tuple[int, str, str]] = []
    comm_errors: list[tuple[int, str, str]] = []
    hung: list[int] = []
    for rank, proc in enumerate(procs):
        raw = _stored(store, f"{_KEY}result/{rank}")
        if raw is not None:
            record = pickle.loads(raw)
            if record[0] == "ok":
                results.append(record[1])
                continue
            _, problem, doing, comm, _tb = record
            (comm_errors if comm else own_errors).append((rank, doing, problem))
        elif proc.is_alive():
            hung.append(rank)
        else:
            crashed.append((rank, f"the process died (exit code {proc.exitcode})"))
        results.append(None)
    host = host_name()

    def doing_of(rank: int) -> str:
        raw = _stored(store, f"{_KEY}doing/{rank}")
        return raw.decode() if raw else "starting"

    if crashed:
        rank, problem = crashed[0]
        raise RankError(rank, host, doing_of(rank), problem)
    if own_errors:
        rank, doing, problem = own_errors[0]
        raise RankError(rank, host, doing, problem)
    if hung:
        rank = hung[0]
        raise RankError(rank, host, doing_of(rank), "it stopped answering (hung) and was terminated")
    if comm_errors:
        rank, doing, problem = comm_errors[0]
        raise RankError(rank, host, doing, problem)
    return results
