"""Run CPU ranks' threads at real-time priority while they measure (Linux ``SCHED_RR``).

Why. A gloo rank is three threads that hand each call to one another: the caller, the process
group's worker, and gloo's socket loop. Under the normal scheduler (CFS/EEVDF) a woken thread does
not always preempt the thread running on its core, and then waits for the scheduler tick (4 ms at
250 Hz) on a call of 40-300 us. Measured on the 2-core development VM, with nothing else running and
idle CPUs polling (``idle_latency.py``), 2 gloo ranks, 2,000 plain ``all_reduce`` calls, two runs each
way, interleaved: under the normal scheduler 11-12% of calls at 512 B took more than 3 ms (p25
190-233 us) and 10-16% at 2 MiB (p25 996-1,006 us); with every rank thread at ``SCHED_RR`` 1, none at
512 B (p25 90-114 us) and 0.1% at 2 MiB (p25 767-802 us). Two processes ping-ponging a socket, with
no threads in between, never stalled either way: the stalls are the scheduler's hand-offs between a
rank's own threads, not the network or the host. The times that are
left are the collective's, which is what decisions compare.

How. ``SCHED_RR`` at the lowest real-time priority (1) for every thread of the rank, set when the
rank starts, so that the threads torch and gloo start later inherit it. Round-robin rather than FIFO:
ranks that outnumber the cores still take turns (a 100 ms quantum). The threads block while they
wait (on sockets and condition variables), and Linux keeps
5% of every second for normal tasks however busy real-time ones are (``sched_rt_runtime_us``), so the
launcher and the shell stay responsive. It needs ``CAP_SYS_NICE`` (root has it) or an
``RLIMIT_RTPRIO`` of at least 1 (``ulimit -r``); without either nothing changes, and a run that
stalled says so in its stall summary (:func:`unheld_hint`). Only gloo ranks: NCCL ranks time their
calls with CUDA events on the GPU, and a real-time thread spinning on a CUDA synchronize would take
its core from NCCL's own proxy thread. ``COLLBENCH_REALTIME=0`` turns it off.
"""

from __future__ import annotations

import contextlib
import os
import resource

from collbench.backends import backend_named
from collbench.runtime.host.own_threads import own_threads
from collbench.runtime.host.switches import env_switch

ENV = "COLLBENCH_REALTIME"
PRIORITY = 1
"""The lowest real-time priority: above every normal thread, below anything the system runs as real-time."""


def _switched_off() -> bool:
    """Whether ``COLLBENCH_REALTIME`` asks collbench to leave ranks under the normal scheduler."""
    return env_switch(ENV) is False


def _policy() -> int | None:
    """``SCHED_RR`` where this Python and OS have it (Linux), else None."""
    return getattr(os, "SCHED_RR", None)


def _places(backend: str) -> bool:
    named = backend_named(backend)
    return named is not None and named.places_cpu_ranks


def will_run_realtime(backend: str) -> bool:
    """Whether ranks of ``backend`` started by this process will run at real-time priority."""
    return _places(backend) and not _switched_off() and permitted()


def realtime_rank(backend: str) -> bool:
    """Put every thread of this process (and those it starts later) at ``SCHED_RR`` priority 1.

    Called in a rank before it joins its process group. True when done; False when switched off, not
    a gloo rank, not Linux, or not permitted (then nothing is changed).
    """
    policy = _policy()
    if not _places(backend) or _switched_off() or policy is None:
        return False
    param = os.sched_param(PRIORITY)
    done: list[int] = []
    for tid in own_threads():
        try:
            os.sched_setscheduler(tid, policy, param)
        except ProcessLookupError:
            continue  # a thread that ended meanwhile
        except OSError:
            # Not permitted: put back the threads already changed, so that none runs ahead of the rest.
            for changed in done:
                _normal(changed)
            return False
        done.append(tid)
    return True


def _normal(tid: int) -> None:
    with contextlib.suppress(OSError):  # a thread that ended has nothing to put back
        os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))


def permitted() -> bool:
    """Whether this process may run threads at real-time priority 1 (root, CAP_SYS_NICE or ``ulimit -r``)."""
    if _policy() is None:
        return False
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_RTPRIO)
    except (AttributeError, OSError, ValueError):
        soft = 0
    if soft == resource.RLIM_INFINITY or soft >= PRIORITY:
        return True
    # Without the limit, only CAP_SYS_NICE allows it: ask the kernel, on this thread, and put it back.
    policy = os.sched_getscheduler(0)
    param = os.sched_getparam(0)
    try:
        os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(PRIORITY))
    except OSError:
        return False
    os.sched_setscheduler(0, policy, param)
    return True


def unheld_hint() -> str:
    """One line for a stall summary where gloo ranks ran under the normal scheduler ('' where they ran
    at real-time priority, or where the OS has no such thing): switched off, or not permitted."""
    if _policy() is None:
        return ""
    pinned = env_switch("COLLBENCH_PIN_RANKS") is True
    also = ", and pinned one core each (COLLBENCH_PIN_RANKS=1) its threads queue for that core" if pinned else ""
    if _switched_off():
        return (
            f"rank threads ran under the normal scheduler ({ENV}=0): a woken rank thread can wait a "
            f"scheduler tick (~4 ms) for its core{also}"
        )
    if permitted():
        return ""
    return (
        "rank threads ran under the normal scheduler (no CAP_SYS_NICE, and `ulimit -r` is 0): a woken "
        f"rank thread can wait a scheduler tick (~4 ms) for its core{also}; as root, or with `ulimit -r 1`, "
        f"collbench runs them at real-time priority ({ENV}=0 keeps them normal)"
    )
