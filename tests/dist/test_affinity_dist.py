"""Local CPU ranks run each on a core of its own where they run at real-time priority (the default
where permitted), or when asked; otherwise, and with more ranks than cores, they are not pinned, and
the latter says so."""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch

from collbench.runtime.host.affinity import PIN_ENV, available_cpus
from collbench.runtime.launch.ranks import RankContext, launch
from collbench.runtime.host.rank_priority import ENV as REALTIME_ENV
from collbench.runtime.host.rank_priority import permitted

pytestmark = pytest.mark.dist


def _where(ctx: RankContext, _payload: None) -> tuple[int, list[int], int]:
    """What the rank sees of itself, read inside the rank after the launcher's setup: its CPUs (the
    union over every thread's mask, each of which must be the same), and its intra-op threads."""
    masks = {tuple(sorted(os.sched_getaffinity(int(tid)))) for tid in os.listdir("/proc/self/task")}
    assert len(masks) == 1, f"threads of rank {ctx.rank} have different masks: {sorted(masks)}"
    return ctx.rank, list(next(iter(masks))), torch.get_num_threads()


@pytest.mark.skipif(len(available_cpus()) < 2, reason="pinning two ranks needs two cores")
def test_each_rank_is_pinned_to_its_own_core_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PIN_ENV, "1")
    notes: list[dict[str, Any]] = []
    results = launch(2, _where, None, backend="gloo", timeout_s=60.0, progress=notes.append)
    cpus = available_cpus()
    assert [r[0] for r in results] == [0, 1]
    assert results[0][1] == [cpus[0]]
    assert results[1][1] == [cpus[1]]
    # One core each: more intra-op threads would only contend for it.
    assert [r[2] for r in results] == [1, 1]
    assert not any("scheduler" in str(n.get("text")) for n in notes)


@pytest.mark.skipif(len(available_cpus()) < 2 or not permitted(), reason="two real-time ranks on two cores")
def test_real_time_ranks_are_pinned_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PIN_ENV, raising=False)
    monkeypatch.delenv(REALTIME_ENV, raising=False)
    cpus = available_cpus()
    results = launch(2, _where, None, backend="gloo", timeout_s=60.0)
    assert [r[1] for r in results] == [[cpus[0]], [cpus[1]]]


@pytest.mark.skipif(len(available_cpus()) < 2, reason="two ranks on two cores")
def test_ranks_under_the_normal_scheduler_or_told_not_to_are_not_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PIN_ENV, raising=False)
    monkeypatch.setenv(REALTIME_ENV, "0")
    results = launch(2, _where, None, backend="gloo", timeout_s=60.0)
    assert all(r[1] == list(available_cpus()) for r in results)
    monkeypatch.delenv(REALTIME_ENV)
    monkeypatch.setenv(PIN_ENV, "0")
    results = launch(2, _where, None, backend="gloo", timeout_s=60.0)
    assert all(r[1] == list(available_cpus()) for r in results)


def test_more_ranks_than_cores_run_unpinned_with_one_line() -> None:
    cpus = available_cpus()
    notes: list[dict[str, Any]] = []
    world = len(cpus) + 1
    results = launch(world, _where, None, backend="gloo", timeout_s=60.0, progress=notes.append)
    assert all(r[1] == list(cpus) for r in results)
    lines = [n["text"] for n in notes if n.get("kind") == "note"]
    assert len(lines) == 1
    cores = f"{len(cpus)} core" + ("" if len(cpus) == 1 else "s")
    assert f"{world} ranks on {cores}: " in lines[0]
    assert "measure the scheduler too" in lines[0]
