"""Under a launcher, an error the command line alone decides (argv is the same on every rank) is said
by rank 0 alone: every rank said it, 2 lines on 2 ranks and 16,000 on a large job. An error that may
differ by rank or node (a file missing on one node) is still said by every rank that finds it.

The variables are those each launcher documents for a rank: torchrun (torch/distributed/run.py: RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), Open MPI's mpirun (OMPI_COMM_WORLD_RANK,
OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE), MPICH's Hydra (PMI_RANK,
PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS) and srun (SLURM_PROCID, SLURM_STEP_ID,
SLURM_STEP_NUM_TASKS, SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE: slurm.schedmd.com/srun.html)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import write_rows
from collbench.runtime.host import rank_priority
from collbench.runtime.launch.launchers import launched_rank
from tests.launcher_env import LAUNCHER_NAMES, LAUNCHER_PREFIXES, torchrun_job
from tests.synthetic_rows import point_row


def _launcher_env(launcher: str, rank: int) -> dict[str, str]:
    """What ``launcher`` sets for ``rank`` of a 2-rank job on one host."""
    r = str(rank)
    if launcher == "torchrun":
        return {"RANK": r, "WORLD_SIZE": "2", "LOCAL_RANK": r, "LOCAL_WORLD_SIZE": "2",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"}  # fmt: skip
    if launcher == "mpirun":
        return {"OMPI_COMM_WORLD_RANK": r, "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": r,
                "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}  # fmt: skip
    if launcher == "hydra":
        return {"PMI_RANK": r, "PMI_SIZE": "2", "MPI_LOCALRANKID": r, "MPI_LOCALNRANKS": "2"}
    return {"SLURM_PROCID": r, "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_NTASKS": "2",
            "SLURM_LOCALID": r, "SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_NODEID": "0"}  # fmt: skip


LAUNCHERS = ["torchrun", "mpirun", "hydra", "srun"]


@pytest.fixture(autouse=True)
def _no_outer_launcher(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # pytest itself may run under srun: only the variables a test sets may say which rank this is.
    for name in list(os.environ):
        if name.startswith(LAUNCHER_PREFIXES) or name in LAUNCHER_NAMES:
            monkeypatch.delenv(name)
    # These ranks run in pytest's own process: a refusal made after the rank's start would leave
    # pytest's threads, and every process it later forks, at SCHED_RR (rank_priority.realtime_rank).
    monkeypatch.setenv(rank_priority.ENV, "0")
    monkeypatch.chdir(tmp_path)


def _run(args: list[str], env: dict[str, str]) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, args, env=env)
    return result.exit_code, [line for line in result.output.splitlines() if line.strip()]


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_rank_is_read_as_each_launcher_sets_it(launcher: str) -> None:
    assert launched_rank(_launcher_env(launcher, 1)) == 1
    assert launched_rank(_launcher_env(launcher, 0)) == 0
    assert launched_rank({}) is None
    # An salloc shell carries SLURM_PROCID without a step: no job of srun's.
    assert launched_rank({"SLURM_PROCID": "1"}) is None


MISTAKES = [
    pytest.param(["sweep", "--bogus"], "No such option: --bogus", id="typer-usage"),
    pytest.param(["sweep", "-b", "0"], "sizes must be at least 1 byte", id="out-of-range"),
    pytest.param(["sweep", "--op", "bogus"], "unknown op 'bogus'", id="unknown-name"),
    pytest.param(["sweep", "-o", "r.jsonl"], "to write results use -O/--output", id="cli-check"),
    pytest.param(["sweep", "--ranks", "2"], "world size is", id="ranks-under-launcher"),
    # The registry says which ops an algorithm does, alike on every rank: 'mpirun -np 3 collbench sweep
    # --op reduce --algo recursive-doubling' said it 3 times.
    pytest.param(
        ["sweep", "--op", "reduce", "--algo", "recursive-doubling"], "does none of the ops asked", id="algo-for-no-op"
    ),
    pytest.param(["tune", "--quick", "--ranks", "4"], "--ranks 4 contradicts", id="tune-ranks-under-launcher"),
    # 'srun -n 2 collbench discover --probe --ranks 3' said it once a task.
    pytest.param(["discover", "--probe", "--ranks", "3"], "--ranks 3 contradicts", id="probe-ranks-under-launcher"),
    # Each of these, argv's alone, was said once a rank.
    pytest.param(["sweep", "--algo", "native:ring"], "forces an NCCL algorithm", id="nccl-variant-on-gloo"),
    pytest.param(["sweep", "--algo", "hierarchical"], "needs ranks on two or more nodes", id="one-node-algo"),
    pytest.param(["sweep", "--resume", "--overwrite"], "--resume continues the stream", id="resume-overwrite"),
    pytest.param(["tune", "--quick", "-b", "8K", "-e", "1K"], "is above -e/--max-bytes", id="tune-sizes"),
    pytest.param(["tune", "--quick", "--ranks", "2:1"], "each value must be a whole number", id="tune-ranks-text"),
    # 'mpirun -np 2 collbench sweep --backend mpi' said it once a rank.
    pytest.param(["sweep", "--backend", "mpi"], "--backend mpi starts mpirun itself", id="mpi-under-launcher"),
    pytest.param(["sweep", "--backend", "mpich"], "starts mpiexec.mpich itself", id="mpich-under-launcher"),
    pytest.param(
        ["discover", "--probe", "--timeout", "0"], "--timeout must be a positive number of seconds", id="discover-probe"
    ),
]


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize(("args", "said"), MISTAKES)
def test_command_line_mistake_is_said_by_rank_0_alone(launcher: str, args: list[str], said: str) -> None:
    code_0, lines_0 = _run(args, _launcher_env(launcher, 0))
    code_1, lines_1 = _run(args, _launcher_env(launcher, 1))
    assert code_0 == 2, lines_0
    assert len(lines_0) == 1 and lines_0[0].startswith("error: ") and said in lines_0[0], lines_0
    assert (code_1, lines_1) == (2, [])


def test_mistake_outside_a_launcher_is_said() -> None:
    code, lines = _run(["sweep", "-b", "0"], {})
    assert code == 2 and len(lines) == 1 and "sizes must be at least 1 byte" in lines[0], lines


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_file_missing_on_one_node_is_said_by_every_rank(launcher: str) -> None:
    # A file is on one node's disk and not another's: each rank says what it found.
    for rank in (0, 1):
        code, lines = _run(["fit", "nope.jsonl"], _launcher_env(launcher, rank))
        assert code == 2 and len(lines) == 1 and "nope.jsonl: no such file" in lines[0], (rank, lines)


def test_two_rank_torchrun_job_says_a_bad_option_once(tmp_path: Path) -> None:
    """Two processes with what torchrun sets (tests/launcher_env.py): one error line in all."""
    done = torchrun_job(2, ["-m", "collbench.cli.app", "sweep", "--bogus"], tmp_path, timeout_s=120)
    assert [p.returncode for p in done] == [2, 2], [p.stderr for p in done]
    lines = [line for p in done for line in (p.stdout + p.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "No such option: --bogus" in lines[0], lines


def test_task_0_ending_on_its_own_error_ends_the_tasks_waiting_for_its_store(tmp_path: Path) -> None:
    """srun leaves the other tasks running when task 0 fails: they waited out --timeout for a store it
    never started, then blamed the directory. Task 0 says in the rendezvous file that it ended; the
    tasks that read it end with its status, silent (rendezvous.publish_ended)."""
    write_rows(tmp_path / "rows.jsonl", [point_row("ring", 1024, 50.0)])  # an earlier sweep's row
    sweep = ["sweep", "--op", "all-reduce", "--algo", "ring", "-b", "1K", "-e", "1K", "--timeout", "600"]
    code_0, lines_0 = _run([*sweep, "--stream", "rows.jsonl"], _launcher_env("srun", 0))
    assert code_0 == 2 and len(lines_0) == 1 and "rows.jsonl holds 1 measured row;" in lines_0[0], lines_0
    [published] = tmp_path.glob(".collbench-store-*.json")
    assert json.loads(published.read_text())["ended"] is True
    code_1, lines_1 = _run([*sweep, "--stream", "rows.jsonl"], _launcher_env("srun", 1))
    assert (code_1, lines_1) == (2, [])


def test_an_error_every_task_finds_leaves_no_file_behind(tmp_path: Path) -> None:
    # Every task ends on it by itself: nobody waits for task 0's store.
    assert _run(["sweep", "--bogus"], _launcher_env("srun", 0))[0] == 2
    assert _run(["sweep", "--op", "bogus"], _launcher_env("srun", 0))[0] == 2
    assert list(tmp_path.iterdir()) == []
