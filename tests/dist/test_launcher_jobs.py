"""collbench joins jobs that other launchers started: Open MPI's mpirun (the real one), srun (its
variables set as srun sets them, srun(1) "OUTPUT ENVIRONMENT VARIABLES"), and torchrun-style jobs for
``discover --probe``. Rows measured under a launcher equal those of the same sweep collbench starts
itself, and every result is checked."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from launcher_env import clean_env, free_port, torchrun_env
from synthetic_rows import point_row

from collbench.results.io import read_jsonl, write_rows
from collbench.results.row import ResultRow

pytestmark = pytest.mark.dist

SWEEP = ["sweep", "--backend", "gloo", "--op", "all-reduce,all-gather", "--algo", "ring,native"]
SWEEP += ["-b", "1K", "-e", "16K", "-f", "4", "-n", "3", "-w", "1", "--both", "--timeout", "60", "--format", "json"]
JOB_S = 240.0


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "collbench.cli.app", *args]


def _start(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    """One task of a launcher-less job, its output captured."""
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)


def _finish(procs: list[subprocess.Popen[str]]) -> list[tuple[str, str]]:
    """Every task's (stdout, stderr), each task having exited 0."""
    outputs = [p.communicate(timeout=JOB_S) for p in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out + err
    return outputs


def _per_rank_output(argv: list[str]) -> list[str]:
    """``argv`` with each rank's stdout sent to ``out.<rank>`` in the working directory.

    Open MPI 4.1's mpirun can drop the tail of a rank's output that reaches it just before the job
    ends (seen here with collbench's JSON on stdout: the rank wrote all of it, mpirun forwarded only
    the first 12-16 KiB), so what each rank printed is read from its own file instead.
    """
    return ["sh", "-c", 'exec "$@" > "out.$OMPI_COMM_WORLD_RANK"', "rank", *argv]


def _points(rows: list[ResultRow]) -> list[tuple[object, ...]]:
    return sorted((r.op, r.algo, r.world_size, r.dtype, r.in_place, r.size_bytes, r.count, r.iters) for r in rows)


def _reference(tmp_path: Path) -> list[ResultRow]:
    stream = tmp_path / "own.jsonl"
    done = subprocess.run(
        _cli(*SWEEP, "--ranks", "2", "--stream", str(stream)),
        env=clean_env(), capture_output=True, text=True, timeout=JOB_S, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return list(read_jsonl(stream))


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed (.ci/run installs it)")
def test_a_sweep_under_mpirun_measures_the_rows_collbench_measures_itself(tmp_path: Path) -> None:
    stream = tmp_path / "mpi.jsonl"
    mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
    done = subprocess.run(
        [*mpirun, *_per_rank_output(_cli(*SWEEP, "--stream", str(stream)))],
        env=clean_env(MASTER_PORT=str(free_port())), capture_output=True, text=True, timeout=JOB_S, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = list(read_jsonl(stream))
    # Rank 0 alone wrote and printed: one stream of rows, and one JSON document on its stdout.
    printed = json.loads((tmp_path / "out.0").read_text())
    assert len(printed) == len(rows)
    assert (tmp_path / "out.1").read_text() == ""
    assert rows and all(r.wrong == 0 and r.world_size == 2 for r in rows)
    assert _points(rows) == _points(_reference(tmp_path))


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed (.ci/run installs it)")
def test_tune_under_mpirun_writes_one_profile_from_rank_0(tmp_path: Path) -> None:
    mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"]
    tune = ["tune", "--quick", "--backend", "gloo", "--timeout", "60", "-O", "p.yaml"]
    done = subprocess.run(
        [*mpirun, *_per_rank_output(_cli(*tune))],
        env=clean_env(MASTER_PORT=str(free_port())), capture_output=True, text=True, timeout=JOB_S, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    from collbench.profile.document import Profile

    profile = Profile.load(tmp_path / "p.yaml")
    assert profile.world_size == 2 and profile.rules
    assert "profile:" in (tmp_path / "out.0").read_text()
    assert (tmp_path / "out.1").read_text() == ""  # rank 0 alone reported
    rows = list(read_jsonl(tmp_path / "p-results.jsonl"))
    assert rows and all(r.wrong == 0 and r.world_size == 2 for r in rows)


MPI_LAUNCHERS = {
    "open-mpi": ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2"],
    "mpich": ["mpiexec.mpich", "-n", "2"],
}


@pytest.mark.parametrize("launcher", sorted(MPI_LAUNCHERS))
def test_two_mpirun_jobs_at_once_without_master_port_each_meet_at_their_own_store(
    tmp_path: Path, launcher: str
) -> None:
    # Without MASTER_PORT, MPICH's jobs all took port 29500 (the second could not listen, or its
    # ranks joined the first's store) and Open MPI's one in 1,000 derived from the job id: now rank 0
    # binds a free port and publishes it in the working directory, named after its job.
    argv = MPI_LAUNCHERS[launcher]
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed (.ci/run installs Open MPI and MPICH)")
    sweep = _cli(*SWEEP, "--op", "all-reduce", "--algo", "ring", "-e", "4K", "--stream", "rows.jsonl")
    procs = []
    for job in ("a", "b"):
        (tmp_path / job).mkdir()
        procs.append(_start([*argv, *sweep], clean_env(), tmp_path / job))
    for proc in procs:
        out, err = proc.communicate(timeout=JOB_S)
        assert proc.returncode == 0, out + err
    for job in ("a", "b"):
        rows = list(read_jsonl(tmp_path / job / "rows.jsonl"))
        assert rows and all(r.wrong == 0 and r.world_size == 2 for r in rows)
        # Rank 0 withdrew its address once both ranks had joined.
        assert not list((tmp_path / job).glob(".collbench-store-*"))


@pytest.mark.parametrize("launcher", sorted(MPI_LAUNCHERS))
def test_a_rank_0_that_refuses_its_stream_ends_the_job_in_its_one_line(tmp_path: Path, launcher: str) -> None:
    # Hydra leaves the other ranks running when rank 0 exits with an error: rank 1 waited the whole
    # --timeout for a store rank 0 never started, then said 'rank 0 published no store address in ...
    # (it did not start, or the directory is not shared ...)'. Rank 0 now says in the file that it ended.
    argv = MPI_LAUNCHERS[launcher]
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed (.ci/run installs Open MPI and MPICH)")
    write_rows(tmp_path / "rows.jsonl", [point_row("ring", 1024, 50.0)])  # an earlier sweep's row
    sweep = _cli(*SWEEP, "--op", "all-reduce", "--algo", "ring", "-e", "1K", "--timeout", "200")
    done = subprocess.run(
        [*argv, *sweep, "--stream", "rows.jsonl"], env=clean_env(), capture_output=True, text=True, timeout=JOB_S,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode != 0
    said = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("error")]
    assert len(said) == 1 and "rows.jsonl holds 1 measured row;" in said[0], done.stdout + done.stderr


def _srun_task(task: int, job_id: str, submit: Path) -> dict[str, str]:
    """What srun sets for one of 2 tasks on 2 nodes (both nodes are this host here); no MASTER_*."""
    return clean_env(
        SLURM_JOB_ID=job_id, SLURM_STEP_ID="0", SLURM_PROCID=str(task), SLURM_NTASKS="2",
        SLURM_STEP_NUM_TASKS="2", SLURM_LOCALID="0", SLURM_NODEID=str(task), SLURM_STEP_TASKS_PER_NODE="1(x2)",
        # Task 0 runs on the list's second host: nothing may take the first for its store.
        SLURM_JOB_NODELIST="elsewhere,vm", SLURM_STEP_NODELIST="elsewhere,vm", SLURM_SUBMIT_DIR=str(submit),
    )  # fmt: skip


def test_a_sweep_under_srun_joins_where_task_0_published_its_store(tmp_path: Path) -> None:
    stream = tmp_path / "srun.jsonl"
    procs = [
        _start(_cli(*SWEEP, "--stream", str(stream)), _srun_task(task, "1234", tmp_path), tmp_path) for task in (1, 0)
    ]
    outputs = _finish(procs)
    assert outputs[0][0] == ""  # task 1 printed nothing: rank 0 alone reports
    rows = list(read_jsonl(stream))
    assert rows and all(r.wrong == 0 and r.world_size == 2 for r in rows)
    assert _points(rows) == _points(_reference(tmp_path))
    # Task 0 withdrew its address once both tasks had joined.
    assert not list(tmp_path.glob(".collbench-store-*"))


def test_two_srun_jobs_whose_derived_ports_were_one_both_run(tmp_path: Path) -> None:
    # 29500 + crc32(job.step) % 1000 was 30083 for both jobs 1061 and 1084: the second could not listen.
    import zlib

    assert zlib.crc32(b"1061.0") % 1000 == zlib.crc32(b"1084.0") % 1000
    argv = _cli(*SWEEP, "--op", "all-reduce", "--algo", "ring", "-e", "1K")
    procs = []
    for job_id in ("1061", "1084"):
        folder = tmp_path / job_id
        folder.mkdir()
        procs += [
            _start([*argv, "--stream", "rows.jsonl"], _srun_task(task, job_id, tmp_path), folder) for task in (0, 1)
        ]
    _finish(procs)
    for job_id in ("1061", "1084"):
        rows = list(read_jsonl(tmp_path / job_id / "rows.jsonl"))
        assert rows and all(r.wrong == 0 and r.world_size == 2 for r in rows)
    assert not list(tmp_path.glob(".collbench-store-*"))


def test_discover_probe_joins_a_torchrun_job_without_ranks_and_only_rank_0_writes(tmp_path: Path) -> None:
    # Three ranks: not the number of CPU ranks discover would describe here, which once contradicted.
    n, port = 3, free_port()
    procs = []
    for rank in range(n):
        cwd = tmp_path / f"rank{rank}"
        cwd.mkdir()
        env = torchrun_env(rank, n, port)
        # No --timeout: the probe's own default, which grows with the rounds (runtime/probe.py).
        procs.append(_start(_cli("discover", "--probe", "-O", "measured.yaml"), env, cwd))
    outputs = _finish(procs)
    # The measurements went to rank 0 alone: the others have nothing to print.
    assert outputs[1][0] == "" and outputs[2][0] == ""
    assert (tmp_path / "rank0" / "measured.yaml").exists()
    assert not (tmp_path / "rank1" / "measured.yaml").exists() and not (tmp_path / "rank2" / "measured.yaml").exists()
    from collbench.topology.io import load_topology

    topo = load_topology(tmp_path / "rank0" / "measured.yaml")
    assert topo.source == "probe"
    assert len([link for link in topo.links if link.source == "measured"]) == n * (n - 1) // 2
