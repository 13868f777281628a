"""Running the real ``collbench`` command in a child process, as a user (or a crash) would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEADLINE_S = 120.0
SWEEP = ["sweep", "--ranks", "2", "--backend", "gloo", "--algo", "ring", "-f", "4", "-n", "2", "-w", "0"]
SWEEP += ["--out-of-place", "--format", "json", "--timeout", "120"]
"""A sweep small enough to take seconds: ring all-reduce, two ranks, sizes x4, two iterations."""


def env(**extra: str) -> dict[str, str]:
    return dict(os.environ, OMP_NUM_THREADS="1", COLUMNS="200", **extra)


def cli(args: list[str], cwd: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
    """``collbench ARGS`` run to its end in ``cwd``."""
    kw.setdefault("env", env())
    return subprocess.run(
        [sys.executable, "-m", "collbench.cli.app", *args], cwd=cwd, capture_output=True, text=True,
        timeout=DEADLINE_S, check=False, **kw,
    )  # fmt: skip


def start(args: list[str], cwd: Path, **kw: Any) -> subprocess.Popen[str]:
    kw.setdefault("env", env())
    return subprocess.Popen(
        [sys.executable, "-m", "collbench.cli.app", *args], cwd=cwd, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, **kw,
    )  # fmt: skip


def wait_for(condition: Callable[[], bool], seconds: float = DEADLINE_S) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return False


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def whole_rows(path: Path) -> list[dict[str, Any]]:
    """Every line of ``path`` as JSON; fails the test on a line that is not a whole row."""
    raw = path.read_bytes()
    assert not raw or raw.endswith(b"\n"), "the file ends inside a row"
    return [json.loads(line) for line in raw.decode().splitlines()]


def error_line(stderr: str) -> str:
    """The one ``error:`` line of a run's stderr (asserting there is exactly one, and no traceback)."""
    assert "Traceback" not in stderr, stderr
    found = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(found) == 1, stderr
    return found[0]
