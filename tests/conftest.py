"""Test-suite wide settings: every test runs in its own empty folder; GPU tests skip without CUDA; the
fixtures several test files share (``one_rank_gloo``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _in_own_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run each test in its own temporary folder: a command's default outputs (collbench-profile.yaml,
    collbench-sweep.jsonl, ...) land there, and nothing the user has in the folder they started
    pytest from (a profile the README's first line wrote, say) changes what a test sees."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _scheduler_kept() -> Iterator[None]:
    """Fail a test that leaves pytest's process under another scheduling policy: a gloo rank run in
    this process (a launcher's variables faked) puts every thread at SCHED_RR (rank_priority.py), and
    every process later forked, the tests of rank_priority's own included, would inherit it."""
    get = getattr(os, "sched_getscheduler", None)
    before = get(0) if get is not None else None
    yield
    after = get(0) if get is not None else None
    if after != before:
        from collbench.runtime.host.own_threads import own_threads

        for tid in own_threads():  # put them back, so that the tests after this one run as they should
            with contextlib.suppress(OSError):
                os.sched_setscheduler(tid, before, os.sched_param(0))
        pytest.fail(f"this test left pytest's threads under scheduling policy {after}, not {before}")


@pytest.fixture
def one_rank_gloo() -> Iterator[None]:
    """torch.distributed's default group of one gloo rank in this process (a HashStore: no port), for
    the test's life: what a sweep worker's code asks of its group, without starting ranks."""
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


# Folders whose every test starts processes (gloo ranks, mpirun, srun, network namespaces, Chromium):
# they are the suite's minutes, so they carry the `slow` marker (CI runs them as a second step;
# `python -m pytest -q` runs them with the rest). Slow tests elsewhere carry the marker themselves.
SLOW_FOLDERS = frozenset({"dist", "mpi", "slurm", "netns", "browser"})
_TESTS = Path(__file__).resolve().parent


def _mark_slow_folders(items: list[pytest.Item]) -> None:
    for item in items:
        try:
            folder = Path(item.path).resolve().relative_to(_TESTS).parts[0]
        except ValueError:
            continue
        if folder in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _mark_slow_folders(items)
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU; none here")
    for item in items:
        # The marker itself: ``"gpu" in item.keywords`` also matches any folder named gpu above the test
        # (a checkout in .../gpu skipped the whole suite).
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip_gpu)
