"""A launcher's job as one session: one store for the whole job, the token that signs what its ranks
tell each other there, and the checks that every rank takes the same step.

Under torchrun, mpirun or srun a command may run several steps in one job: ``tune`` launches a sweep
per round, and decides between them what to run next. Rank 0 holds one TCPStore for the life of the
process (under torchrun's elastic agent, every rank joins the agent's instead), and each step's
process group meets there under keys of its own (``launch<N>/``): a rank early for the next step
waits for that step's keys, and can never reach a store or the keys of the step before. A fresh
store per step, on one port, let a rank early for the next step join the previous step's store
just before it closed ("Connection reset"), about once in twenty joins.

A command that takes several steps (``tune``) keeps one process group for all of them
(:meth:`JobSession.keep_group`, ``ranks.one_process_group``): made by its first step, checked again by
each step after, destroyed when the command is done. A fresh group per step cost a rendezvous and a
full mesh of connections every round, and at a thousand ranks that is most of a step.

Every rank counts its steps. They stay the same on every rank only while every decision between
steps is: :func:`agree` takes a decision on rank 0 and hands it to the others by a broadcast on the
group's connections (the ones the token travels on), never by keys every rank polls. If the ranks
still part, the first step where they do says so in one line naming the rank and the step, rather
than the store's timeout: right after each group forms, the ranks compare their steps' names; and a
rank that never comes is named by rank 0 from the step it last recorded (before the first group, from
the one key each rank sets on reaching the store).

The token that signs values here (:mod:`collbench.runtime.launch.rankstore`) is made by rank 0 and
sent to the others over the first process group's connections, never through the store. Those
connections are set up through the store's unsigned rendezvous keys, as torch's own are: a local
user who won a race against that rendezvous could read it (docs/clusters.md, "What the rank store exposes").
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import datetime
import functools
import hashlib
import itertools
import json
import os
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from collbench.backends.gloo import GLOO
from collbench.errors import ConfigError, RankError
from collbench.runtime.host.environment import host_name
from collbench.runtime.launch.launchers import JobEnv, detect_job
from collbench.runtime.launch.membership import Membership, gather_membership, membership, this_host
from collbench.runtime.launch.rankstore import (
    MAX_VALUE_BYTES,
    TOKEN_BYTES,
    SignedStore,
    StoreValueError,
    decode,
    encode,
    new_token,
)
from collbench.runtime.launch.rendezvous import (
    hydra_proxy_pid,
    publish,
    publish_ended,
    published_address,
    read_published,
    under_hydra,
    withdraw,
)

T = TypeVar("T")

STEP_NAME_BYTES = 240
"""How much of a step's name (and its host's) the ranks compare after joining: enough to tell steps apart."""
LENGTH_BYTES = 8
"""A decision's length in bytes, sent after rank 0's step name (big-endian)."""
RANKS_NAMED = 5
"""How many ranks that never reached the store rank 0's error names (the rest are counted)."""
MAX_DECISION_BYTES = MAX_VALUE_BYTES
"""The longest decision a rank accepts (JSON text): a longer length is not rank 0's."""

GroupOpener = Callable[[str], "dist.ProcessGroup | None"]
"""Makes the job's process group with its keys under a store prefix; returns its control group."""
Broadcast = Callable[[torch.Tensor, "dist.ProcessGroup | None"], None]
"""Sends a tensor from rank 0 to every rank of a group, in place (``dist.broadcast``'s contract)."""

_current_step: contextvars.ContextVar[str] = contextvars.ContextVar("collbench_job_step", default="")


@contextlib.contextmanager
def job_step(name: str) -> Iterator[None]:
    """Name the launches made inside: errors about a step of a launcher's job name it so."""
    token = _current_step.set(name)
    try:
        yield
    finally:
        _current_step.reset(token)


def _open_store(job: JobEnv, timeout_s: float) -> tuple[dist.Store, JobEnv]:
    """The job's store and the job with its address: rank 0 holds it (on the loopback when every rank
    is on this host), the others join; under torchrun's agent every rank joins the agent's. Under srun
    without MASTER_ADDR and MASTER_PORT, or mpirun without MASTER_PORT, rank 0 publishes where it
    listens and the others read it there (rendezvous.py)."""
    timeout = datetime.timedelta(seconds=timeout_s)
    if job.rendezvous and job.rank == 0:
        store, port = _listen(job, "127.0.0.1" if job.local_only else "0.0.0.0", timeout)
        # Task 0's own host, as the other tasks reach it: MASTER_ADDR when given, else the address of
        # the interface named for the job's traffic, else its host name (rendezvous.published_address).
        addr = job.master_addr or published_address(os.environ)
        publish(Path(job.rendezvous), addr, port, job.launcher)
        return store, dataclasses.replace(job, master_addr=addr, master_port=port)
    if job.rendezvous:
        # Under Hydra a killed job's file can carry this job's name: only a live store's is taken.
        live = under_hydra()
        addr, port = read_published(Path(job.rendezvous), timeout_s, job.rank, job.launcher, check_live=live)
        job = dataclasses.replace(job, master_addr=addr, master_port=port)
    if job.rank != 0 or job.agent_store or not job.local_only:
        joins = job.rank != 0 or job.agent_store
        _check_resolves(job)
        try:
            with _cpp_log_held() as held:
                if joins:
                    store = dist.TCPStore(job.master_addr, job.master_port, is_master=False, timeout=timeout)
                else:
                    store = dist.TCPStore(
                        job.master_addr, job.master_port, is_master=True, wait_for_workers=False, timeout=timeout
                    )
                held.keep = True
            return store, job
        except (RuntimeError, OSError) as exc:  # torch's DistNetworkError and DistStoreError are RuntimeErrors
            doing = f"reach the job's store at {job.master_addr}:{job.master_port} within {timeout_s:g} s"
            if not joins:
                doing = f"hold the job's store at {job.master_addr}:{job.master_port}"
            said = _first_line(exc)
            if "Ping failed" in said:
                # torch's client found a listener that does not answer as its store does ('Expected: 3108,
                # Got: 1347703880' is "HTTP" read as a number: a web server or proxy answered there).
                said = f"something other than a store answers there ({said})"
            raise ConfigError(
                f"{job.launcher} rank {job.rank}: cannot {doing} (the address from {job.master_source}): "
                f"{said}; set MASTER_ADDR to rank 0's host, reachable from every rank"
            ) from None
    return _listen(job, "127.0.0.1", timeout)[0], job


def _listen(job: JobEnv, host: str, timeout: datetime.timedelta) -> tuple[dist.TCPStore, int]:
    """Rank 0's store on a socket it binds itself at ``host`` and ``job.master_port`` (0: the kernel
    picks a free port), and the port it listens on."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # As torch's own store server does: a port the last step's store left in TIME_WAIT can be bound
    # again (one still listened on cannot: Linux refuses it whatever this says).
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, job.master_port))
    except OSError as exc:
        listener.close()
        raise ConfigError(
            f"{job.launcher}: cannot listen on {host}:{job.master_port} ({exc.strerror or exc}); "
            "set MASTER_PORT to a free port"
        ) from None
    listener.listen(128)
    port = int(listener.getsockname()[1])
    # Its own client reaches it on the loopback, whichever interfaces it listens on.
    store = dist.TCPStore(
        "127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timeout, master_listen_fd=listener.detach()
    )
    return store, port


class _Held:
    keep = False


@contextlib.contextmanager
def _cpp_log_held() -> Iterator[_Held]:
    """Hold what libtorch writes to stderr (fd 2) in the block: its retries of an unreachable store are
    a screen of C++ stack frames per try. Written out after all when the block sets ``keep``; dropped
    when it fails, since the error line then says what they said."""
    held = _Held()
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 2)
        try:
            yield held
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if held.keep:
                log.seek(0)
                sys.stderr.buffer.write(log.read(1 << 20))
                sys.stderr.flush()


def _check_resolves(job: JobEnv) -> None:
    """ConfigError at once for a store address that names no host (torch would retry it until its timeout)."""
    try:
        socket.getaddrinfo(job.master_addr, job.master_port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(
            f"{job.launcher} rank {job.rank}: the job's store address {job.master_addr!r} (from {job.master_source}) "
            f"does not resolve ({reason}); set MASTER_ADDR to rank 0's host"
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return " ".join(text[0].split())[:300].rstrip(".") if text else type(exc).__name__


@dataclass(slots=True)
class KeptGroup:
    """The one process group a command's steps share (see :meth:`JobSession.keep_group`)."""

    backend: str
    """The torch.distributed backend it runs (a step on another one makes a group of its own)."""
    open: GroupOpener
    control: dist.ProcessGroup | None = None
    """Its gloo group for small control messages (the default group itself under gloo)."""
    made: bool = False
    """Whether the first step made it yet."""


def _broadcast_from_rank_0(tensor: torch.Tensor, group: dist.ProcessGroup | None) -> None:
    dist.broadcast(tensor, src=0, group=group)


class JobSession:
    """This process's part of a launcher's job: the store, the token once shared, and its steps so far."""

    def __init__(self, job: JobEnv, store: dist.Store) -> None:
        self.job = job
        self.store = store
        self.signed: SignedStore | None = None
        self.host = host_name()
        self.step = "starting"
        self.kept: KeptGroup | None = None
        self.broadcast: Broadcast = _broadcast_from_rank_0
        """How a decision travels from rank 0 (a seam: the store-traffic benchmark counts without a network)."""
        self._launches = itertools.count()
        self._decisions = itertools.count()
        self.membership: Membership | None = None
        """Every rank's node, gathered with the first group the job forms (:mod:`.membership`)."""
        self._arrival = ""
        """Store prefix of the keys each rank sets on reaching the store for the first group."""

    def keep_group(self, backend: str, opener: GroupOpener) -> None:
        """Have every later step on ``backend`` share one process group, made by ``opener`` at the
        first step (or decision) that needs it, until :meth:`release_group`."""
        self.kept = KeptGroup(backend, opener)

    def kept_for(self, backend: str) -> KeptGroup | None:
        """The group kept for steps on ``backend``, if one is."""
        return self.kept if self.kept is not None and self.kept.backend == backend else None

    def open_kept(self, kept: KeptGroup, prefix: str, step: str, timeout_s: float) -> dist.ProcessGroup | None:
        """The kept group's control group, made now under ``prefix`` if no step made it yet, and every
        rank checked to be at ``step``. Raises RankError as :meth:`missing` and :meth:`joined` do."""
        if not kept.made:
            try:
                kept.control = kept.open(prefix)
            except Exception as exc:
                raise self.missing(step, exc, timeout_s) from None
            kept.made = True
        self.joined(kept.control, step)
        return kept.control

    def release_group(self, *, destroy: bool = True) -> None:
        """Stop keeping a group; with ``destroy``, destroy the one made. Left undestroyed after a
        failure: a process group whose peer died can hang in its destructor."""
        kept, self.kept = self.kept, None
        if kept is not None and kept.made and destroy:
            dist.destroy_process_group()

    def set_timeout(self, timeout_s: float) -> None:
        self.store.set_timeout(datetime.timedelta(seconds=timeout_s))

    def begin_launch(self) -> tuple[str, str]:
        """The next step's store prefix and its name; recorded as this rank's step."""
        index = next(self._launches)
        name = _current_step.get()
        step = f"step {index}" + (f" ({name})" if name else "")
        self._record(step)
        prefix = f"{self.job.store_scope}collbench/launch{index}/"
        if self.signed is None:
            # Before the first group forms no rank has a signed step record: an unsigned key says this
            # rank reached the store, so that rank 0 can name one that never did (:meth:`missing`).
            self._arrival = f"{prefix}arrived/"
            self.store.set(f"{self._arrival}{self.job.rank}", "")
        return prefix, step

    def _record(self, step: str) -> None:
        self.step = step
        if self.signed is not None:
            self.signed.put(f"step/{self.job.rank}", {"step": step, "host": self.host})

    def joined(self, control: dist.ProcessGroup | None, step: str) -> None:
        """After a step's group formed: share the token (first time), then check every rank is at ``step``.

        Raises RankError naming the first rank whose step is not rank 0's.
        """
        if self.signed is None:
            self.signed = SignedStore(self.store, _share_token(self.job.rank, control))
            self._record(step)
        if self.membership is None:
            self.membership = gather_membership(control, self.job.world_size)
            if self.job.rendezvous and self.job.rank == 0:
                # Every task reached the store (the group formed): nobody reads the address again.
                withdraw(Path(self.job.rendezvous))
        mine = _fixed_width(f"{step}\0{self.host}")
        if _one_step_everywhere(mine, control):
            return
        # Some rank is at another step: every rank sees it in the all-reduce, so all gather the names.
        gathered = torch.empty(self.job.world_size * STEP_NAME_BYTES, dtype=torch.uint8)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        gather(gathered, mine, group=control)
        rows = gathered.view(self.job.world_size, STEP_NAME_BYTES).tolist()
        named = [bytes(row).rstrip(b"\0").decode("utf-8", "replace").partition("\0") for row in rows]
        first = named[0][0]
        for rank, (theirs, _, host) in enumerate(named):
            if theirs != first:
                raise RankError(
                    rank, host, f"starting {theirs}", f"rank 0 is starting {first}: the ranks took different steps"
                )

    def missing(self, step: str, exc: BaseException, timeout_s: float) -> RankError:
        """The error for a step's group that did not form: on rank 0, the rank that is elsewhere and where."""
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if self.job.rank == 0 and self.signed is not None:
            for rank in range(1, self.job.world_size):
                try:
                    record = self.signed.latest(f"step/{rank}")
                except ValueError:
                    continue
                if not isinstance(record, dict):
                    continue
                theirs = str(record.get("step", "?"))
                if theirs != step:
                    return RankError(
                        rank,
                        str(record.get("host", "?")),
                        f"at {theirs}",
                        f"it did not join {step}, where rank 0 waited {timeout_s:.0f} s: "
                        "the ranks took different steps",
                    )
        where = f"{self.job.master_addr}:{self.job.master_port}"
        if self.job.rank == 0 and self.signed is None and self._arrival:
            absent, count = self._absent_ranks()
            if count:
                return RankError(
                    self.job.rank,
                    self.host,
                    f"joining {step}",
                    f"{_ranks_text(absent, count)} never reached the job's store at {where} within {timeout_s:.0f} s "
                    f"(not started, died first, or cannot reach that address, from {self.job.master_source})",
                )
        return RankError(
            self.job.rank,
            self.host,
            f"joining {step}",
            f"not every rank of the job joined within {timeout_s:.0f} s (a rank took another step, stopped, or "
            f"cannot reach {self.job.master_addr}:{self.job.master_port}; rank 0's error names it): {why}",
        )

    def _absent_ranks(self) -> tuple[list[int], int]:
        """The first few ranks that never set their arrival key, and how many did not (rank 0, on a failed
        first group only: one store check per rank, once); none where the store does not answer."""
        absent: list[int] = []
        count = 0
        for rank in range(1, self.job.world_size):
            try:
                arrived = self.store.check([f"{self._arrival}{rank}"])
            except (RuntimeError, OSError):
                return [], 0
            if not arrived:
                count += 1
                if len(absent) < RANKS_NAMED:
                    absent.append(rank)
        return absent, count

    def agree(self, name: str, decide: Callable[[], T], timeout_s: float, types_allowed: Sequence[type]) -> Any:
        """``decide()`` on rank 0, handed to every rank by a broadcast; the same value everywhere.

        On the kept group (made now if no step made it yet), else on a small gloo group of its own.
        Rank 0 sends its step's name with the value: a rank at another decision says so. Raises
        RankError when rank 0's decision does not come within ``timeout_s`` (the group's timeout).
        """
        index = next(self._decisions)
        step = f"decision {index} ({name})"
        with self._decision_group(timeout_s) as control:
            self._record(step)
            text = json.dumps(encode(decide())).encode() if self.job.rank == 0 else b""
            try:
                text = self._handed_over(text, step, control)
            except RuntimeError as exc:  # gloo's timeouts and closed connections
                raise RankError(
                    self.job.rank,
                    self.host,
                    f"waiting for {step}",
                    f"rank 0 sent no decision within {timeout_s:.0f} s: it took another step, or stopped "
                    f"({_first_line(exc)})",
                ) from None
        try:
            return decode(json.loads(text), types_allowed)
        except (UnicodeDecodeError, json.JSONDecodeError, StoreValueError) as exc:
            raise RankError(self.job.rank, self.host, f"at {step}", f"rank 0's decision does not read: {exc}") from None

    def _handed_over(self, text: bytes, step: str, control: dist.ProcessGroup | None) -> bytes:
        """Rank 0's ``text`` on every rank: its step's name and length, then the text itself."""
        header = torch.zeros(STEP_NAME_BYTES + LENGTH_BYTES, dtype=torch.uint8)
        if self.job.rank == 0:
            header[:STEP_NAME_BYTES] = _fixed_width(step)
            header[STEP_NAME_BYTES:] = torch.tensor(list(len(text).to_bytes(LENGTH_BYTES, "big")), dtype=torch.uint8)
        self.broadcast(header, control)
        raw = bytes(header.tolist())
        theirs = raw[:STEP_NAME_BYTES].rstrip(b"\0").decode("utf-8", "replace")
        if theirs != _fixed_width_text(step):
            raise RankError(
                self.job.rank, self.host, f"at {step}", f"rank 0 is at {theirs}: the ranks took different steps"
            )
        length = int.from_bytes(raw[STEP_NAME_BYTES:], "big")
        if length > MAX_DECISION_BYTES:
            raise RankError(self.job.rank, self.host, f"at {step}", f"a decision of {length} bytes is not rank 0's")
        payload = (
            torch.tensor(list(text), dtype=torch.uint8)
            if self.job.rank == 0
            else torch.zeros(length, dtype=torch.uint8)
        )
        self.broadcast(payload, control)
        return bytes(payload.tolist())

    @contextlib.contextmanager
    def _decision_group(self, timeout_s: float) -> Iterator[dist.ProcessGroup | None]:
        """The group a decision travels on: the kept one, else a small gloo group of its own."""
        if self.kept is not None:
            control = self.kept.control
            if not self.kept.made:
                with job_step("the job's process group"):
                    prefix, step = self.begin_launch()
                control = self.open_kept(self.kept, prefix, step, timeout_s)
            yield control
            return
        with job_step("a decision's process group"):
            prefix, step = self.begin_launch()
        try:
            dist.init_process_group(
                backend=GLOO.name,
                store=dist.PrefixStore(f"{prefix}pg/", self.store),
                rank=self.job.rank,
                world_size=self.job.world_size,
                timeout=datetime.timedelta(seconds=timeout_s),
            )
        except Exception as exc:
            raise self.missing(step, exc, timeout_s) from None
        try:
            self.joined(dist.group.WORLD, step)
            yield dist.group.WORLD
        finally:
            dist.destroy_process_group()


def _share_token(rank: int, control: dist.ProcessGroup | None) -> bytes:
    """Rank 0's new token, on every rank: sent over the group's connections, not the store."""
    token = (
        torch.tensor(list(new_token()), dtype=torch.uint8) if rank == 0 else torch.zeros(TOKEN_BYTES, dtype=torch.uint8)
    )
    dist.broadcast(token, src=0, group=control)
    return bytes(token.tolist())


def _ranks_text(shown: Sequence[int], count: int) -> str:
    """``rank 3``, ``ranks 1, 2 and 5``, ``ranks 1, 2, 3, 4, 5 and 11 more``."""
    if count == 1:
        return f"rank {shown[0]}"
    names = ", ".join(map(str, shown))
    if count > len(shown):
        return f"ranks {names} and {count - len(shown)} more"
    head, _, last = names.rpartition(", ")
    return f"ranks {head} and {last}"


def _step_of(row: bytes) -> str:
    """The step name in one rank's :func:`_fixed_width` row (its host after the NUL)."""
    return row.rstrip(b"\0").decode("utf-8", "replace").partition("\0")[0]


def _one_step_everywhere(mine: torch.Tensor, control: dist.ProcessGroup | None) -> bool:
    """Whether every rank of ``control`` is at the step in its row ``mine``: one MAX all-reduce of a
    56-bit digest of the step and of its negation (the largest and the smallest digest), two integers a
    rank. Gathering every rank's name to every rank was 3.8 MiB a rank and 115 ms of its CPU per step
    at 16,384 ranks; names are gathered only where the ranks differ, to say which rank is elsewhere."""
    digest = _step_digest(mine)
    both = torch.tensor([digest, -digest], dtype=torch.int64)
    dist.all_reduce(both, op=dist.ReduceOp.MAX, group=control)
    return int(both[0]) == -int(both[1])


def _step_digest(row: torch.Tensor) -> int:
    """56 bits of a digest of the step in a rank's :func:`_fixed_width` row (the same on every rank)."""
    step = _step_of(bytes(row.tolist())).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(step, digest_size=7).digest(), "big")


def _fixed_width(text: str) -> torch.Tensor:
    data = text.encode("utf-8")[:STEP_NAME_BYTES].ljust(STEP_NAME_BYTES, b"\0")
    return torch.tensor(list(data), dtype=torch.uint8)


def _fixed_width_text(text: str) -> str:
    """``text`` as another rank reads it from :func:`_fixed_width`."""
    return text.encode("utf-8")[:STEP_NAME_BYTES].decode("utf-8", "replace")


def _round_trip(value: Any, types_allowed: Sequence[type]) -> Any:
    """``value`` as the other ranks receive it (through JSON: tuples become lists)."""
    return decode(json.loads(json.dumps(encode(value))), types_allowed)


@functools.cache
def _sessions() -> dict[JobEnv, JobSession]:
    return {}


def job_session(job: JobEnv, timeout_s: float) -> JobSession:
    """This process's session of ``job``, opened once for the process's life (a second store could
    not bind the port while the first's socket lingers): ``timeout_s`` bounds joining its store."""
    sessions = _sessions()
    if job not in sessions:
        store, located = _open_store(job, timeout_s)
        sessions[job] = JobSession(located, store)
    return sessions[job]


def end_before_joining() -> None:
    """On rank 0 of an srun step or a Hydra job (MPICH's mpiexec) that is ending on an error of its own
    before it opened the job's store (a file it refused), say so where the other ranks wait for the
    store's address (:func:`rendezvous.publish_ended`): they end at once with its status instead of
    waiting out ``--timeout`` and then blaming the directory. Open MPI's mpirun and torchrun end a
    job's other ranks themselves when one fails."""
    job = detect_job()
    if job is None or job.rank != 0 or not job.rendezvous or job in _sessions():
        return
    if job.launcher == "srun":
        publish_ended(Path(job.rendezvous))
    elif (proxy := hydra_proxy_pid()) is not None:
        publish_ended(Path(job.rendezvous), proxy)


def agree(name: str, decide: Callable[[], T], *, timeout_s: float, types_allowed: Sequence[type] = ()) -> Any:
    """A decision the same on every rank: ``decide()`` runs on rank 0 of a launcher's job and the
    others receive its value (JSON, broadcast on the job's process group), within ``timeout_s``.

    Run on its own (no launcher), it is ``decide()``. Either way the value comes back as JSON makes
    it (tuples as lists; dataclasses of ``types_allowed``), so that every rank holds the same one.
    Raises RankError when rank 0's decision does not come (the ranks took different steps).
    """
    job = detect_job()
    if job is None or job.world_size == 1:
        return _round_trip(decide(), types_allowed)
    return job_session(job, timeout_s).agree(name, decide, timeout_s, types_allowed)


MEMBERSHIP_TIMEOUT_S = 300.0
"""How long every rank may take to join the group that gathers the membership when nothing else formed
one first (tune's default timeout: asked before its first step, by what plans it)."""


def job_membership(timeout_s: float = MEMBERSHIP_TIMEOUT_S) -> Membership | None:
    """Every rank's node in the launcher's job this process is a rank of; None when it runs on its own.

    Gathered with the job's first process group; asked before any group formed, it forms one now (the
    kept group of ``one_process_group``, else a small gloo group of its own), so every rank of the job
    must ask at the same point, as for any step.
    """
    job = detect_job()
    if job is None:
        return None
    if job.world_size == 1:
        return membership([this_host()])
    session = job_session(job, timeout_s)
    if session.membership is None:
        with session._decision_group(timeout_s):
            pass
    return session.membership
