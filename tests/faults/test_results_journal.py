"""Issue 13, items 1 and 4: results files as a journal, under real crashes, full disks and two writers.

Each test runs the real ``collbench sweep`` (two gloo ranks, in child processes) and checks the file
on disk after the fault: one clear line, the right exit code, and the rows measured before the fault
still there, whole and unchanged.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from collbench.runtime.sweep.faults import FAULT_ENV
from tests.faults._run import SWEEP, cli, env, error_line, lines, start, wait_for, whole_rows


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
def test_resume_after_a_torn_last_line_sets_it_aside_and_loses_nothing(tmp_path: Path) -> None:
    first = cli([*SWEEP, "-b", "4", "-e", "16", "--stream", "s.jsonl"], tmp_path)
    assert first.returncode == 0, first.stderr
    before = whole_rows(tmp_path / "s.jsonl")
    assert len(before) == 2
    # A crash mid-write: the next row was cut short on disk.
    with (tmp_path / "s.jsonl").open("ab") as f:
        f.write(b'{"algbw_gbps": 0.001, "algo": "ri')
    resumed = cli([*SWEEP, "-b", "4", "-e", "64", "--stream", "s.jsonl", "--resume", "--output", "o.jsonl"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "s.jsonl: its last line was cut short" in resumed.stderr and "s.jsonl.torn" in resumed.stderr
    assert (tmp_path / "s.jsonl.torn").read_bytes() == b'{"algbw_gbps": 0.001, "algo": "ri\n'
    after = whole_rows(tmp_path / "s.jsonl")
    assert after[:2] == before  # nothing measured before the crash is lost or changed
    assert [r["size_bytes"] for r in after] == [4, 16, 64]  # and the resumed row is whole, not glued on
    assert whole_rows(tmp_path / "o.jsonl") == after  # --output is the stream's rows, read from disk


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
def test_a_second_run_on_the_same_files_is_refused_and_the_first_keeps_its_rows(tmp_path: Path) -> None:
    stream = tmp_path / "s.jsonl"
    # Rank 1 stops at the second point: the first run holds its files while we start a second one.
    first = start(
        [*SWEEP, "-b", "4", "-e", "64", "--stream", "s.jsonl", "--output", "o.csv"], tmp_path,
        env=env(**{FAULT_ENV: "rank=1,point=1,mode=hang"}),
    )  # fmt: skip
    try:
        assert wait_for(lambda: len(lines(stream)) >= 1 or first.poll() is not None)
        assert first.poll() is None, first.communicate()
        measured = whole_rows(stream)
        for args in (["--stream", "s.jsonl"], ["--stream", "other.jsonl", "--output", "o.csv"]):
            second = cli([*SWEEP, "-b", "4", "-e", "16", *args], tmp_path)
            assert second.returncode == 2
            line = error_line(second.stderr)
            assert "is being written by another collbench run" in line and f"(pid {first.pid} on " in line
            assert ": collbench sweep --ranks 2 " in line  # and the command that holds it
            assert whole_rows(stream) == measured  # the second run emptied nothing
        first.send_signal(signal.SIGTERM)
        _, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode != 0 and "Traceback" not in err
    assert whole_rows(stream) == measured
    assert not (tmp_path / "o.csv").exists()  # an interrupted run writes no partial --output
    assert not (tmp_path / ".s.jsonl.lock").exists()


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
def test_a_second_sweep_keeps_the_first_ones_rows(tmp_path: Path) -> None:
    """The default stream included: a second sweep from the same folder refuses, naming what to do."""
    stream = tmp_path / "collbench-sweep.jsonl"
    first = cli([*SWEEP, "-b", "4", "-e", "16"], tmp_path)
    assert first.returncode == 0, first.stderr
    measured = whole_rows(stream)
    assert len(measured) == 2
    second = cli([*SWEEP, "-b", "64", "-e", "64"], tmp_path)
    assert second.returncode == 2
    line = error_line(second.stderr)
    assert f"{stream.name} holds 2 measured rows" in line and "--resume" in line and "--overwrite" in line
    assert whole_rows(stream) == measured
    resumed = cli([*SWEEP, "-b", "4", "-e", "64", "--resume"], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert whole_rows(stream)[:2] == measured and len(whole_rows(stream)) == 3
    replaced = cli([*SWEEP, "-b", "64", "-e", "64", "--overwrite"], tmp_path)
    assert replaced.returncode == 0, replaced.stderr
    assert [r["size_bytes"] for r in whole_rows(stream)] == [64]


def test_a_planted_symlink_at_the_default_stream_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "collbench-sweep.jsonl").symlink_to(victim)
    for extra in ([], ["--overwrite"], ["--resume"]):
        done = cli([*SWEEP, "-b", "4", "-e", "4", *extra], tmp_path)
        assert done.returncode == 2
        assert "collbench-sweep.jsonl: is a symlink" in error_line(done.stderr)
        assert victim.read_text() == "precious\n"
    assert not (tmp_path / ".victim.lock").exists()


def test_a_stream_that_is_a_fifo_is_one_line_not_a_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "s.jsonl")
    done = cli([*SWEEP, "-b", "4", "-e", "4", "--stream", "s.jsonl"], tmp_path)
    assert done.returncode == 2
    assert "s.jsonl: is not a regular file" in error_line(done.stderr)


def test_a_lock_file_that_is_a_fifo_is_one_line(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / ".collbench-sweep.jsonl.lock")
    done = cli([*SWEEP, "-b", "4", "-e", "4"], tmp_path)
    assert done.returncode == 2
    assert ".collbench-sweep.jsonl.lock: is not a regular file" in error_line(done.stderr)


@contextlib.contextmanager
def _small_disk(where: Path, size_bytes: int) -> Iterator[tuple[Path, dict[str, object]]]:
    """A directory on a tmpfs of ``size_bytes`` (when this user may mount), else a file-size limit.

    Both make the kernel refuse a write part-way through (ENOSPC or EFBIG), as a full disk does.
    """
    mount = shutil.which("mount")
    disk = where / "disk"
    disk.mkdir()
    mounted = False
    if mount is not None and os.geteuid() == 0:
        done = subprocess.run(
            [mount, "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(disk)], capture_output=True, check=False
        )
        mounted = done.returncode == 0
    if mounted:
        try:
            yield disk, {}
        finally:
            subprocess.run(["umount", "-l", str(disk)], check=False)
        return

    def limit() -> None:  # pragma: no cover - runs in the child
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death; inherited by the ranks
        resource.setrlimit(resource.RLIMIT_FSIZE, (size_bytes, size_bytes))

    yield disk, {"preexec_fn": limit}


def test_a_full_disk_keeps_whole_rows_and_says_where_they_are(tmp_path: Path) -> None:
    # Rows are ~700 bytes and tmpfs counts whole 4 KiB pages: two pages fill up around the twelfth
    # of the fifteen rows (4 B to 64 KiB in x2 steps).
    with _small_disk(tmp_path, 8192) as (disk, extra):
        stream = disk / "s.jsonl"
        args = [*SWEEP, "-f", "2", "-b", "4", "-e", "64K", "--stream", str(stream)]
        done = cli(args, tmp_path, **extra)  # type: ignore[arg-type]
        assert done.returncode == 3  # a rank failed: rank 0 could not write its row
        line = error_line(done.stderr)
        assert "No space left on device" in line or "File too large" in line
        rows = whole_rows(stream)  # whole rows only: the cut one was taken back
        assert 1 <= len(rows) < 15
        assert f"the {len(rows)} rows measured so far are in {stream}" in line
        assert [r["size_bytes"] for r in rows] == [4 * 2**i for i in range(len(rows))]


@pytest.mark.parametrize("command", ["export-env", "import-nccl-tests"])
def test_planted_symlinks_at_temp_names_are_not_followed(tmp_path: Path, command: str) -> None:
    repo = Path(__file__).resolve().parents[2]
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = "out.txt" if command == "export-env" else "res.csv"
    for name in (f".{out}.tmp", f"{out}.tmp"):  # the fixed names collbench once used
        (tmp_path / name).symlink_to(victim)
    if command == "export-env":
        args = ["export", "env", str(repo / "profiles" / "cpu-2core-gloo-2ranks.yaml"), "-O", out]
        args.append("--from-other-backend")  # a gloo profile
    else:
        args = ["import", "nccl-tests", str(repo / "tests" / "fixtures" / "nccl_tests" / "all_reduce_perf_8gpu.log")]
        args += ["-O", out]
    done = cli(args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "precious\n"
    assert (tmp_path / out).is_file() and not (tmp_path / out).is_symlink()
    assert (tmp_path / out).read_text()
