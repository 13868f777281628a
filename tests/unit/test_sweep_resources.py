"""The memory check before a sweep's ranks start counts the ranks the launcher's job has.

mpirun and srun set no WORLD_SIZE (Open MPI says OMPI_COMM_WORLD_SIZE and OMPI_COMM_WORLD_LOCAL_SIZE,
its documented per-process variables): the estimate must use the job's world and this host's ranks,
as the ranks will run them, not one rank of a world of one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.errors import ConfigError
from collbench.runtime.host import affinity
from collbench.runtime.sweep import memory, plan, run
from collbench.runtime.sweep.plan import SweepConfig

LAUNCHER_VARIABLES = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PMI_RANK", "PMI_SIZE",
    "SLURM_PROCID", "SLURM_STEP_ID", "SLURM_STEPID",
)  # fmt: skip


def _mpirun_rank(monkeypatch: pytest.MonkeyPatch, world: int, here: int) -> None:
    """This process as rank 0 of an Open MPI job of ``world`` ranks, ``here`` of them on this host."""
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "0")
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", str(world))
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", str(here))
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29555")


def _job(tmp_path: Path) -> plan.SweepJob:
    config = SweepConfig(
        world_size=None, backend="gloo", ops=("all-gather",), algos=("ring",), min_bytes=1 << 30, max_bytes=1 << 30,
        stream=tmp_path / "s.jsonl",
    )  # fmt: skip
    return plan.validate(config)


def test_the_estimate_counts_the_launchers_world_and_ranks_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _mpirun_rank(monkeypatch, world=64, here=2)
    job = _job(tmp_path)
    seen: list[tuple[int, int]] = []
    monkeypatch.setattr(memory, "host_memory", lambda: None)
    monkeypatch.setattr(memory, "check_host_memory", lambda job, here, world, available: seen.append((here, world)))
    run._check_resources(job, lambda text: None)
    assert seen == [(2, 64)]


def test_a_point_that_fits_one_rank_but_not_the_jobs_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _mpirun_rank(monkeypatch, world=64, here=2)
    job = _job(tmp_path)
    alone = memory.largest_point(job, 1, 1)
    in_job = memory.largest_point(job, 64, 2)
    assert alone is not None and in_job is not None
    # Room for one rank of a world of one (the old guess), far too little for 2 ranks of all-gather over 64.
    room = memory.RANK_BASE_BYTES * 2 + alone.total_bytes(1) + memory.LARGE_POINT_BYTES * 2
    assert room < memory.RANK_BASE_BYTES * 2 + in_job.total_bytes(2)
    monkeypatch.setattr(memory, "host_memory", lambda: memory.HostMemory(room, "cgroup memory.max"))
    with pytest.raises(ConfigError, match=r"^2 ranks need about .* of host memory for .*all-gather"):
        run._check_resources(job, lambda text: None)


@pytest.mark.parametrize(("here", "cores", "said"), [(3, 2, True), (2, 2, False), (8, 64, False)])
def test_a_launchers_ranks_beyond_this_hosts_cores_are_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, here: int, cores: int, said: bool
) -> None:
    """'torchrun --nproc-per-node 3 ... sweep' on 2 cores had every rank wait for a core, evenly
    enough that no point was marked stalled, and said nothing; a local sweep of 3 ranks says the line.
    The machine's cores count, not the rank's mask: mpirun binds each rank to one."""
    _mpirun_rank(monkeypatch, world=here * 4, here=here)
    job = _job(tmp_path)
    monkeypatch.setattr(memory, "host_memory", lambda: None)
    monkeypatch.setattr(
        run, "launched_oversubscribed", lambda local: affinity.launched_oversubscribed(local, cores=cores)
    )
    notes: list[str] = []
    run._check_resources(job, notes.append)
    expected = (
        f"{here} ranks on this host's {cores} cores: ranks wait for each other to be scheduled, so the results "
        f"measure the scheduler too (use at most {cores} ranks a host for numbers that measure the collective)"
    )
    assert notes == ([expected] if said else [])


def test_the_hosts_cores_are_the_machines_not_a_bound_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    # mpirun -np 2 binds each rank to one core: its mask holds 1 CPU of the machine's 2.
    monkeypatch.setattr(affinity.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    monkeypatch.setattr(affinity.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(affinity, "cgroup_cpu_limit", lambda: None)
    assert affinity.launched_oversubscribed(2) == ""
    assert affinity.launched_oversubscribed(3).startswith("3 ranks on this host's 2 cores: ")
