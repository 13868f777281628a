"""collbench under the real Slurm: ``srun -N1 -n 2 collbench sweep|tune`` on a one-node cluster of
this machine (Debian's slurm-wlm and munge, configured and started by scripts/slurm-local.sh).

srun starts both tasks; collbench must join them as one job (rank 0 alone prints and writes, the
rows equal those of the same sweep collbench starts itself, every result checked), as it joins
mpirun's (tests/dist/test_launcher_jobs.py). Skipped, with the reason, where srun is missing or the
daemons cannot start (no root, no munge key, a container that refuses them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from launcher_env import REPO, clean_env, free_port
from synthetic_rows import point_row

from collbench.results.io import read_jsonl, write_rows
from collbench.results.row import ResultRow

pytestmark = pytest.mark.dist

SWEEP = ["sweep", "--backend", "gloo", "--op", "all-reduce,all-gather", "--algo", "ring,native"]
SWEEP += ["-b", "1K", "-e", "16K", "-f", "4", "-n", "3", "-w", "1", "--both", "--timeout", "60", "--format", "json"]
JOB_S = 300.0
SETUP_S = 120.0


def _slurm_unavailable() -> str | None:
    """Why srun cannot run a job step here (None when it can), starting the local daemons if needed."""
    if shutil.which("srun") is None or shutil.which("scontrol") is None:
        return "Slurm's srun is not installed (.ci/run installs slurm-wlm and munge)"
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    if ping.returncode == 0 and "UP" in ping.stdout:
        return None
    if os.geteuid() != 0:
        return "no Slurm controller answers, and starting the local one needs root"
    setup = subprocess.run([str(REPO / "scripts" / "slurm-local.sh")], capture_output=True, text=True, timeout=SETUP_S)
    if setup.returncode != 0:
        lines = (setup.stderr or setup.stdout).strip().splitlines()
        return f"the local Slurm daemons cannot start: {lines[-1] if lines else f'exit {setup.returncode}'}"
    return None


@pytest.fixture(scope="module")
def slurm() -> None:
    why = _slurm_unavailable()
    if why is not None:
        pytest.skip(why)


def _env(*, port: bool = True) -> dict[str, str]:
    # srun exports the caller's environment to its tasks: nothing of another launcher may leak in.
    return clean_env(MASTER_PORT=str(free_port())) if port else clean_env()


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "collbench.cli.app", *args]


def _srun(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``srun -N1 -n 2`` of collbench, each task's stdout in ``out.<task>`` (srun's ``-o out.%t``)."""
    srun = ["srun", "-N1", "-n", "2", "--oversubscribe", "--kill-on-bad-exit=1", "-o", "out.%t", "-e", "err.%t"]
    return subprocess.run([*srun, *_cli(*args)], env=_env(), capture_output=True, text=True, timeout=JOB_S, cwd=cwd)


def _outputs(cwd: Path) -> str:
    return "".join(f"--- {p.name}\n{p.read_text()}" for p in sorted(cwd.glob("*.[01]")))


def _points(rows: list[ResultRow]) -> list[tuple[object, ...]]:
    return sorted((r.op, r.algo, r.world_size, r.dtype, r.in_place, r.size_bytes, r.count, r.iters) for r in rows)


def test_srun_sweep_measures_the_rows_collbench_measures_itself(slurm: None, tmp_path: Path) -> None:
    done = _srun([*SWEEP, "--stream", "srun.jsonl"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr + _outputs(tmp_path)
    rows = list(read_jsonl(tmp_path / "srun.jsonl"))
    # One job of two ranks, not two jobs: task 0 alone wrote rows and printed them.
    printed = json.loads((tmp_path / "out.0").read_text())
    assert len(printed) == len(rows)
    assert (tmp_path / "out.1").read_text() == ""
    assert rows and all(r.wrong == 0 and r.world_size == 2 for r in rows)
    own = subprocess.run(
        _cli(*SWEEP, "--ranks", "2", "--stream", "own.jsonl"),
        env=_env(), capture_output=True, text=True, timeout=JOB_S, cwd=tmp_path,
    )  # fmt: skip
    assert own.returncode == 0, own.stderr
    assert _points(rows) == _points(list(read_jsonl(tmp_path / "own.jsonl")))


def test_srun_tune_quick_writes_one_profile_from_task_0(slurm: None, tmp_path: Path) -> None:
    tune = ["tune", "--quick", "--backend", "gloo", "-b", "512", "-e", "64K", "--timeout", "60", "-O", "p.yaml"]
    done = _srun(tune, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr + _outputs(tmp_path)
    from collbench.profile.document import Profile

    profile = Profile.load(tmp_path / "p.yaml")
    assert profile.world_size == 2 and profile.rules
    assert "profile:" in (tmp_path / "out.0").read_text()
    assert (tmp_path / "out.1").read_text() == ""  # task 0 alone reported
    rows = list(read_jsonl(tmp_path / "p-results.jsonl"))
    assert rows and all(r.wrong == 0 and r.world_size == 2 for r in rows)
    assert {r.size_bytes for r in rows} <= set(range(512, 64 * 1024 + 1))  # the sizes -b/-e asked for


def test_two_srun_jobs_at_once_each_find_the_port_their_task_0_published(slurm: None, tmp_path: Path) -> None:
    """No MASTER_ADDR or MASTER_PORT: task 0 binds a port the kernel picks and publishes it in the
    submit directory (runtime/launch/rendezvous.py); two jobs on one host cannot pick the same one."""
    srun = ["srun", "-N1", "-n", "2", "--oversubscribe", "--kill-on-bad-exit=1", "-o", "out.%t", "-e", "err.%t"]
    sweep = [*SWEEP, "--op", "all-reduce", "--algo", "ring", "-e", "1K", "--stream", "rows.jsonl"]
    jobs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        argv, pipe = [*srun, *_cli(*sweep)], subprocess.PIPE
        jobs.append(
            subprocess.Popen(argv, env=_env(port=False), cwd=tmp_path / name, stdout=pipe, stderr=pipe, text=True)
        )
    for name, job in zip(("a", "b"), jobs, strict=True):
        out, err = job.communicate(timeout=JOB_S)
        assert job.returncode == 0, out + err + _outputs(tmp_path / name)
        rows = list(read_jsonl(tmp_path / name / "rows.jsonl"))
        assert rows and all(r.wrong == 0 and r.world_size == 2 for r in rows)
        assert (tmp_path / name / "out.1").read_text() == ""  # one job of two tasks, task 0 alone printed
        # Task 0 withdrew the address once both tasks had joined.
        assert not list((tmp_path / name).glob(".collbench-store-*"))


def test_srun_tune_check_reports_from_task_0_and_every_task_exits_0(slurm: None, tmp_path: Path) -> None:
    """Task 1 judged the rules on no rows (task 0 alone gets them) and ended 'error: all-reduce at 1024
    bytes: nothing was measured to check the rule against', exit 2, after task 0's table."""
    profile = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"
    done = _srun(["tune", "--check", str(profile), "--timeout", "60"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr + _outputs(tmp_path)
    assert "geometric-mean regret" in (tmp_path / "out.0").read_text()
    assert (tmp_path / "out.1").read_text() == ""
    assert "error" not in (tmp_path / "err.1").read_text()


def test_a_task_0_that_refuses_its_stream_ends_the_other_tasks_at_once(slurm: None, tmp_path: Path) -> None:
    """srun leaves a job's other tasks running when one fails: task 1 waited out the whole --timeout for
    the store task 0 never started, then said 'task 0 published no store address ... (it did not
    start, or the directory is not shared between the job's nodes ...)'. Task 0 says in the file that
    it ended (rendezvous.publish_ended), and the other tasks end with its status, silent."""
    write_rows(tmp_path / "rows.jsonl", [point_row("ring", 1024, 50.0)])  # an earlier sweep's row
    srun = ["srun", "-N1", "-n", "2", "--oversubscribe", "-o", "out.%t", "-e", "err.%t"]
    sweep = [*SWEEP, "--op", "all-reduce", "--algo", "ring", "-e", "1K", "--timeout", "240", "--stream", "rows.jsonl"]
    done = subprocess.run(
        [*srun, *_cli(*sweep)], env=_env(port=False), capture_output=True, text=True, timeout=JOB_S, cwd=tmp_path
    )
    assert done.returncode == 2, done.stdout + done.stderr + _outputs(tmp_path)
    said = (tmp_path / "err.0").read_text()
    assert said.startswith("error: rows.jsonl holds ") and said.count("\n") == 1, said
    assert (tmp_path / "err.1").read_text() == "" and (tmp_path / "out.1").read_text() == ""
