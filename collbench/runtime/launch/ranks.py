"""Start ranks (or join a torchrun job), run a worker on each, and turn failures into RankError.

Local ranks (:mod:`collbench.runtime.launch.pool`): the parent holds a TCPStore on 127.0.0.1 at a
port the OS picks (never a fixed one), spawns ``world_size`` processes that join it, and watches
them; inside ``pool.local_group`` they stay up for every step of a command. Ranks publish what they
are doing and their results through that store, so when one dies the parent can say which rank,
where, doing what. A rank blocked on a dead or hung peer gives up after the process group's timeout.

Under a launcher (torchrun, mpirun, srun: see :mod:`collbench.runtime.launch.launchers`), this process is
one rank of that job: it joins it through the job's one store (rank 0's at the launcher's address,
or torchrun's agent's: :mod:`collbench.runtime.launch.session`) and runs the worker itself; nothing
is spawned.

What ranks send the launcher through the store is signed JSON (:mod:`collbench.runtime.launch.rankstore`):
the store is reachable by any local user, so nothing read from it is unpickled or trusted unsigned.

Workers run ``worker(ctx, payload)``: module-level functions (they and the payload are pickled into
the children through a pipe of each child's own, parent to child only). A worker's result travels back as JSON:
plain data, or dataclasses of the types the caller names in ``result_types``.

Ranks die with the launcher (:mod:`collbench.runtime.launch.rank_process`: stop signals, and the
kernel's SIGKILL when the launcher dies in any other way).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import torch.distributed as dist

from collbench.backends import backend_named
from collbench.errors import CommandLineError, ConfigError, RankError, UserError
from collbench.runtime.host.rank_priority import realtime_rank
from collbench.runtime.launch.launchers import MAX_WORLD_SIZE, JobEnv, detect_job
from collbench.runtime.launch.pool import run_local
from collbench.runtime.launch.rank_process import (
    ProgressFn,
    RankContext,
    device_for,
    init_rank,
    resolve_backend,
    shorten_gil_handoff,
)
from collbench.runtime.launch.session import job_session

P = TypeVar("P")
R = TypeVar("R")


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
        # argv and the launcher's world are alike on every rank: rank 0 alone says it.
        raise CommandLineError(
            f"--ranks {world_size} contradicts {job.launcher}'s world of {job.world_size} ranks; leave --ranks out"
        )
    shorten_gil_handoff()
    resolved = resolve_backend(backend, job.local_world_size)
    realtime_rank(resolved)
    device = device_for(resolved, job.local_rank)
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
                ctx.control = init_rank(resolved, job.rank, job.world_size, timeout_s, session.store, device, prefix)
            except Exception as exc:
                raise session.missing(step, exc, timeout_s) from None
            session.joined(ctx.control, step)
        if session.membership is not None:
            # Read from the hosts the ranks reported, whatever the launcher's mapping (membership.py).
            ctx.node = session.membership.node_name(job.rank)
            ctx.local_rank = session.membership.local_rank_of[job.rank]
            ctx.nodes = session.membership.nodes
        result = worker(ctx, payload)
    except (UserError, RankError):
        raise
    except Exception as exc:
        raise RankError(job.rank, ctx.host, ctx.current, rank_problem(exc, timeout_s)) from exc
    if kept is None:
        dist.destroy_process_group()
    return result


_GLOO_PEER_LOST = re.compile(
    r"(Connection closed by peer \S+|Read error \S+ Connection reset by peer|Write error \S+ Broken pipe"
    r"|Connection reset by peer|Broken pipe)"
)
"""What gloo's TCP transport says (third_party/gloo/gloo/transport/tcp/pair.cc) when the process at the
other end of a pair is gone: its connection closed or reset."""
_GLOO_TIMED_OUT = re.compile(r"Timed out waiting \d+ms for (?:send|recv) operation to complete")
"""gloo's unbound_buffer.cc when a peer neither sent nor received within the group's timeout."""
_NCCL_PEER_LOST = "remote process exited or there was a network error"
"""NCCL's text for ncclRemoteError (ncclGetErrorString, src/init.cc), which torch's NCCL errors carry."""


def rank_problem(exc: BaseException, timeout_s: float) -> str:
    """What broke in this rank's step, for its one error line under a launcher. A peer that is gone
    (or silent past the timeout) is said so, without gloo's source path and sign-off: the launcher
    (or that rank's own line) names which rank died; this rank only saw its connection go."""
    text = str(exc)
    if (lost := _GLOO_PEER_LOST.search(text)) is not None:
        seen = lost.group(1).rstrip(".:")
        return f"a peer rank is gone (gloo: {seen}): it died or failed; the launcher's report or its own error names it"
    if _GLOO_TIMED_OUT.search(text) is not None:
        return (
            f"no peer rank sent or received within the {timeout_s:g} s timeout (one died, hung or was stopped; "
            "the launcher's report or its own error names it; --timeout sets the wait)"
        )
    if _NCCL_PEER_LOST in text.lower():
        return "a peer rank is gone (NCCL: remote process exited or there was a network error): it died or failed"
    return f"{type(exc).__name__}: {exc}"


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
    device = device_for(resolved, job.local_rank)

    def opener(prefix: str) -> dist.ProcessGroup | None:
        return init_rank(resolved, job.rank, job.world_size, timeout_s, session.store, device, prefix)

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
    return run_local(world_size, worker, payload, backend, timeout_s, progress, result_types)
