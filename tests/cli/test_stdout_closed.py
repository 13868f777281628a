"""A reader that went away (`collbench report ... | head -1`, `collbench predict ... | true`) ends every
command as it ends `ls` and `seq`: without a word, in 128 + SIGPIPE, the status the shell shows for them
(141). predict said nothing and exited 1 (Typer's own handling of EPIPE); the status now tells a script
under `set -o pipefail` the same thing for collbench as for coreutils. The pipe here is closed before
the command writes, which is what `| true` comes to: pipe(7) says a write then fails with EPIPE."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
SMI = REPO / "tests" / "fixtures" / "real" / "a100-x8-nv12-17nics.topo.txt"

COMMANDS = [
    ["fit", str(RESULTS)],
    ["predict", "--profile", str(PROFILE), "--ranks", "64"],
    ["export", "nccl-tuner", "--from-other-backend", str(PROFILE)],
    ["discover", "--json", "--from-nvidia-smi", str(SMI)],
    ["explain", "ring", "--ranks", "4"],
    ["fit", "--help"],
    ["--help"],
    ["--version"],
]


def _run_into_closed_pipe(args: list[str], cwd: Path, *, stderr_too: bool) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write
    try:
        return subprocess.run(
            [sys.executable, "-m", "collbench.cli.app", *args],
            stdout=write_end,
            stderr=write_end if stderr_too else subprocess.PIPE,
            text=True,
            cwd=cwd,
            timeout=300,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_closed_stdout_ends_quietly_as_sigpipe_would(args: list[str], tmp_path: Path) -> None:
    done = _run_into_closed_pipe(args, tmp_path, stderr_too=False)
    assert done.returncode == 128 + signal.SIGPIPE, done.stderr
    # Notes a command gives on stderr still come (stderr is open); no error, traceback or "Exception ignored".
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    assert not [line for line in done.stderr.splitlines() if line.startswith("error:")], done.stderr


@pytest.mark.parametrize("args", COMMANDS[:2], ids=" ".join)
def test_stdout_and_stderr_into_one_closed_pipe_end_the_same(args: list[str], tmp_path: Path) -> None:
    # `collbench predict ... 2>&1 | head -1`: predict's notes on stderr hit the closed pipe first.
    done = _run_into_closed_pipe(args, tmp_path, stderr_too=True)
    assert done.returncode == 128 + signal.SIGPIPE
