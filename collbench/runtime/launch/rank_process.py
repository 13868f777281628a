"""What a rank process is, whoever started it: its context, its process group and its device, and
the launcher's handling of stop signals while ranks run (:mod:`.ranks` joins a launcher's job,
:mod:`.pool` starts local ranks; both build on this).

Ranks die with the launcher: while it watches them, SIGTERM and SIGHUP (and SIGINT, where Python's
own handler is in place) raise :class:`Interrupted` in it, which stops every rank before it
propagates; and each local rank asks the kernel (Linux ``PR_SET_PDEATHSIG``) for SIGKILL when the
launcher dies in any other way, SIGKILL included.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import torch
import torch.distributed as dist

from collbench.backends import get_backend, resolve
from collbench.backends.gloo import GLOO
from collbench.runtime.here import HERE
from collbench.runtime.host.environment import host_name
from collbench.runtime.launch.rankstore import SignedStore

CONTROL_BACKEND = GLOO.name
"""Small control messages (plans, wrong counts, times) travel on a gloo group whatever the backend: a
process group on the CPU, never inside timed iterations."""

_PR_SET_PDEATHSIG = 1
"""prctl(2) option: the signal this process gets when its parent (the thread that made it) exits."""
_STOP_SIGNALS = ("SIGTERM", "SIGHUP", "SIGINT")

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
        self.nodes: int | None = None
        """How many nodes the job's ranks run on, where the job's membership says (under a launcher);
        None: a worker that needs it gathers the ranks' nodes itself."""
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
def stop_signals_raise() -> Iterator[_SignalGuard]:
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


def die_with_parent(parent_pid: int) -> None:
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


def resolve_backend(backend: str, local_ranks: int) -> str:
    """The torch.distributed backend collbench's ranks run ``backend`` on (``auto`` resolved), checked
    runnable here (``collbench.backends.resolve``).

    ``auto`` is nccl when CUDA sees at least ``local_ranks`` GPUs, else gloo. Raises UnknownNameError for
    an unknown name and BackendUnavailableError for one that cannot run here (nccl without GPUs).
    """
    return resolve(backend, local_ranks, HERE, torch_only=True).name


def device_for(backend: str, local_rank: int) -> torch.device:
    if get_backend(backend).on_gpu:
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def init_rank(
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


def is_comm_error(exc: BaseException) -> bool:
    """Whether an error is this rank noticing a peer's failure, rather than a failure of its own."""
    backend_error = getattr(dist, "DistBackendError", None)
    if backend_error is not None and isinstance(exc, backend_error):
        return True
    text = str(exc).lower()
    return any(s in text for s in ("connection closed", "connection reset", "timed out", "timeout", "broken pipe"))


GIL_SWITCH_INTERVAL_S = 1e-4


def shorten_gil_handoff() -> None:
    """Hand the GIL to a waiting thread within 0.1 ms instead of Python's default 5 ms.

    A point-to-point operation completes on a backend thread that takes the GIL before the waiting
    rank can return; while the rank's main thread holds it, that thread waits out the switch
    interval. Measured here with gloo on 2 ranks: a batched isend/irecv exchange of 64 KiB took more
    than 2 ms in 36% of iterations (p90 4.0 ms, p50 77 us) at the default interval, and in 2% (p90
    72 us) at 0.2 ms. Without this, collbench's own algorithms would be timed against the
    interpreter rather than the network.
    """
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
