"""Default rank count and rank placement (runtime/host/affinity.py), from fake masks and a fake /sys."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.runtime.host import affinity
from collbench.runtime.host.affinity import cgroup_cpu_limit, default_cpu_ranks, plan_placement, usable_cores


@pytest.mark.parametrize(("cores", "expected"), [(1, 2), (2, 2), (3, 3), (4, 4), (64, 4)])
def test_default_ranks_is_min_of_four_and_cores_at_least_two(cores: int, expected: int) -> None:
    assert default_cpu_ranks(cores) == expected


def test_usable_cores_reads_the_mask_and_rounds_a_quota_down() -> None:
    assert usable_cores((0, 1, 2, 3), None) == 4
    assert usable_cores((0, 1, 2, 3), 2.0) == 2
    assert usable_cores((0, 1, 2, 3), 1.5) == 1
    assert usable_cores((5,), 8.0) == 1
    assert usable_cores((0, 1), 0.2) == 1


def _fake_sys(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_cgroup_v2_quota(tmp_path: Path) -> None:
    root = _fake_sys(tmp_path, {"sys/fs/cgroup/cpu.max": "200000 100000\n"})
    assert cgroup_cpu_limit(root) == 2.0


def test_cgroup_v2_no_limit(tmp_path: Path) -> None:
    root = _fake_sys(tmp_path, {"sys/fs/cgroup/cpu.max": "max 100000\n"})
    assert cgroup_cpu_limit(root) is None


def test_cgroup_v1_quota_and_no_limit(tmp_path: Path) -> None:
    limited = _fake_sys(
        tmp_path / "a",
        {"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "150000\n", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"},
    )
    assert cgroup_cpu_limit(limited) == 1.5
    unlimited = _fake_sys(
        tmp_path / "b",
        {"sys/fs/cgroup/cpu/cpu.cfs_quota_us": "-1\n", "sys/fs/cgroup/cpu/cpu.cfs_period_us": "100000\n"},
    )
    assert cgroup_cpu_limit(unlimited) is None
    assert cgroup_cpu_limit(tmp_path / "nothing") is None


def test_placement_pins_each_rank_to_its_own_allowed_cpu() -> None:
    placement = plan_placement(3, cpus=(2, 5, 7, 9), cores=4)
    assert placement.cpus == (2, 5, 7)
    assert placement.warning == ""


def test_oversubscribed_placement_pins_nothing_and_says_so_in_one_line() -> None:
    placement = plan_placement(4, cpus=(0, 1), cores=2)
    assert placement.cpus == (None, None, None, None)
    assert "\n" not in placement.warning
    assert "4 ranks on 2 cores" in placement.warning
    assert "measure the scheduler too" in placement.warning


def test_a_quota_below_the_mask_counts_as_fewer_cores() -> None:
    assert plan_placement(2, cpus=(0, 1, 2, 3), cores=1).cpus == (None, None)


def test_gpu_ranks_are_not_pinned_here() -> None:
    assert affinity.rank_cpus(2, "nccl") == (None, None)


@pytest.mark.parametrize(
    ("asked", "realtime", "pinned"),
    [(None, True, True), (None, False, False), ("0", True, False), ("1", False, True), ("1", True, True)],
)
def test_cpu_ranks_are_pinned_when_they_run_real_time_unless_told(
    monkeypatch: pytest.MonkeyPatch, asked: str | None, realtime: bool, pinned: bool
) -> None:
    if asked is None:
        monkeypatch.delenv(affinity.PIN_ENV, raising=False)
    else:
        monkeypatch.setenv(affinity.PIN_ENV, asked)
    monkeypatch.setattr(affinity.rank_priority, "will_run_realtime", lambda backend: realtime)
    monkeypatch.setattr(affinity, "available_cpus", lambda: (3, 5))
    monkeypatch.setattr(affinity, "cgroup_cpu_limit", lambda: None)
    assert affinity.rank_cpus(2, "gloo") == ((3, 5) if pinned else (None, None))


def test_default_local_ranks_on_a_cpu_only_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(affinity, "usable_cores", lambda cpus=None, quota=None: 2)
    assert affinity.default_local_ranks("auto") == 2
    assert affinity.default_local_ranks("gloo") == 2
