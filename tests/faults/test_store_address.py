"""An unreachable store under a launcher is one line naming the address and where it came from.

The attacker's runs: a ``MASTER_ADDR`` that does not resolve, and a Slurm node list whose first host is
not task 0's, were a ``DistNetworkError`` traceback (and screens of libtorch's C++ frames) after the
connect timeout.
"""

from __future__ import annotations

from pathlib import Path

from tests.faults._run import cli, env, error_line

SWEEP = ["sweep", "--backend", "gloo", "-b", "1K", "-e", "1K", "--algo", "ring", "--timeout", "2"]


def test_a_master_addr_that_does_not_resolve_is_refused_at_once(tmp_path: Path) -> None:
    launcher = env(RANK="1", WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="no-such-host.invalid", MASTER_PORT="29971")
    result = cli(SWEEP, tmp_path, env=launcher)
    assert result.returncode == 2
    line = error_line(result.stderr)
    assert "'no-such-host.invalid' (from MASTER_ADDR) does not resolve" in line
    assert result.stderr.count("\n") == 1, result.stderr


def test_a_slurm_first_host_nobody_listens_on_names_the_node_list(tmp_path: Path) -> None:
    # Task 1 of 2 on its own node: the store's address is the node list's first host, where no task 0 is.
    slurm = env(
        SLURM_PROCID="1", SLURM_NTASKS="2", SLURM_STEP_ID="0", SLURM_JOB_ID="5", SLURM_LOCALID="0",
        SLURM_NODEID="1", SLURM_JOB_NODELIST="127.0.0.2,nodeb", SLURM_TASKS_PER_NODE="1(x2)",
    )  # fmt: skip
    result = cli(SWEEP, tmp_path, env=slurm)
    assert result.returncode == 2
    line = error_line(result.stderr)
    assert "cannot reach the job's store at 127.0.0.2:" in line
    assert "the first host of SLURM_JOB_NODELIST" in line
    assert "frame #" not in result.stderr and result.stderr.count("\n") == 1, result.stderr[:2000]
