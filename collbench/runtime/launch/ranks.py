"""Start ranks (or join a torchrun job), run a worker on each, and turn failures into RankError.

Local ranks: the parent holds a TCPStore on 127.0.0.1 at a port the OS picks (never a fixed one),
spawns ``world_size`` processes that join it, and watches them. Ranks publish what they are doing
and their results through that store, so when one dies the parent can say which rank, where, doing
what. A rank blocked on a dead or hung peer gives up after the process group's timeout.

Under a launcher (torchrun, mpirun, srun: see :mod:`collbench.runtime.launch.launchers`), this process is
one rank of that job: it joins it through the job's one store (rank 0's at the launcher's address,
or torchrun's agent's: :mod:`collbench.runtime.launch.session`) and runs the worker itself; nothing
is spawned.

What ranks send the launcher through the store is signed JSON (:mod:`collbench.runtime.launch.rankstore`):
the store is reachable by any local user, so nothing read from it is unpickled or trusted unsigned.

Workers run ``worker(ctx, payload)``: module-level functions (they and the payload are pickled into
the children through the spawn pipe, parent to child only). A worker's result travels back as JSON:
plain data, or dataclasses of the types the caller names in ``result_types``.

Ranks die with the launcher: while it watches them, SIGTERM and SIGHUP (and SIGINT, where Python's
own handler is in place) raise :class:`Interrupted` in it, which stops every rank before it
propagates; and each rank asks the kernel (Linux ``PR_SET_PDEATHSIG``) for SIGKILL when the
launcher dies in any other way, SIGKILL included.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any, TypeVar

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from collbench.backends import backend_named, get_backend, resolve
from collbench.backends.gloo import GLOO
from collbench.errors import ConfigError, RankError, UserError
from collbench.runtime.here import HERE
from collbench.runtime.host.affinity import pin_this_process, rank_cpus
from collbench.runtime.host.environment import host_name
from collbench.runtime.host.rank_priority import realtime_rank
from collbench.runtime.launch.launchers import MAX_WORLD_SIZE, JobEnv, detect_job
from collbench.runtime.launch.rankstore import SignedStore, new_token
from collbench.runtime.launch.session import job_session
from collbench.runtime.launch.watch import collect_results, stop_ranks, watch_ranks

CONTROL_BACKEND = GLOO.name
"""Small control messages (plans, wrong counts, times) travel on a gloo group whatever the backend: a
process group on the CPU, never inside timed iterations."""

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
        store: SignedStore | None = None,
        progress: ProgressFn | None = None,
        node: str | None = None,
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.local_rank = local_rank
        self.backend = backend
        self.device = device
        self.timeout_s = timeout_s
        self.host = host_name()
        self.node = node if node is not None else self.host
        """What this rank's node is known by: ranks on one node share it (under a launcher, its name in
        the job's membership, ``launch/membership.py``)."""
        self.current = "starting"
        self.control: dist.ProcessGroup | None = None
        self._store = store
        self._progress = progress

    def doing(self, what: str) -> None:
        """Record what this rank is doing now (named in the error if it dies)."""
        self.current = what
        if self._store is not None:
            self._store.put(f"doing/{self.rank}", what)

    def report(self, event: dict[str, Any]) -> None:
        """Send a progress event (JSON-serialisable) to whoever launched the job; rank 0 only."""
        if self.rank != 0:
            return
        if self._store is not None:
            # A queue: the launcher sees every event, in order, however fast they come.
            self._store.put("events", event)
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

    def handler(self, signum: int, frame: FrameType | None) -> None:
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


def joined_job() -> JobEnv | None:
    """The launcher's job (torchrun, mpirun, srun) this process is a rank of, or None.

    Raises ConfigError for a launcher's variables that do not make sense (see ``detect_job``).
    """
    return detect_job()


def under_launcher() -> bool:
    """Whether this process is one rank of a job started by torchrun, mpirun or srun."""
    return joined_job() is not None


def job_rank() -> int:
    """This process's rank in its launcher's job; 0 when it runs on its own (it writes the files)."""
    job = joined_job()
    return 0 if job is None else job.rank


def resolve_backend(backend: str, local_ranks: int) -> str:
    """The torch.distributed backend collbench's ranks run ``backend`` on (``auto`` resolved), checked
    runnable here (``collbench.backends.resolve``).

    ``auto`` is nccl when CUDA sees at least ``local_ranks`` GPUs, else gloo. Raises UnknownNameError for
    an unknown name and BackendUnavailableError for one that cannot run here (nccl without GPUs).
    """
    return resolve(backend, local_ranks, HERE, torch_only=True).name


def _device_for(backend: str, local_rank: int) -> torch.device:
    if get_backend(backend).on_gpu:
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def _init_rank(
    backend: str,
    rank: int,
    world_size: int,
    timeout_s: float,
    store: dist.Store,
    device: torch.device,
    prefix: str = "",
) -> dist.ProcessGroup | None:
    timeout = datetime.timedelta(seconds=timeout_s)
    kwargs: dict[str, Any] = {
        "backend": get_backend(backend).torch_backend,
        "rank": rank,
        "world_size": world_size,
        "timeout": timeout,
    }
    # Under a prefix of the run's or the step's own: no other run or step can mistake its keys.
    kwargs["store"] = dist.PrefixStore(f"{prefix}pg/", store)
    if get_backend(backend).on_gpu:
        kwargs["device_id"] = device
    dist.init_process_group(**kwargs)
    if backend == CONTROL_BACKEND:
        return dist.group.WORLD
    return dist.new_group(backend=CONTROL_BACKEND, timeout=timeout)


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
    token: bytes,
    backend: str,
    timeout_s: float,
    worker: Callable[[RankContext, Any], Any],
    payload: Any,
    parent_pid: int,
    cpu: int | None = None,
) -> None:
    _die_with_parent(parent_pid)
    # A core of its own and one intra-op thread (runtime/host/affinity.py), before torch starts threads.
    pinned = pin_this_process(cpu)
    if not pinned and "OMP_NUM_THREADS" not in os.environ:
        # As torchrun does: ranks share the cores, and idle OpenMP workers spin-wait on them, which
        # delays every other rank's wake-up by a scheduler time slice.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))
    _shorten_gil_handoff()
    # Before the process group starts its threads, which inherit it (runtime/host/rank_priority.py).
    realtime_rank(backend)
    timeout = datetime.timedelta(seconds=timeout_s)
    raw_store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timeout)
    store = SignedStore(raw_store, token)
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
        ctx.control = _init_rank(backend, rank, world_size, timeout_s, raw_store, device, store.prefix)
        result = worker(ctx, payload)
        store.put(f"result/{rank}", {"status": "ok", "value": result})
    except BaseException as exc:
        record = {
            "status": "error",
            "problem": f"{type(exc).__name__}: {exc}",
            "doing": ctx.current,
            "comm": _is_comm_error(exc),
            # A mistake in the input every rank finds alike (nothing to measure): the parent says it as one.
            "user": isinstance(exc, UserError),
        }
        try:
            store.put(f"result/{rank}", record)
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
    result_types: Sequence[type] = (),
) -> list[R]:
    """Run ``worker(ctx, payload)`` on every rank and return the results of the ranks run from here.

    Locally (no launcher) it spawns ``world_size`` ranks and returns all their results, by rank.
    Under torchrun, mpirun or srun this process is one rank and the list holds its own result only;
    pass ``world_size`` None (or the job's) there. ``backend`` is gloo, nccl or auto. ``progress``
    receives the events rank 0 reports. ``timeout_s`` bounds every collective and the wait for a
    peer that died, hung or was stopped. Local results travel as JSON: plain data (tuples come back
    as lists) or dataclasses of ``result_types``, checked against their annotations.

    Raises ConfigError for a world size below 1 or above MAX_WORLD_SIZE (or one that contradicts the launcher's),
    BackendUnavailableError/UnknownNameError for the backend, and RankError when a rank fails or
    sends something that is not its signed, well-formed result.
    """
    job = joined_job()
    if job is not None:
        return [_join(job, world_size, worker, payload, backend=backend, timeout_s=timeout_s, progress=progress)]
    if world_size is None or world_size < 1:
        raise ConfigError(f"--ranks must be at least 1, got {world_size}")
    if world_size > MAX_WORLD_SIZE:
        raise ConfigError(f"--ranks must be at most {MAX_WORLD_SIZE}, got {world_size}")
    resolved = resolve_backend(backend, world_size)
    return _launch_local(world_size, worker, payload, resolved, timeout_s, progress, tuple(result_types))


def _join(
    job: JobEnv,
    world_size: int | None,
    worker: Callable[[RankContext, P], R],
    payload: P,
    *,
    backend: str,
    timeout_s: float,
    progress: ProgressFn | None,
) -> R:
    if world_size is not None and world_size != job.world_size:
        raise ConfigError(
            f"--ranks {world_size} contradicts {job.launcher}'s world of {job.world_size} ranks; leave --ranks out"
        )
    _shorten_gil_handoff()
    resolved = resolve_backend(backend, job.local_world_size)
    realtime_rank(resolved)
    device = _device_for(resolved, job.local_rank)
    ctx = RankContext(
        rank=job.rank,
        world_size=job.world_size,
        local_rank=job.local_rank,
        backend=resolved,
        device=device,
        timeout_s=timeout_s,
        progress=progress,
    )
    session = job_session(job, timeout_s)
    session.set_timeout(timeout_s)
    prefix, step = session.begin_launch()
    kept = session.kept_for(resolved)
    try:
        ctx.doing(f"joining {step}")
        if kept is not None:
            ctx.control = session.open_kept(kept, prefix, step, timeout_s)
        else:
            try:
                ctx.control = _init_rank(resolved, job.rank, job.world_size, timeout_s, session.store, device, prefix)
            except Exception as exc:
                raise session.missing(step, exc, timeout_s) from None
            session.joined(ctx.control, step)
        if session.membership is not None:
            # Read from the hosts the ranks reported, whatever the launcher's mapping (membership.py).
            ctx.node = session.membership.node_name(job.rank)
            ctx.local_rank = session.membership.local_rank_of[job.rank]
        result = worker(ctx, payload)
    except (UserError, RankError):
        raise
    except Exception as exc:
        raise RankError(job.rank, ctx.host, ctx.current, f"{type(exc).__name__}: {exc}") from exc
    if kept is None:
        dist.destroy_process_group()
    return result


@contextlib.contextmanager
def one_process_group(backend: str, timeout_s: float) -> Iterator[None]:
    """Under a launcher, every step inside on one process group: made by the first step (or decision)
    that needs one, checked by each step after (every rank at the same step), destroyed on leaving
    (left as it is after a failure other than a user's mistake: a group whose peer died can hang in
    its destructor). Run on its own, or on a backend with a launcher of its own (mpi), nothing.

    ``backend`` as a step would be given it (``auto`` allowed); ``timeout_s`` bounds its collectives.
    """
    job = joined_job()
    named = backend_named(backend)
    if job is None or job.world_size == 1 or (named is not None and named.torch_backend is None):
        yield
        return
    try:
        resolved = resolve_backend(backend, job.local_world_size)
    except UserError:
        # No group to keep for a backend that cannot run here: the command's own check refuses it, in
        # its own words, before any step.
        yield
        return
    session = job_session(job, timeout_s)
    session.set_timeout(timeout_s)
    device = _device_for(resolved, job.local_rank)

    def opener(prefix: str) -> dist.ProcessGroup | None:
        return _init_rank(resolved, job.rank, job.world_size, timeout_s, session.store, device, prefix)

    session.keep_group(resolved, opener)
    try:
        yield
    except UserError:
        # A mistake every rank found alike (rank 0's files, handed to the others): the group is whole.
        session.release_group()
        raise
    except BaseException:
        session.release_group(destroy=False)
        raise
    session.release_group()


def _launch_local(
    world_size: int,
    worker: Callable[[RankContext, P], R],
    payload: P,
    backend: str,
    timeout_s: float,
    progress: ProgressFn | None,
    result_types: tuple[type, ...],
) -> list[R]:
    timeout = datetime.timedelta(seconds=timeout_s)
    # Bind the store's socket ourselves: given only a port, TCPStore listens on every interface.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    port = listener.getsockname()[1]
    raw_store = dist.TCPStore(
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
    store = SignedStore(raw_store, token)
    context = mp.get_context("spawn")
    procs = [
        context.Process(
            target=_child_main,
            # The token goes through the spawn pipe: not the store, the environment or argv.
            args=(
                rank,
                world_size,
                raw_store.port,
                token,
                backend,
                timeout_s,
                worker,
                payload,
                os.getpid(),
                cpus[rank],
            ),
            daemon=True,
            name=f"collbench-rank-{rank}",
        )
        for rank in range(world_size)
    ]
    with _stop_signals_raise() as guard:
        try:
            for proc in procs:
                proc.start()
            stopped = watch_ranks(procs, store, progress, timeout_s)
            return collect_results(procs, store, stopped, result_types)
        finally:
            guard.hold()
            stop_ranks(procs)
