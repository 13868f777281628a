"""``--timeout`` holds in sweep and in tune, even for a rank stopped by a real SIGSTOP: the run ends
within the timeout plus a few seconds, in one line naming the stopped rank, exit code 3, with every
row measured before the stop on disk and no rank left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collbench.results.io import read_jsonl
from collbench.runtime.sweep.faults import FAULT_ENV

pytestmark = pytest.mark.dist

TIMEOUT_S = 6
FEW_S = 8.0
"""Slack over the timeout on a quiet machine: the grace for peers to report, polling, stopping the ranks."""
START_S = 180.0


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _run_until_stopped(args: list[str], stream: Path, rows_before_stop: int) -> tuple[int, str, float, float]:
    """Run ``args``; return its exit code, stderr, seconds from the rank's stop to the end, and the
    seconds from the start to the stop (how slow the machine is right now: starting Python, torch and
    the ranks is most of it)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", **{FAULT_ENV: f"rank=1,point={rows_before_stop},mode=stop"})
    started_at = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        deadline = time.monotonic() + START_S
        # Rank 1 stops itself as the point after these rows begins: that is when the clock starts.
        while _lines(stream) < rows_before_stop and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        stopped_at = time.monotonic()
        _, err = proc.communicate(timeout=TIMEOUT_S + 60)
        return proc.returncode, err, time.monotonic() - stopped_at, stopped_at - started_at
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _assert_one_line_naming_the_stop(code: int, err: str, took_s: float, start_s: float) -> None:
    assert code == 3, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "rank 1" in lines[0] and "stopped (SIGSTOP" in lines[0], lines[0]
    # Past the timeout, ending is stopping processes and leaving Python: work that a loaded machine slows
    # as much as it slowed the start. So the slack is FEW_S, or the start's time where that was longer
    # (a run that waits for something else, not load, is still caught: its start is not slow).
    slack = max(FEW_S, start_s)
    why = f"slack {slack:.1f} s: the start took {start_s:.1f} s"
    assert took_s <= TIMEOUT_S + slack, f"ended {took_s:.1f} s after the stop with --timeout {TIMEOUT_S} ({why})"


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
def test_sweep_with_a_stopped_rank_ends_within_its_timeout(tmp_path: Path) -> None:
    stream = tmp_path / "s.jsonl"
    args = [sys.executable, "-m", "collbench.cli.app", "sweep", "--ranks", "2", "--backend", "gloo"]
    args += ["--algo", "ring", "-b", "4", "-e", "64K", "-f", "4", "-n", "2", "-w", "0", "--out-of-place"]
    args += ["--timeout", str(TIMEOUT_S), "--stream", str(stream)]
    code, err, took_s, start_s = _run_until_stopped(args, stream, 2)
    _assert_one_line_naming_the_stop(code, err, took_s, start_s)
    rows = list(read_jsonl(stream))
    assert [r.size_bytes for r in rows] == [4, 16] and all(r.wrong == 0 for r in rows)


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
def test_tune_with_a_stopped_rank_ends_within_its_timeout(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    stream = tmp_path / "p-results.partial-0.jsonl"
    args = [sys.executable, "-m", "collbench.cli.app", "tune", "--ranks", "2", "--backend", "gloo", "--quick"]
    args += ["--timeout", str(TIMEOUT_S), "-O", str(profile)]
    code, err, took_s, start_s = _run_until_stopped(args, stream, 1)
    _assert_one_line_naming_the_stop(code, err, took_s, start_s)
    assert not profile.exists()
    assert len(list(read_jsonl(stream))) == 1


def test_tune_refuses_a_timeout_that_is_not_a_positive_number(tmp_path: Path) -> None:
    for bad in ("0", "-1", "nan"):
        args = [sys.executable, "-m", "collbench.cli.app", "tune", "--timeout", bad, "-O", str(tmp_path / "p.yaml")]
        done = subprocess.run(args, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        assert "--timeout must be a positive number" in done.stderr and len(done.stderr.strip().splitlines()) == 1
