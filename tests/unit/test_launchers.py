"""Which launcher started a process, read from the variables each launcher documents.

The variables are those Open MPI's mpirun sets (checked against Debian's openmpi-bin 4.1: run
``mpirun -np 2 env``), MPICH's Hydra (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS), Slurm's
srun (srun(1) "OUTPUT ENVIRONMENT VARIABLES") and torchrun (torch/distributed/run.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from collbench.errors import ConfigError
from collbench.runtime.launch.launchers import (
    PORT_BASE,
    detect_job,
    is_loopback,
)
from collbench.runtime.launch.rendezvous import RENDEZVOUS_DIR_ENV, mpirun_job

OMPI = {
    "OMPI_COMM_WORLD_RANK": "1",
    "OMPI_COMM_WORLD_SIZE": "2",
    "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    "OMPI_MCA_ess_base_jobid": "1084489729",
}
SRUN = {
    "SLURM_PROCID": "5",
    "SLURM_NTASKS": "8",
    "SLURM_STEP_NUM_TASKS": "8",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "1",
    "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
    "SLURM_JOB_NODELIST": "gpu[07-08]",
    "SLURM_JOB_ID": "4242",
    "SLURM_STEP_ID": "0",
}


def test_nothing_set_is_no_job() -> None:
    assert detect_job({}) is None
    assert detect_job({"RANK": "0", "WORLD_SIZE": "2"}) is None  # torchrun needs the address too


def test_torchrun() -> None:
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}
    job = detect_job({**env, "MASTER_ADDR": "h", "MASTER_PORT": "7"})
    assert job is not None
    assert (job.launcher, job.rank, job.world_size, job.local_rank, job.local_world_size) == ("torchrun", 3, 4, 1, 2)
    assert (job.master_addr, job.master_port, job.agent_store, job.local_only) == ("h", 7, False, False)


def test_open_mpi_on_one_host_uses_the_loopback_and_a_port_rank_0_publishes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    job = detect_job(OMPI)
    assert job is not None
    assert (job.launcher, job.rank, job.world_size, job.local_rank, job.local_world_size) == ("mpirun", 1, 2, 1, 2)
    assert job.master_addr == "127.0.0.1" and job.local_only and not job.agent_store
    # Rank 0 binds a port the kernel picks and publishes it, in the working directory mpirun gives
    # every rank, under a name of the job's: no port is derived from the job id (one in 1,000 collided).
    assert job.master_port == 0
    assert Path(job.rendezvous).parent == tmp_path and Path(job.rendezvous).name.startswith(".collbench-store-mpirun-")
    assert detect_job({**OMPI, "OMPI_COMM_WORLD_RANK": "0"}).rendezvous == job.rendezvous  # type: ignore[union-attr]
    other = detect_job({**OMPI, "OMPI_MCA_ess_base_jobid": "1084489730"})
    assert other is not None and other.rendezvous != job.rendezvous
    # Open MPI 4's job ids are 16 bits of mpirun's host and pid: the mpirun's own address tells apart two
    # that share one; Open MPI 5 names the job by its launcher's host and pid (PMIX_NAMESPACE).
    uri = {"OMPI_MCA_orte_hnp_uri": "1084489728.0;tcp://10.0.0.2:50387"}
    moved = detect_job({**OMPI, **uri})
    assert moved is not None and moved.rendezvous != job.rendezvous
    v5 = detect_job({**OMPI, "PMIX_NAMESPACE": "prterun-node1-4242@1"})
    assert v5 is not None and v5.rendezvous not in (job.rendezvous, moved.rendezvous)
    elsewhere = detect_job({**OMPI, RENDEZVOUS_DIR_ENV: "/shared/jobs"})
    assert elsewhere is not None and Path(elsewhere.rendezvous).parent == Path("/shared/jobs")
    given = detect_job({**OMPI, "MASTER_PORT": "31000"})
    assert given is not None and (given.master_port, given.rendezvous) == (31000, "")


def test_under_hydra_the_job_is_named_by_the_mpiexec_its_proxy_reports_to(tmp_path: Path) -> None:
    # Hydra exports no job id: its proxy's command line names the mpiexec (hydra_pmi_proxy
    # --control-port HOST:PORT ... --pgid N, as MPICH 4's mpiexec starts it), the same on every host.
    # A stand-in proxy (its argv[0] is the proxy's name) starts a shell that starts the rank.
    code = "from collbench.runtime.launch.rendezvous import mpirun_job; print(mpirun_job({}))"
    # The rank runs under a shell of its own, as `mpiexec sh -c ...` runs it (`; true`: not exec'd).
    rank = '"$PYTHON" -c "$CODE"; true'
    args = ["--control-port", "vm:35967", "--rmk", "user", "--pgid", "0", "--proxy-id", "0"]
    env = {**os.environ, "PYTHON": sys.executable, "CODE": code}
    done = subprocess.run(
        ["bash", "-c", 'exec -a hydra_pmi_proxy sh -c "$0" "$@"', f"sh -c '{rank}'; true", *args],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hydra:vm:35967 pgid 0"
    assert mpirun_job({}) == ""  # pytest runs under no proxy


def test_open_mpi_over_several_hosts_needs_master_addr() -> None:
    several = {**OMPI, "OMPI_COMM_WORLD_SIZE": "4"}
    with pytest.raises(ConfigError, match="MASTER_ADDR"):
        detect_job(several)
    job = detect_job({**several, "MASTER_ADDR": "node0", "MASTER_PORT": "31000"})
    assert job is not None and (job.master_addr, job.master_port, job.local_only) == ("node0", 31000, False)


def test_mpich_pmi() -> None:
    job = detect_job({"PMI_RANK": "0", "PMI_SIZE": "3", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "3"})
    assert job is not None
    # Under no Hydra proxy (a PMI launcher naming its job nowhere): the one port left, MASTER_PORT's default.
    assert (job.launcher, job.rank, job.world_size, job.master_addr, job.master_port, job.rendezvous) == (
        "mpirun",
        0,
        3,
        "127.0.0.1",
        PORT_BASE,
        "",
    )


def test_srun_step() -> None:
    job = detect_job(SRUN)
    assert job is not None
    assert (job.launcher, job.rank, job.world_size, job.local_rank, job.local_world_size) == ("srun", 5, 8, 1, 4)
    # Task 0 publishes where its store listens (a port the kernel picks): nothing read from the node list.
    assert (job.master_addr, job.master_port) == ("", 0)
    assert job.rendezvous.endswith(".collbench-store--4242-0-0.json")
    given = detect_job({**SRUN, "MASTER_ADDR": "login", "MASTER_PORT": "29999"})
    assert given is not None and (given.master_addr, given.master_port, given.rendezvous) == ("login", 29999, "")
    # One of the two given: task 0 still publishes the other.
    port_only = detect_job({**SRUN, "MASTER_PORT": "29999"})
    assert port_only is not None and (port_only.master_addr, port_only.master_port) == ("", 29999)
    assert port_only.rendezvous


def test_srun_publishes_in_the_submit_directory_or_the_one_named(tmp_path: Path) -> None:
    env = {**SRUN, "SLURM_SUBMIT_DIR": str(tmp_path / "submit"), "SLURM_CLUSTER_NAME": "c1", "SLURM_RESTART_COUNT": "2"}
    job = detect_job(env)
    assert job is not None and job.rendezvous == str(tmp_path / "submit" / ".collbench-store-c1-4242-0-2.json")
    named = detect_job({**env, "COLLBENCH_RENDEZVOUS_DIR": str(tmp_path / "shared")})
    assert named is not None and named.rendezvous.startswith(str(tmp_path / "shared") + "/")
    # No nodelist is needed, nor read: task 0 need not run on its first host.
    bare = {k: v for k, v in env.items() if "NODELIST" not in k}
    assert detect_job(bare) == job


@pytest.mark.parametrize("step", [None, "batch", "4294967294", "4294967291"], ids=["salloc", "name", "batch", "extern"])
def test_a_batch_script_or_salloc_shell_is_not_a_step(step: str | None) -> None:
    env = {k: v for k, v in SRUN.items() if k not in ("SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS")}
    if step is not None:
        env["SLURM_STEP_ID"] = step
    assert detect_job(env) is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({**OMPI, "OMPI_COMM_WORLD_RANK": "two"}, "OMPI_COMM_WORLD_RANK='two'"),
        ({**OMPI, "OMPI_COMM_WORLD_RANK": "2"}, "rank 2 of 2"),
        ({**OMPI, "MASTER_PORT": "70000"}, "not a TCP port"),
        ({**SRUN, "SLURM_STEP_TASKS_PER_NODE": "4x2"}, "not like 2"),
        ({**SRUN, "SLURM_LOCALID": "4"}, "local rank 4 of 4"),
    ],
)
def test_nonsense_from_a_launcher_is_one_config_error(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        detect_job(env)


def test_srun_on_one_node_keeps_the_store_on_the_loopback() -> None:
    one_node = {"SLURM_PROCID": "1", "SLURM_NODEID": "0", "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_TASKS_PER_NODE": "4"}
    job = detect_job({**SRUN, **one_node})
    assert job is not None and (job.master_addr, job.local_only, job.local_world_size) == ("127.0.0.1", True, 4)


HUGE_NUMBER = "9" * 5000


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({**SRUN, "SLURM_STEP_ID": HUGE_NUMBER, "SLURM_STEPID": HUGE_NUMBER}, None),
        ({**SRUN, "SLURM_NODEID": HUGE_NUMBER}, "SLURM_NODEID"),
        ({**SRUN, "SLURM_STEP_TASKS_PER_NODE": f"4(x{HUGE_NUMBER})"}, "SLURM_STEP_TASKS_PER_NODE"),
        ({**SRUN, "SLURM_STEP_TASKS_PER_NODE": HUGE_NUMBER}, "SLURM_STEP_TASKS_PER_NODE"),
        ({**SRUN, "SLURM_PROCID": HUGE_NUMBER}, "SLURM_PROCID"),
    ],
)
def test_slurm_variables_with_5000_digit_numbers_are_one_short_line(env: dict[str, str], message: str | None) -> None:
    """Python refuses int() of more than 4,300 digits with a ValueError: it must never surface."""
    if message is None:
        assert detect_job(env) is None  # a step id that long is no srun step
        return
    with pytest.raises(ConfigError, match=message) as caught:
        detect_job(env)
    text = str(caught.value)
    assert "\n" not in text and len(text) < 300, text


def test_a_job_of_a_billion_ranks_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="999999999 ranks, more than the 131072"):
        detect_job({**SRUN, "SLURM_NTASKS": "999999999", "SLURM_STEP_NUM_TASKS": "999999999"})


TORCHRUN = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "7"}


def test_under_torchruns_agent_every_rank_joins_its_store_under_the_attempts_keys() -> None:
    # torch/distributed/elastic/agent/server/local_elastic_agent.py sets these for its workers.
    agent = {**TORCHRUN, "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": "2"}
    job = detect_job(agent)
    assert job is not None and job.agent_store and job.store_scope == "attempt2/" and not job.local_only
    plain = detect_job(TORCHRUN)
    assert plain is not None and not plain.agent_store and plain.store_scope == ""


@pytest.mark.parametrize(("addr", "local"), [("127.0.0.1", True), ("localhost", True), ("::1", True), ("node0", False)])
def test_a_torchrun_store_on_the_loopback_listens_there_only(addr: str, local: bool) -> None:
    job = detect_job({**TORCHRUN, "MASTER_ADDR": addr})
    assert job is not None and job.local_only is local and is_loopback(addr) is local
