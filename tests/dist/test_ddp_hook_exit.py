"""A training job with the DDP hook exits cleanly, every time.

One of two runs of benchmarks/bench_ddp_hook.py died at the end of training ("rank 2 exited -6 ...
terminate called without an active exception"); ddp_exit_job.py, which trains with schedules running
on the hook's worker thread up to the last step and then exits, reproduced it 2 times in 10 before
``collbench.runtime.ddp.ScheduleWorker`` joined its thread at the interpreter's exit (the cause is in
its docstring). Each rank is a process of its own, as in a user's job: the abort happens only in a
real interpreter's finalisation, which multiprocessing's fork children skip (they end with os._exit).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.dist

RUNS = 20
WORLD = 2
JOB = Path(__file__).with_name("ddp_exit_job.py")
REPO = Path(__file__).resolve().parents[2]


def test_training_with_the_hook_and_exiting_is_clean_20_times(tmp_path: Path) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO))
    for run in range(RUNS):
        store = tmp_path / f"store{run}"
        procs = [
            subprocess.Popen(
                [sys.executable, str(JOB), str(rank), str(WORLD), str(store)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                cwd=tmp_path,
            )
            for rank in range(WORLD)
        ]
        done = [(p.wait(timeout=300), *p.communicate()) for p in procs]
        for rank, (code, out, err) in enumerate(done):
            where = f"run {run + 1}, rank {rank}: exit {code}"
            assert code == 0 and "terminate called" not in err, f"{where}\n{err[-2000:]}"
            counts = re.search(r"buckets native (\d+) ring (\d+)", out)
            # Both kinds of bucket ran, schedules on the worker thread up to the last step.
            assert counts is not None and int(counts[1]) > 0 and int(counts[2]) > 0, out
        sums = [next(line for line in out.splitlines() if line.startswith("sum ")) for _, out, _ in done]
        assert sums[0] == sums[1]  # every rank ends with the same parameters
