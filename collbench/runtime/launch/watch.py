"""How the launcher of local ranks watches them, collects their results, and stops them.

A rank's failure is told apart from its peers noticing it: a rank that died, raised on its own or
hung is named before one whose collective broke because of it. What ranks send comes through the
signed store (:mod:`collbench.runtime.launch.rankstore`): a value that is not signed by a rank of this
run, or not well-formed, ends the run with one line naming it, and is never executed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Sequence
from multiprocessing.process import BaseProcess
from typing import Any

from collbench.errors import ConfigError, RankError
from collbench.runtime.host.environment import host_name
from collbench.runtime.launch.rankstore import SignedStore, StoreValueError

ProgressFn = Callable[[dict[str, Any]], None]
POLL_S = 0.1
GRACE_S = 3.0
"""After a rank fails, how long the others get to notice and report before they are terminated.

A peer's death is noticed at once (its sockets close); a hang at each rank's own timeout, which
started at about the same time. Short, so that ``--timeout`` bounds a run to within a few seconds.
"""


def stop_ranks(procs: Sequence[BaseProcess]) -> None:
    """Terminate the ranks still running (SIGTERM, then SIGKILL after 5 s) and reap them all."""
    started = [(proc, proc.pid) for proc in procs if proc.pid is not None]
    for proc, pid in started:
        if proc.is_alive():
            proc.terminate()
            # A stopped rank would hold its SIGTERM until continued, and cost the whole 5 s below.
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)
    for proc, _pid in started:
        proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
            proc.join()


def _is_stopped(pid: int) -> bool:
    """Whether a process is stopped (SIGSTOP, SIGTSTP, a debugger): state T or t in /proc (Linux)."""
    try:
        stat = open(f"/proc/{pid}/stat", encoding="ascii", errors="replace").read()  # noqa: SIM115
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] in ("T", "t")


def watch_ranks(
    procs: Sequence[BaseProcess],
    store: SignedStore,
    progress: ProgressFn | None,
    timeout_s: float,
    finished: Callable[[int], bool],
) -> set[int]:
    """Wait until every rank finished its step (``finished(rank)``: its result, or its error, came);
    after the first failure (a rank that exited: ranks stay up between steps), give the others a
    grace period, then return.

    A rank stopped for longer than the timeout counts as hung: its peers may be outside any
    collective (or all stopped), where no timeout of theirs would ever fire. Returns those ranks.
    """
    failed_at: float | None = None
    finished_at: float | None = None
    stopped_since: dict[int, float] = {}
    done: set[int] = set()
    seen = 0
    while True:
        seen = forward_events(store, seen, progress)
        done.update(rank for rank in range(len(procs)) if rank not in done and finished(rank))
        if len(done) == len(procs) or not any(p.is_alive() for p in procs):
            forward_events(store, seen, progress)
            return set()
        now = time.monotonic()
        for rank, proc in enumerate(procs):
            if proc.pid is not None and proc.is_alive() and _is_stopped(proc.pid):
                stopped_since.setdefault(rank, now)
            else:
                stopped_since.pop(rank, None)
        overdue = {rank for rank, since in stopped_since.items() if now - since > timeout_s}
        if overdue:
            return overdue
        if failed_at is None and any(p.exitcode is not None for p in procs):
            failed_at = now
        if finished_at is None and done:
            finished_at = now
        if failed_at is not None and now - failed_at > min(GRACE_S, timeout_s):
            return set()
        # Ranks that finish while another still runs: that one hangs outside any collective.
        if finished_at is not None and now - finished_at > timeout_s + GRACE_S:
            return set()
        time.sleep(POLL_S)


def forward_events(store: SignedStore, seen: int, progress: ProgressFn | None) -> int:
    """Hand rank 0's events after the first ``seen`` to ``progress``; the new count of events handled."""
    try:
        events = store.take("events")
    except StoreValueError as exc:
        raise RankError(
            0, host_name(), "reporting progress", f"its event {seen + 1} in the store was rejected: {exc}"
        ) from None
    for event in events:
        seen += 1
        if not isinstance(event, dict):
            raise RankError(0, host_name(), "reporting progress", f"its event {seen} in the store is not an object")
        if progress is not None:
            progress(event)
    return seen


def collect_results(
    procs: Sequence[BaseProcess], store: SignedStore, stopped: set[int], result_types: tuple[type, ...]
) -> list[Any]:
    """Each rank's result, or RankError for the rank that caused a failure."""
    results: list[Any] = []
    crashed: list[tuple[int, str]] = []
    own_errors: list[tuple[int, str, str]] = []
    user_errors: list[str] = []
    comm_errors: list[tuple[int, str, str]] = []
    hung: list[int] = []
    host = host_name()
    for rank, proc in enumerate(procs):
        try:
            record = store.latest(f"result/{rank}", result_types)
        except StoreValueError as exc:
            # A local writer of the store, not the rank: nothing of it was executed or kept.
            raise RankError(rank, host, "sending its result", f"the value in the store was rejected: {exc}") from None
        if record is not None:
            status = record.get("status") if isinstance(record, dict) else None
            if status not in ("ok", "error"):
                raise RankError(rank, host, "sending its result", "the value in the store is not a result record")
            if status == "ok":
                results.append(record.get("value"))
                continue
            problem, doing = str(record.get("problem", "?")), str(record.get("doing", "?"))
            if record.get("user") is True:
                # Input every rank finds wrong alike: one `error:` line and exit 2, as before the launch.
                user_errors.append(problem.split(": ", 1)[-1])
                results.append(None)
                continue
            (comm_errors if record.get("comm") is True else own_errors).append((rank, doing, problem))
        elif rank in stopped or proc.is_alive():
            hung.append(rank)
        else:
            crashed.append((rank, f"the process died (exit code {proc.exitcode})"))
        results.append(None)

    def doing_of(rank: int) -> str:
        try:
            doing = store.latest(f"doing/{rank}")
        except StoreValueError:
            return "(its status in the store was rejected)"
        return "starting" if doing is None else str(doing)

    if user_errors and not crashed and not own_errors:
        raise ConfigError(user_errors[0])
    if crashed:
        rank, problem = crashed[0]
        raise RankError(rank, host, doing_of(rank), problem)
    if own_errors:
        rank, doing, problem = own_errors[0]
        raise RankError(rank, host, doing, problem)
    if hung:
        rank = hung[0]
        why = "it was stopped (SIGSTOP or a debugger)" if rank in stopped else "it stopped answering (hung)"
        raise RankError(rank, host, doing_of(rank), f"{why} and was terminated")
    if comm_errors:
        rank, doing, problem = comm_errors[0]
        raise RankError(rank, host, doing, problem)
    return results
