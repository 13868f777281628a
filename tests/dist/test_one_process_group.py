"""A command of several steps under a launcher (``tune``) makes one process group for all of them:
its decisions and every step's launch share the group the first of them made, and each step still
checks that every rank is at it. Ranks run as torchrun starts them (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT: torch/distributed/run.py), each its own process."""

from __future__ import annotations

from pathlib import Path

import pytest
from launcher_env import REPO, torchrun_job

pytestmark = pytest.mark.dist

JOB_S = 120.0

_COUNTED = """
import json, sys
from collbench.runtime.launch import ranks

made = []
real = ranks.init_rank

def counted(*args, **kwargs):
    made.append(args[-1])
    return real(*args, **kwargs)
"""
"""Each rank script's start: ``made`` counts the process groups ``ranks.init_rank`` makes."""

_RANK = (
    _COUNTED
    + """
import torch.distributed as dist
from collbench.runtime.launch.session import agree

def worker(ctx, payload):
    # Every step's collective runs on the group it was given: a sum over every rank.
    import torch
    t = torch.ones(1)
    dist.all_reduce(t)
    return [int(t.item()), id(dist.group.WORLD)]

ranks.init_rank = counted
out = {"steps": []}
with ranks.one_process_group("gloo", 30.0):
    out["decided"] = agree("which points", lambda: {"sizes": [4096]}, timeout_s=30.0)
    for _ in range(3):
        out["steps"].extend(ranks.launch(None, worker, None, backend="gloo", timeout_s=30.0))
out["made"] = len(made)
out["initialised_after"] = dist.is_initialized()
print(json.dumps(out))
"""
)


def _job(n: int, argv: list[str], cwd: Path) -> list[str]:
    """Run ``python argv`` as ranks 0..n-1 of one torchrun-style job; each rank's stdout (all exit 0)."""
    done = torchrun_job(n, argv, cwd, timeout_s=JOB_S)
    for rank, proc in enumerate(done):
        assert proc.returncode == 0, f"rank {rank}: {proc.stdout}{proc.stderr}"
    return [proc.stdout for proc in done]


def test_a_decision_and_three_steps_share_the_one_group_the_first_made(tmp_path: Path) -> None:
    import json

    n = 3
    results = [json.loads(out.strip().splitlines()[-1]) for out in _job(n, ["-c", _RANK], tmp_path)]
    for result in results:
        assert result["decided"] == {"sizes": [4096]}
        assert result["made"] == 1  # made once, by the decision, under its step's store prefix
        sums = [step[0] for step in result["steps"]]
        assert sums == [n, n, n]
        assert len({step[1] for step in result["steps"]}) == 1  # the same group object in every step
        assert result["initialised_after"] is False  # destroyed when the command was done


_CHECK = (
    _COUNTED
    + """
ranks.init_rank = counted
from collbench.cli.app import app
try:
    # Not standalone: an error's typer.Exit comes back as the code (click's Context.main), passed on here.
    code = app(sys.argv[1:], standalone_mode=False)
finally:
    with open(f"made-{ranks.job_rank()}.json", "w") as f:
        json.dump(len(made), f)
sys.exit(code or 0)
"""
)


def test_tune_check_under_a_launcher_runs_every_round_on_one_group(tmp_path: Path) -> None:
    import json

    n = 2
    profile = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"
    outs = _job(n, ["-c", _CHECK, "tune", "--check", str(profile), "--timeout", "60"], tmp_path)
    # Every round of the check on the one group its first step made (it made one a round before).
    assert [json.loads((tmp_path / f"made-{rank}.json").read_text()) for rank in range(n)] == [1, 1]
    # Rank 0 alone holds the rows and reports; rank 1 measured its part and exits 0 quietly (it judged
    # rules on no rows: 'nothing was measured to check the rule against', exit 2, under torchrun).
    assert "geometric-mean regret" in outs[0] and outs[1] == ""
