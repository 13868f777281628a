"""stdout that takes no more bytes (redirected to a file on a full disk; /dev/full stands for it) is one
error line naming the file and exit 2: `collbench export nccl-tuner P > tuner.conf`, `discover --json >
topo.json` and `fit RESULTS` ended in an OSError traceback (ENOSPC from the console's write), exit 1.

A file that cannot be read is never taken for that: its read's OSError carries no file name either, and
`fit LOG` of a log the disk failed to read (EIO) said "cannot write the output"."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
SMI = REPO / "tests" / "fixtures" / "real" / "a100-x8-nv12-17nics.topo.txt"
FULL = Path("/dev/full")  # Linux's device whose every write fails with ENOSPC


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full here")
@pytest.mark.parametrize(
    "args",
    [
        ["export", "nccl-tuner", "--from-other-backend", str(PROFILE)],
        ["discover", "--json", "--from-nvidia-smi", str(SMI)],
        ["fit", str(RESULTS)],
        ["fit", "--help"],
        ["--version"],
    ],
)
def test_a_full_stdout_is_one_error_line(args: list[str], tmp_path: Path) -> None:
    with FULL.open("w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "collbench.cli.app", *args],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            timeout=300,
        )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: cannot write the output to /dev/full (stdout): No space left on device"], done.stderr


# Reading /proc/self/mem from offset 0 fails with EIO (address 0 is never mapped: proc(5), "/proc/pid/mem"):
# a regular file by stat whose read fails as a failing disk's does.
MEM = Path("/proc/self/mem")


@pytest.mark.skipif(not MEM.exists(), reason="no /proc/self/mem here")
@pytest.mark.parametrize("name", ["run.log", "rows.csv", "rows.jsonl"])
@pytest.mark.parametrize("command", ["fit", "report", "compare"])
def test_a_read_error_is_a_read_error_naming_the_file(command: str, name: str, tmp_path: Path) -> None:
    unreadable = tmp_path / name
    unreadable.symlink_to(MEM)
    args = [command, str(unreadable)] + ([str(RESULTS)] if command == "compare" else [])
    done = subprocess.run(
        [sys.executable, "-m", "collbench.cli.app", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [f"error: {unreadable}: cannot read: Input/output error"], done.stderr
