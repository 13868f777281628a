"""A local gloo rank's threads, gloo's own included, run at real-time priority while it measures."""

from __future__ import annotations

import os

import pytest

from collbench.runtime.launch.ranks import RankContext, launch
from collbench.runtime.host.rank_priority import ENV, PRIORITY, permitted

pytestmark = [
    pytest.mark.dist,
    pytest.mark.skipif(not hasattr(os, "SCHED_RR") or not permitted(), reason="real-time priority not permitted"),
]


def _threads(ctx: RankContext, _payload: None) -> list[tuple[str, int, int]]:
    """(name, policy, priority) of every thread of the rank, read after it joined its process group."""
    out = []
    for tid in sorted(os.listdir("/proc/self/task")):
        with open(f"/proc/self/task/{tid}/comm") as comm:
            name = comm.read().strip()
        out.append((name, os.sched_getscheduler(int(tid)), os.sched_getparam(int(tid)).sched_priority))
    return out


def test_every_thread_of_a_gloo_rank_runs_round_robin_at_the_lowest_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    results = launch(2, _threads, None, backend="gloo", timeout_s=60.0)
    for threads in results:
        names = [name for name, _, _ in threads]
        assert any(name.startswith("gloo") or name.startswith("pt_gloo") for name in names), names
        assert {(policy, prio) for _, policy, prio in threads} == {(os.SCHED_RR, PRIORITY)}, threads


def test_switched_off_they_run_under_the_normal_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "0")
    results = launch(2, _threads, None, backend="gloo", timeout_s=60.0)
    assert {policy for threads in results for _, policy, _ in threads} == {os.SCHED_OTHER}
