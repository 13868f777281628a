"""Files that are not what a reader or a writer expects: FIFOs, devices, sockets, directories, dangling
symlinks, the input itself, measured results, ``-`` and ``/proc``.

Readers run as a user would (a child process with a time limit), so that a reader that waits on a FIFO
fails the test instead of hanging it. No test writes to a real ``/dev`` node: ``/dev/zero`` and
``/dev/null`` are only read; a device as an output is one made with ``mknod`` in ``tmp_path``.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import InputFileError
from collbench.fileio import MAX_TEXT_FILE_BYTES, atomic_write_text, check_writable, read_text_file
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from tests.faults._run import env

P = {"segment_bytes": None, "layout": "rank-order"}
RULES = (
    Rule("all-reduce", 0, 8191, "recursive-doubling", P, 1024, None, 20.0, 2.0),
    Rule("all-reduce", 8192, None, "ring", P, 1 << 20, None, 900.0, 1.4),
)
HANG_LIMIT_S = 90.0
"""A reader that opens a FIFO waits for a writer forever; the refusal itself takes a second or two."""


def collbench(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "collbench.cli.app", *args], cwd=cwd, env=env(), capture_output=True, text=True,
        timeout=HANG_LIMIT_S, check=False,
    )  # fmt: skip


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.fixture
def profile_path(tmp_path: Path) -> Path:
    profile = Profile(fingerprint="fp", host="h", backend="nccl", rule_sets=(RuleSet(4, 1, RULES),))
    return profile.save(tmp_path / "p.yaml")


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo.yaml"
    os.mkfifo(path)
    return path


# Readers: a FIFO is refused at once (it used to block the open), a device is refused (it never ends).


@pytest.mark.parametrize(
    "args",
    [
        ["export", "nccl-tuner", "{fifo}"],
        ["predict", "--ranks", "64", "--fits", "{fifo}"],
        ["predict", "--ranks", "4", "--profile", "{fifo}"],
        ["export", "ompi-rankfile", "{profile}", "--topology", "{fifo}"],
    ],
    ids=lambda a: " ".join(a[:2]) + (" --topology" if "--topology" in a else ""),
)
def test_a_fifo_as_input_is_refused_without_waiting(
    args: list[str], fifo: Path, profile_path: Path, tmp_path: Path
) -> None:
    filled = [a.format(fifo=fifo, profile=profile_path) for a in args]
    line = one_error_line(collbench(filled, tmp_path))
    assert f"{fifo}: is a FIFO, not a regular file" in line


@pytest.mark.parametrize(
    "args", [["export", "nccl-tuner", "/dev/zero"], ["predict", "--ranks", "4", "--profile", "/dev/zero"]]
)
def test_dev_zero_as_input_is_refused_not_read_until_memory_runs_out(args: list[str], tmp_path: Path) -> None:
    line = one_error_line(collbench(args, tmp_path))
    assert "/dev/zero: is a character device, not a regular file" in line


def test_read_text_file_refuses_a_fifo_a_device_and_a_socket(tmp_path: Path, fifo: Path) -> None:
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        for path, kind in ((fifo, "a FIFO"), (Path("/dev/null"), "a character device"), (sock_path, "a socket")):
            with pytest.raises(InputFileError, match=f"is {kind}, not a regular file \\(expected a profile\\)"):
                read_text_file(path, "a profile")


def test_read_text_file_stops_at_its_cap(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:  # sparse: no disk space is used
        f.truncate(MAX_TEXT_FILE_BYTES + 1)
    with pytest.raises(InputFileError, match="larger than 64 MiB, the most collbench reads"):
        read_text_file(big, "a profile")
    exact = tmp_path / "exact.yaml"
    exact.write_text("a: 1\n")
    assert read_text_file(exact, "a profile") == "a: 1\n"


# Writers: only a regular file (or a new one) is written.


def refused(args: list[str]) -> str:
    """The one error line of ``collbench ARGS`` run in this process, whitespace as one space."""
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    return " ".join(result.output.split())


def test_a_fifo_or_a_socket_as_output_is_refused_and_left_as_it_was(
    profile_path: Path, fifo: Path, tmp_path: Path
) -> None:
    line = refused(["export", "nccl-tuner", str(profile_path), "-O", str(fifo)])
    assert line == f"error: {fifo}: is a FIFO, not a regular file; collbench writes only regular files"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    sock_path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        with pytest.raises(InputFileError, match="is a socket, not a regular file"):
            atomic_write_text(sock_path, "x")
        assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")
def test_a_device_as_output_is_refused_and_stays_a_device(profile_path: Path, tmp_path: Path) -> None:
    device = tmp_path / "null"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a private node of /dev/null's device
    line = refused(["export", "env", str(profile_path), "-O", str(device)])
    assert line == f"error: {device}: is a character device, not a regular file; collbench writes only regular files"
    assert stat.S_ISCHR(os.lstat(device).st_mode)


def test_a_directory_as_output_is_refused(profile_path: Path, tmp_path: Path) -> None:
    line = refused(["export", "nccl-tuner", str(profile_path), "-O", str(tmp_path)])
    assert line == f"error: {tmp_path}: is a directory; give a file name"


def test_a_dangling_symlink_as_output_is_refused_naming_its_target(profile_path: Path, tmp_path: Path) -> None:
    link = tmp_path / "tuner.conf"
    link.symlink_to(tmp_path / "gone" / "tuner.conf")
    line = refused(["export", "nccl-tuner", str(profile_path), "-O", str(link)])
    target = tmp_path / "gone" / "tuner.conf"
    assert line == f"error: {link}: is a symlink to {target}, which does not exist; give the target itself"
    assert link.is_symlink()


def test_export_refuses_to_overwrite_its_input_profile(profile_path: Path, tmp_path: Path) -> None:
    before = profile_path.read_bytes()
    line = refused(["export", "env", str(profile_path), "-O", str(profile_path)])
    assert line == f"error: -O {profile_path} is the input profile; write the export to another file"
    link = tmp_path / "same.yaml"
    link.symlink_to(profile_path)
    line = refused(["export", "nccl-tuner", str(profile_path), "-O", str(link)])
    assert line == f"error: -O {link} is the input profile; write the export to another file"
    assert profile_path.read_bytes() == before and link.is_symlink()


@pytest.mark.parametrize("name", ["p-results.jsonl", "rows.CSV", "rows.parquet"])
def test_export_never_overwrites_an_existing_results_file(profile_path: Path, tmp_path: Path, name: str) -> None:
    results = tmp_path / name
    results.write_text('{"op": "all-reduce", "time_us": 1.0}\n')
    line = refused(["export", "nccl-tuner", str(profile_path), "-O", str(results)])
    suffix = results.suffix.lower()
    assert line == (
        f"error: -O {results}: an existing {suffix} file may hold measured results, and export never overwrites one; "
        "name a new file"
    )
    assert results.read_text() == '{"op": "all-reduce", "time_us": 1.0}\n'


def test_export_to_dash_prints_to_stdout_and_writes_no_file(
    profile_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    to_stdout = CliRunner().invoke(app, ["export", "ompi-rules", str(profile_path), "--from-other-backend"])
    to_dash = CliRunner().invoke(app, ["export", "ompi-rules", str(profile_path), "--from-other-backend", "-O", "-"])
    assert to_stdout.exit_code == to_dash.exit_code == 0, to_dash.output
    assert to_dash.stdout == to_stdout.stdout and to_dash.stdout.strip()
    assert "dynamic_rules_filename" not in to_dash.stderr
    assert not (tmp_path / "-").exists()


def test_dash_is_never_a_file_name_for_a_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputFileError, match="-: is not a file name collbench writes to"):
        atomic_write_text(Path("-"), "x")
    assert not (tmp_path / "-").exists()


def test_proc_version_as_output_says_proc_takes_no_files(profile_path: Path, tmp_path: Path) -> None:
    line = refused(["export", "env", str(profile_path), "-O", "/proc/version"])
    assert (
        line == "error: /proc/version: cannot write here: /proc refuses new files "
        "(a kernel file system such as /proc or /sys)"
    )
    with pytest.raises(InputFileError, match="refuses new files"):
        check_writable(Path("/proc/collbench-new-file"))
