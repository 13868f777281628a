"""CPU ranks run their threads at real-time priority (SCHED_RR 1) where the OS allows it, and nothing
changes where it does not.

The contract is Linux's (sched(7)): SCHED_RR needs CAP_SYS_NICE or an RLIMIT_RTPRIO at least as high
as the priority; a thread inherits its creator's policy. Each case runs in a child process, so the
test process's own threads are never changed; the unprivileged cases drop to user nobody there.
"""

from __future__ import annotations

import os
import resource
import threading
from collections.abc import Callable

import pytest

from collbench.runtime.host import rank_priority
from collbench.runtime.host.rank_priority import ENV, permitted, realtime_rank, unheld_hint

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_RR"), reason="Linux scheduling policies")

NOBODY = 65534


def _policies() -> set[int]:
    return {os.sched_getscheduler(int(tid)) for tid in os.listdir("/proc/self/task")}


def _in_child(body: Callable[[], object]) -> object:
    """``body()``'s result, computed in a forked child (whose scheduling the test may change)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(read)
        try:
            text = repr(body())
        except BaseException as exc:  # reported to the parent
            text = repr(("raised", type(exc).__name__, str(exc)))
        os.write(write, text.encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    import ast

    return ast.literal_eval(b"".join(chunks).decode())


def _started_thread_policy() -> int:
    seen: list[int] = []
    thread = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(0)))
    thread.start()
    thread.join()
    return seen[0]


def _as_nobody(rtprio: int) -> None:
    resource.setrlimit(resource.RLIMIT_RTPRIO, (rtprio, rtprio))
    os.setgid(NOBODY)
    os.setuid(NOBODY)  # drops CAP_SYS_NICE with every other capability


def _gloo_rank() -> tuple[bool, list[int], int]:
    threading.Thread(target=threading.Event().wait, args=(5,), daemon=True).start()  # a thread from before
    done = realtime_rank("gloo")
    return done, sorted(_policies()), _started_thread_policy()


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="changing user and limits needs root")


@pytest.fixture(autouse=True)
def _on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)


@pytest.mark.skipif(not permitted(), reason="real-time priority not permitted here")
def test_every_thread_of_a_gloo_rank_and_every_later_one_run_round_robin() -> None:
    done, policies, later = _in_child(_gloo_rank)  # type: ignore[misc]
    assert done is True
    assert policies == [os.SCHED_RR]
    assert later == os.SCHED_RR


_HARD_RTPRIO = resource.getrlimit(resource.RLIMIT_RTPRIO)[1]


@needs_root
@pytest.mark.skipif(
    _HARD_RTPRIO != resource.RLIM_INFINITY and _HARD_RTPRIO < 1, reason="the hard RLIMIT_RTPRIO here is 0"
)
def test_with_rlimit_rtprio_an_unprivileged_rank_gets_it_too() -> None:
    def body() -> tuple[bool, list[int], int, bool, str]:
        _as_nobody(1)
        return (*_gloo_rank(), permitted(), unheld_hint())

    done, policies, later, allowed, hint = _in_child(body)  # type: ignore[misc]
    assert (done, policies, later, allowed, hint) == (True, [os.SCHED_RR], os.SCHED_RR, True, "")


def test_an_rlimit_rtprio_of_one_is_read_as_permission(monkeypatch: pytest.MonkeyPatch) -> None:
    # sched(7): an unprivileged thread may set a real-time policy up to its RLIMIT_RTPRIO soft limit.
    monkeypatch.setattr(rank_priority.resource, "getrlimit", lambda which: (1, 1))
    monkeypatch.setattr(rank_priority.os, "sched_setscheduler", _refused)
    assert permitted() is True
    monkeypatch.setattr(rank_priority.resource, "getrlimit", lambda which: (0, 0))
    assert permitted() is False


def _refused(*_args: object) -> None:
    raise PermissionError(1, "Operation not permitted")


@needs_root
def test_without_permission_nothing_changes_and_the_stall_summary_says_why() -> None:
    def body() -> tuple[bool, list[int], int, bool, str]:
        _as_nobody(0)
        return (*_gloo_rank(), permitted(), unheld_hint())

    done, policies, later, allowed, hint = _in_child(body)  # type: ignore[misc]
    assert (done, policies, later, allowed) == (False, [os.SCHED_OTHER], os.SCHED_OTHER, False)
    assert hint.startswith("rank threads ran under the normal scheduler") and "ulimit -r" in hint
    assert ENV in hint and "\n" not in hint


def test_nccl_ranks_and_a_run_switched_off_stay_normal(monkeypatch: pytest.MonkeyPatch) -> None:
    def nccl() -> tuple[bool, list[int]]:
        return realtime_rank("nccl"), sorted(_policies())

    assert _in_child(nccl) == (False, [os.SCHED_OTHER])
    monkeypatch.setenv(ENV, "Off")
    assert _in_child(_gloo_rank)[:2] == (False, [os.SCHED_OTHER])  # type: ignore[index]
    # A stall summary then says why, in one line; pinned too, it says that as well.
    assert unheld_hint().startswith(f"rank threads ran under the normal scheduler ({ENV}=0)")
    monkeypatch.setenv("COLLBENCH_PIN_RANKS", "1")
    assert "its threads queue for that core" in unheld_hint() and "\n" not in unheld_hint()


def test_a_thread_that_ends_while_it_is_being_changed_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    if not permitted():
        pytest.skip("real-time priority not permitted here")

    def body() -> tuple[bool, list[int]]:
        real = os.listdir
        with monkeypatch.context() as patch:
            patch.setattr(rank_priority.os, "listdir", lambda path: [*real(path), "999999999"])
            done = realtime_rank("gloo")
        return done, sorted(_policies())

    assert _in_child(body) == (True, [os.SCHED_RR])
