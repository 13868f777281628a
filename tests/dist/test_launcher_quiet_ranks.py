"""Under a launcher rank 0 alone reports: the other ranks of a torchrun-style job print nothing, not
even the notes of the sweep's plan, which every rank makes alike (each rank of the job said 'native
scan, exscan: ... skipped' once, so a 1,000-rank job would say it 1,000 times)."""

from __future__ import annotations

from pathlib import Path

import pytest
from launcher_env import torchrun_job

from collbench.backends.base import NO_TORCH_SCAN

pytestmark = pytest.mark.dist

JOB_S = 180.0


def test_the_plans_notes_come_from_rank_0_alone(tmp_path: Path) -> None:
    sweep = ["-m", "collbench.cli.app", "sweep", "--op", "scan,all-reduce", "--algo", "all", "-b", "8", "-e", "8"]
    sweep += ["-n", "2", "-w", "1", "--timeout", "60", "--stream", "rows.jsonl"]
    folders = [tmp_path / f"rank{rank}" for rank in range(2)]
    for folder in folders:
        folder.mkdir()
    done = torchrun_job(2, sweep, folders, timeout_s=JOB_S)
    for rank, proc in enumerate(done):
        assert proc.returncode == 0, f"rank {rank}: {proc.stdout}{proc.stderr}"
    zero, one = done
    # The plan skips native scan on gloo (torch.distributed has no scan): said once, by rank 0.
    assert zero.stderr.count(NO_TORCH_SCAN) == 1, zero.stderr
    assert one.stderr == "" and one.stdout == "", one.stderr + one.stdout
    assert (folders[0] / "rows.jsonl").exists() and not (folders[1] / "rows.jsonl").exists()
