"""Where local CPU ranks run: how many by default, and which core each one is pinned to.

Why it matters: a rank that waits for a peer sleeps, and a woken thread that finds its core taken
waits for the scheduler (a tick, ~4 ms here, on calls of tens of microseconds). With more ranks than
cores every collective waits for such turns, and the times measure the scheduler, not the algorithm
(issue 10: 4 ranks on 2 cores gave 5-7 ms for a 512-byte all-reduce). So by default collbench starts
no more ranks than the cores this process may use, and, where its ranks run at real-time priority
(``rank_priority.py``), pins each one to a core of its own (:func:`rank_cpus` says when and why).

"Cores this process may use" is its affinity mask (``os.sched_getaffinity``: taskset, cpusets,
Slurm's binding), further limited by a cgroup CPU quota when one is set (containers limited to
``--cpus 2`` see every core of the host in their mask); never ``os.cpu_count``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collbench.backends import backend_named, get_backend
from collbench.runtime.host import rank_priority
from collbench.runtime.host.own_threads import own_threads
from collbench.runtime.host.switches import env_switch
from collbench.units import counted

DEFAULT_MAX_RANKS = 4
"""The default never starts more local CPU ranks than this (enough to show every algorithm's shape)."""
MIN_RANKS = 2
"""A collective needs two ranks; the default never goes below, even on one core."""

_CGROUP_V2_MAX = Path("/sys/fs/cgroup/cpu.max")
_CGROUP_V1_QUOTA = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
_CGROUP_V1_PERIOD = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")


def available_cpus() -> tuple[int, ...]:
    """The CPU ids this process may run on, sorted (its affinity mask)."""
    getter = getattr(os, "sched_getaffinity", None)
    if getter is None:  # not Linux: no mask to read, every CPU is allowed
        return tuple(range(os.cpu_count() or 1))
    return tuple(sorted(getter(0)))


def cgroup_cpu_limit(root: Path = Path("/")) -> float | None:
    """The cgroup CPU quota in cores (``2.0`` for ``--cpus 2``), or None when there is none.

    Reads cgroup v2's ``cpu.max`` ("max 100000" is no limit) or v1's ``cpu.cfs_quota_us`` (-1 is no
    limit) over ``cpu.cfs_period_us``. ``root`` is for tests (a fake /sys). Unreadable files: None.
    """
    v2 = root / _CGROUP_V2_MAX.relative_to("/")
    try:
        quota, _, period = v2.read_text(encoding="ascii").strip().partition(" ")
        if quota == "max":
            return None
        return int(quota) / int(period or "100000")
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / _CGROUP_V1_QUOTA.relative_to("/")).read_text(encoding="ascii").strip())
        period_us = int((root / _CGROUP_V1_PERIOD.relative_to("/")).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None
    if quota_us <= 0 or period_us <= 0:
        return None
    return quota_us / period_us


def usable_cores(cpus: tuple[int, ...] | None = None, quota: float | None = None) -> int:
    """How many cores this process can keep busy at once: its mask, capped by a cgroup quota."""
    mask = len(available_cpus() if cpus is None else cpus)
    if quota is None:
        return max(1, mask)
    # A quota of 1.5 cores cannot run two ranks at once: round down, but never below one.
    return max(1, min(mask, math.floor(quota)))


def default_cpu_ranks(cores: int | None = None) -> int:
    """The default number of local CPU ranks: ``min(4, usable cores)``, at least 2."""
    n = usable_cores(quota=cgroup_cpu_limit()) if cores is None else cores
    return max(MIN_RANKS, min(DEFAULT_MAX_RANKS, n))


@dataclass(frozen=True, slots=True)
class Placement:
    """Which CPU each local rank is pinned to (None: not pinned), and a line when oversubscribed."""

    cpus: tuple[int | None, ...]
    warning: str = ""
    """One line saying the results measure the scheduler too; empty when every rank has a core."""


def plan_placement(world_size: int, cpus: tuple[int, ...] | None = None, cores: int | None = None) -> Placement:
    """Pin rank r to the r-th allowed CPU when there are enough cores for every rank; else pin none.

    Oversubscribed, pinning would only fix which ranks share a core (and strand a rank behind a busy
    sibling while another core idles): the kernel's scheduler balances better, so nothing is pinned
    and the placement carries the warning instead.
    """
    allowed = available_cpus() if cpus is None else cpus
    usable = usable_cores(allowed, cgroup_cpu_limit()) if cores is None else cores
    if world_size <= min(usable, len(allowed)):
        return Placement(tuple(allowed[r] for r in range(world_size)))
    return Placement((None,) * world_size, oversubscribed_note(world_size, usable))


def oversubscribed_note(ranks: int, cores: int, *, host: bool = False) -> str:
    """The line saying ``ranks`` on ``cores`` measure the scheduler too (``host``: a launcher's ranks on
    this host, its ranks on other hosts not counted)."""
    whose = "this host's " if host else ""
    return (
        f"{ranks} ranks on {whose}{counted(cores, 'core')}: ranks wait "
        "for each other to be scheduled, so the results measure the scheduler too (use at most "
        f"{max(cores, MIN_RANKS)} ranks{' a host' if host else ''} for numbers that measure the collective)"
    )


def launched_oversubscribed(local_ranks: int, cores: int | None = None) -> str:
    """The oversubscription line for a launcher's ``local_ranks`` CPU ranks on this host, or "" where each
    has a core. The launcher placed them: 'torchrun --nproc-per-node 3 ... sweep' on 2 cores had every
    rank wait for a core, evenly enough that no point was marked stalled, and said nothing (a local
    sweep's placement says this line).

    ``cores``: the machine's, capped by a cgroup quota (default), not this process's mask: mpirun and
    srun bind each rank to a core of its own, and one core a rank is no crowd."""
    if cores is None:
        cores = usable_cores(tuple(range(os.cpu_count() or 1)), cgroup_cpu_limit())
    return oversubscribed_note(local_ranks, cores, host=True) if local_ranks > cores else ""


def pin_this_process(cpu: int | None) -> bool:
    """Pin the calling process (all its threads to come) to ``cpu``; False when not pinned.

    Called in a rank before torch starts its thread pools or the process group, so that the threads
    they create inherit the mask. One intra-op thread then: more would only contend for that core.
    """
    if cpu is None:
        return False
    setter = getattr(os, "sched_setaffinity", None)
    if setter is None:
        return False
    # Linux sets a mask per thread: every thread this process already has (the interpreter's own
    # helpers and the calling thread, whose mask the threads started later inherit).
    try:
        for tid in own_threads():
            try:
                setter(tid, {cpu})
            except ProcessLookupError:
                continue  # a thread that ended meanwhile
    except OSError:
        # A CPU taken away meanwhile (cpuset changed): run unpinned rather than fail the run.
        return False
    import torch

    torch.set_num_threads(1)
    return True


PIN_ENV = "COLLBENCH_PIN_RANKS"
"""1 pins each local CPU rank to a core of its own, 0 never does; by default they are pinned when they
run at real-time priority (see rank_cpus)."""


def rank_cpus(
    world_size: int, backend: str, note: Callable[[dict[str, Any]], None] | None = None
) -> tuple[int | None, ...]:
    """The CPU each local rank is pinned to (launch.py's hook); ``note`` gets the oversubscription line.

    Gloo ranks are pinned, one core each, when they run at real-time priority, as they do by default
    where the OS permits it; ``COLLBENCH_PIN_RANKS=1`` pins them anyway, ``0`` never. Measured on the
    2-core VM, 2 gloo ranks, a ring all-reduce of 200 iterations, two runs each way:

    - at real-time priority, pinned and not pinned measure the same: 64 KiB p50 79-81 us against
      80-82 us, 1 MiB 208-210 us against 211-212 us, no stalls (iterations >3x the fastest) either
      way; over a wider sweep (ring, tree, native and rabenseifner, 512 B-2 MiB) pinned had 0 of 28
      points stalled against 0-1, in 4.8-5.2 s against 6.4-6.7 s;
    - under the normal scheduler, pinned was far worse: 64 KiB 3,867 us with 70% of iterations
      stalled against 422 us with 0.5%; 1 MiB 4,029 us (99%) against 749 us (15%). A pinned rank's
      gloo threads share its one core, and a woken one waits for the thread running there to use up
      its time slice; at real-time priority it runs at once.

    GPU ranks are not pinned here: their CPU affinity belongs to their GPU's NUMA node, not to a core.
    """
    if not get_backend(backend).places_cpu_ranks:
        return (None,) * world_size
    placement = plan_placement(world_size)
    if placement.warning and note is not None:
        note({"kind": "note", "text": placement.warning})
    asked = env_switch(PIN_ENV)
    if asked is False or (asked is None and not rank_priority.will_run_realtime(backend)):
        return (None,) * world_size
    return placement.cpus


def default_local_ranks(backend: str = "auto") -> int:
    """Ranks to start when ``--ranks`` is left out: one per GPU on a GPU backend, else :func:`default_cpu_ranks`."""
    named = backend_named(backend)
    if named is None or named.on_gpu:  # auto, or a GPU backend
        import torch

        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if gpus >= MIN_RANKS or (named is not None and gpus >= 1):
            return gpus
    return default_cpu_ranks()
