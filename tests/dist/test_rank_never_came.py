"""A rank that never reaches the job's store (not started, died while starting, or unable to reach
rank 0's address) is named by rank 0 when the first group does not form: each rank sets one key on
arriving, and rank 0 checks them once on timeout. It was 'not every rank of the job joined within 10 s
(...; rank 0's error names it)' on rank 0 itself, naming no rank (srun -n 3 with task 1 killed while
starting). Ranks run as torchrun starts them (torch/distributed/run.py), one never started."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from launcher_env import free_port, torchrun_env

pytestmark = pytest.mark.dist

JOB_S = 120.0
SWEEP = ["-m", "collbench.cli.app", "sweep", "--op", "all-reduce", "--algo", "ring", "-b", "8", "-e", "8"]
SWEEP += ["--timeout", "10", "--stream", "rows.jsonl"]


def test_rank_0_names_the_rank_that_never_came(tmp_path: Path) -> None:
    n, port = 3, free_port()
    started = {}
    for rank in (0, 2):  # rank 1 never starts
        folder = tmp_path / f"rank{rank}"
        folder.mkdir()
        started[rank] = subprocess.Popen(
            [sys.executable, *SWEEP], env=torchrun_env(rank, n, port), cwd=folder,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
    done = {rank: proc.communicate(timeout=JOB_S) for rank, proc in started.items()}
    assert started[0].returncode == 3, done[0]
    lines = [line for line in done[0][1].splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, done[0][1]
    assert lines[0].startswith("error: rank 0 on ") and " failed while joining step 0: " in lines[0], lines[0]
    assert f"rank 1 never reached the job's store at 127.0.0.1:{port} within 10 s" in lines[0], lines[0]
    assert "cannot reach that address, from MASTER_ADDR)" in lines[0], lines[0]
    # Rank 2 came, and waited as long: it says not every rank joined, and that rank 0's line names it.
    assert started[2].returncode == 3, done[2]
    assert "rank 0's error names it" in done[2][1], done[2][1]


@pytest.mark.parametrize(
    ("shown", "count", "text"),
    [([3], 1, "rank 3"), ([1, 2, 5], 3, "ranks 1, 2 and 5"), ([1, 2, 3, 4, 5], 16, "ranks 1, 2, 3, 4, 5 and 11 more")],
)
def test_ranks_text(shown: list[int], count: int, text: str) -> None:
    from collbench.runtime.launch.session import _ranks_text

    assert _ranks_text(shown, count) == text
