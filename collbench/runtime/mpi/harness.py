"""The C harness that measures an MPI library's own collectives (Open MPI's, MPICH's), built with the
library's compiler wrapper and cached, and the job that runs it.

Why a C program and not a Python binding: the timed loop is ``MPI_Wtime(); MPI_Allreduce(...);
MPI_Wtime()`` with nothing else in it, so a row's time is the library's, not an interpreter's
(benchmarks/README.md, "sweep --backend mpi", measures both against a bare C loop).

What is shared lives here: the one source (``csrc/mpi_harness.c``, which says how each forced algorithm
gets its own communicator), its cached build, and the job: rank 0 takes commands on its standard
input, which the launcher forwards to it, and answers on standard output, one ``@cb`` line each. What is
each library's lives beside it: Open MPI's tools, ``mpirun`` line and algorithm ids in
``ompi_tools.py`` and ``ompi_sweep.py``, MPICH's launcher and CVARs in ``mpich_sweep.py``. The harness is
built once per source and library under ``$COLLBENCH_CACHE_DIR`` (else ``$XDG_CACHE_HOME/collbench``,
else ``~/.cache/collbench``), in a folder per library (``ompi/``, ``mpich/``), as the CUDA kernels are.
"""

from __future__ import annotations

import hashlib
import os
import re
import selectors
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from collbench.errors import BackendUnavailableError, RankError, UserError
from collbench.fileio import csrc_dir

SOURCE = "mpi_harness.c"
STOP_GRACE_S = 10.0
"""How long the launcher gets to end its ranks after SIGTERM before it is killed."""
_STDERR_SHOWN = 600
"""Characters of the launcher's standard error a failure shows at most."""


def launcher_excerpt(text: str, limit: int) -> str:
    """A launcher's standard error on one line of at most about ``limit`` characters, whole where it fits.

    Past ``limit``, its first paragraph (up to a blank line; rules of dashes left out) and then its end:
    Open MPI's boxed messages say what broke in their first sentence ("There are not enough slots
    available ...") and spend the rest on advice, while a rank's own failure is said last. The end alone
    began mid-word in the advice and left the cause out.
    """
    whole = " ".join(text.split())
    if len(whole) <= limit:
        return whole
    paragraphs = (" ".join(w for w in part.split() if w.strip("-")) for part in re.split(r"\n\s*\n", text))
    first = next((p for p in paragraphs if p), "")
    head = first if len(first) <= limit // 2 else first[: limit // 2].rsplit(" ", 1)[0]
    tail = whole[-(limit - len(head)) :]
    # The end from a word's start, not from the middle of one.
    tail = tail.split(" ", 1)[1] if " " in tail and not whole.endswith(" " + tail) else tail
    return f"{head} ... {tail}"


def cache_root() -> Path:
    """``$COLLBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/collbench``, else ``~/.cache/collbench``."""
    root = os.environ.get("COLLBENCH_CACHE_DIR")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "collbench"


def build_with(mpicc: str, wrapped: str, cache: str, library: str, note: Callable[[str], None]) -> Path:
    """The harness built by ``mpicc`` (the wrapper of ``library``), cached under ``cache`` by this source
    and ``wrapped`` (what names the MPI the wrapper compiles for: a new one gets a new build)."""
    source = csrc_dir() / SOURCE
    digest = hashlib.sha256(source.read_bytes() + wrapped.encode()).hexdigest()[:16]
    built = cache_root() / cache / f"mpi_harness-{digest}"
    if built.is_file() and os.access(built, os.X_OK):
        return built
    note(f"building the {library} harness with {mpicc} (once, cached in {built.parent})")
    try:
        built.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"{built.parent}: cannot create the cache directory ({exc.strerror or exc})") from None
    tmp = built.with_name(f".{built.name}.{os.getpid()}.tmp")
    cmd = [mpicc, "-O2", "-std=gnu11", "-Wall", "-o", str(tmp), str(source), "-ldl"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"could not run {mpicc}: {exc}") from None
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        said = next((line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip()[:200])
        # A wrapper whose compiler is gone may fail without a word: still say how it ended.
        first = said or f"it ended with exit code {done.returncode} and printed nothing"
        raise UserError(f"{mpicc} failed to build {SOURCE}: {first}")
    # Whole or not at all: another sweep building the same harness at once replaces it with the same file.
    os.replace(tmp, built)
    return built


@dataclass(frozen=True, slots=True)
class HarnessVariant:
    """One communicator of the job: a collective with its algorithm (0: the library's own) and segment size."""

    collective: str
    algorithm_id: int
    segment_bytes: int

    def argument(self) -> str:
        return f"{self.collective}:{self.algorithm_id}:{self.segment_bytes}"


@dataclass(frozen=True, slots=True)
class Prepared:
    """A point's untimed call: the library's error (0: none), wrong elements over ranks (-1: not checked)."""

    error_code: int
    wrong: int
    ran: str
    """The ``ompi_coll_base_*`` function that ran, where the observing shim is preloaded; else ``-``."""
    error_text: str


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What the started job says about itself."""

    version: str
    """The library's version (``4.1.4``, ``4.0.2``)."""
    nodes: int
    realtime: bool
    """Whether every rank measures at real-time priority (``csrc/mpi_harness.c``, REALTIME)."""


class HarnessJob:
    """A running harness under the library's launcher (``cmd[0]``): commands in, answers out, each within
    ``timeout_s``."""

    def __init__(self, cmd: list[str], timeout_s: float, env: dict[str, str]) -> None:
        """``env``: the job's whole environment, as the library's sweep sets it (what would change its own
        choice in the ``native`` rows removed, what forces an algorithm set)."""
        self.timeout_s = timeout_s
        self.launcher = Path(cmd[0]).name
        self.doing = f"starting {self.launcher}"
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        try:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env, bufsize=0
            )
        except OSError as exc:
            self._stderr.close()
            raise BackendUnavailableError(f"{cmd[0]} could not start: {exc}") from None
        assert self._proc.stdout is not None and self._proc.stdin is not None
        self._out: IO[bytes] = self._proc.stdout
        self._in: IO[bytes] = self._proc.stdin
        self._pending = b""
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._out, selectors.EVENT_READ)

    def __enter__(self) -> HarnessJob:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> JobFacts:
        """The job's first answer: the library's version and how many nodes its ranks are on."""
        self.doing = "starting the ranks and making a communicator per algorithm"
        fields = self._answer("H").split()
        if len(fields) != 3 or not fields[1].isdigit():
            raise self._failure(f"the harness said {' '.join(fields)!r} at start")
        return JobFacts(fields[0], int(fields[1]), fields[2] == "1")

    def prepare(self, variant: int, count: int, in_place: bool, warmup: int, check: bool, doing: str) -> Prepared:
        """Fill, run once, check, then ``warmup`` untimed calls of variant ``variant`` on ``count`` elements."""
        self.doing = doing
        self._send(f"P {variant} {count} {int(in_place)} {warmup} {int(check)}")
        fields = self._answer("P").split(" ", 3)
        if len(fields) < 3:
            raise self._failure(f"the harness answered {' '.join(fields)!r}")
        return Prepared(int(fields[0]), int(fields[1]), fields[2], fields[3].strip() if len(fields) > 3 else "")

    def time(self, iters: int) -> list[float]:
        """Microseconds of each of ``iters`` calls, each the slowest rank's."""
        self._send(f"T {iters}")
        samples = [float(v) for v in self._answer("T").split()]
        if len(samples) != iters:
            raise self._failure(f"asked for {iters} timed calls, the harness gave {len(samples)}")
        return samples

    def close(self) -> None:
        """Ask the ranks to finish, then make sure the launcher is gone (killed after the timeout)."""
        if self._proc.poll() is None:
            try:
                self._in.write(b"Q\n")
                self._in.close()
            except OSError:
                pass  # the launcher already gone: nothing to ask
            try:
                self._proc.wait(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                self._stop()
        self._selector.close()
        self._out.close()
        self._stderr.close()

    def _stop(self) -> None:
        """End the job: SIGTERM to the launcher, which ends its ranks and removes its session files (Open
        MPI's mpirun its ``/tmp/ompi.<host>.<uid>/pid.<pid>``); SIGKILL only after a grace period. Killed
        outright, a launcher leaves those behind, and its ranks run on (spinning, where a peer hangs) until
        they notice their local server is gone."""
        self._proc.terminate()
        try:
            self._proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def _send(self, line: str) -> None:
        try:
            self._in.write(line.encode() + b"\n")
            self._in.flush()
        except OSError:
            raise self._failure(f"{self.launcher} stopped taking commands") from None

    def _answer(self, kind: str) -> str:
        """The rest of the next ``@cb <kind>`` line; other lines (the library's own output) are skipped."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            line = self._line(deadline)
            if not line.startswith("@cb "):
                continue
            head, _, rest = line[4:].partition(" ")
            if head == "E":
                raise self._failure(rest)
            if head == kind:
                return rest

    def _line(self, deadline: float) -> str:
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not self._selector.select(timeout=left):
                self._stop()
                raise self._failure(f"no answer within {self.timeout_s:g} s (--timeout)")
            chunk = os.read(self._out.fileno(), 1 << 20)
            if not chunk:
                self._proc.wait()
                raise self._failure(f"{self.launcher} ended (exit code {self._proc.returncode})")
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode(errors="replace").strip()

    def _failure(self, problem: str) -> RankError:
        self._stderr.seek(0)
        said = launcher_excerpt(self._stderr.read().decode(errors="replace"), _STDERR_SHOWN)
        said_line = f"; {self.launcher} said: {said}" if said else ""
        return RankError(0, socket.gethostname(), self.doing, problem + said_line)


def realtime_ranks(world_size: int) -> bool:
    """Whether the harness's ranks should measure at ``SCHED_RR`` 1: as gloo ranks do
    (``COLLBENCH_REALTIME``, permitted), and only with a core per rank: an MPI library's ranks spin while they
    wait, and two real-time spinners on one core would each wait out the other's 100 ms quantum."""
    from collbench.runtime.host.affinity import cgroup_cpu_limit, usable_cores
    from collbench.runtime.host.rank_priority import ENV, permitted
    from collbench.runtime.host.switches import env_switch

    return env_switch(ENV) is not False and world_size <= usable_cores(quota=cgroup_cpu_limit()) and permitted()
