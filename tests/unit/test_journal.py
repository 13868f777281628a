"""collbench.results.journal: whole rows or nothing, torn tails set aside, one writer per file."""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from pathlib import Path

import pytest

from collbench.errors import ConfigError, InputFileError
from collbench.results.journal import append_line, empty_file, exclusive_writer, refuse_symlink, set_torn_tail_aside


def test_append_line_refuses_nan_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    append_line(path, {"a": 1})
    with pytest.raises(ValueError):
        append_line(path, {"a": float("nan")})
    assert path.read_text() == '{"a": 1}\n'


def test_append_line_cut_short_by_the_disk_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    # RLIMIT_FSIZE makes write() fail part-way (EFBIG), as a full disk does: the half row must go.
    path = tmp_path / "s.jsonl"
    append_line(path, {"a": 1})
    size = path.stat().st_size
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 10, hard))
    try:
        with pytest.raises(OSError):
            append_line(path, {"long": "x" * 100})
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
    assert path.read_text() == '{"a": 1}\n'


def test_torn_tail_is_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": 3, "b"')
    note = set_torn_tail_aside(path)
    assert "cut short" in note and "s.jsonl.torn" in note
    assert path.read_bytes() == b'{"a": 1}\n{"a": 2}\n'
    assert (tmp_path / "s.jsonl.torn").read_bytes() == b'{"a": 3, "b"\n'
    assert set_torn_tail_aside(path) == ""
    append_line(path, {"a": 4})
    assert [json.loads(line)["a"] for line in path.read_text().splitlines()] == [1, 2, 4]


def test_torn_tail_of_a_file_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a"')
    set_torn_tail_aside(path)
    assert path.read_bytes() == b""


def test_torn_file_is_never_a_followed_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a')
    (tmp_path / "s.jsonl.torn").symlink_to(victim)
    with pytest.raises(InputFileError, match="torn"):
        set_torn_tail_aside(path)
    assert victim.read_text() == "precious\n"
    assert path.read_bytes() == b'{"a": 1}\n{"a'  # nothing cut when the fragment could not be kept


def test_second_writer_is_refused_naming_the_first(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with exclusive_writer([path]):
        # flock conflicts between two open file descriptions, even in one process.
        refused = pytest.raises(ConfigError, match=f"being written by another collbench run \\(pid {os.getpid()} on ")
        with refused, exclusive_writer([tmp_path / "other.csv", path]):
            pass
        assert not (tmp_path / ".other.csv.lock").exists()  # released when refused
    assert not (tmp_path / ".s.jsonl.lock").exists()
    with exclusive_writer([path]):  # free again
        pass


def test_planted_lock_symlink_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / ".s.jsonl.lock").symlink_to(victim)
    with pytest.raises(InputFileError, match="symlink"), exclusive_writer([tmp_path / "s.jsonl"]):
        pass
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_lock_file_that_is_not_a_regular_file_is_one_error(tmp_path: Path, kind: str) -> None:
    lock = tmp_path / ".s.jsonl.lock"
    if kind == "fifo":
        os.mkfifo(lock)  # opened for reading and writing without O_NONBLOCK it would block
    else:
        lock.mkdir()
    with pytest.raises(InputFileError) as caught, exclusive_writer([tmp_path / "s.jsonl"]):
        pass
    assert "\n" not in str(caught.value) and str(lock) in str(caught.value)
    assert lock.is_fifo() if kind == "fifo" else lock.is_dir()  # left for its owner to remove


def test_the_refusal_names_the_holders_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", ["/usr/bin/collbench", "sweep", "--algo", "ring", "--stream", "s.jsonl"])
    path = tmp_path / "s.jsonl"
    with exclusive_writer([path]), pytest.raises(ConfigError) as caught, exclusive_writer([path]):
        pass
    assert f"(pid {os.getpid()} on " in str(caught.value)
    assert ": collbench sweep --algo ring --stream s.jsonl)" in str(caught.value)


def test_results_are_never_written_through_a_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "s.jsonl"
    link.symlink_to(victim)
    with pytest.raises(OSError):
        append_line(link, {"a": 1})
    with pytest.raises(InputFileError, match="is a symlink"):
        empty_file(link)
    with pytest.raises(InputFileError, match="is a symlink"):
        refuse_symlink(link)
    assert victim.read_text() == "precious\n"


def test_the_streams_check_and_the_misfiled_files_name_rows_alike(tmp_path: Path) -> None:
    # One test of a row line (filekinds.is_row_line) for both: a sweep's --stream check, which keeps a torn
    # only row (a sweep killed in its first write), and kind_of_text, which names a file for an error.
    from collbench.filekinds import RESULTS_KIND, kind_of_text
    from collbench.results.journal import first_line_kind

    rows = Path(__file__).resolve().parents[2] / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
    row = rows.read_text().splitlines()[0]
    fits = json.dumps({"fits": [{"op": "all-reduce", "algo": "ring", "world_size": 2}]})
    cases = {
        "rows": (rows.read_text(), "row", True),
        "a row with no time": (json.dumps({"size_bytes": 8}) + "\n", "row", True),
        "fits on one line": (fits + "\n", "other", False),
        "pretty JSON": ('{\n  "size_bytes": 8\n}\n', "other", False),
        "torn only row": (row[:100], "row", False),  # kept by the stream check; not named rows in an error
        "torn row, then more": (row[:100] + "\n" + row + "\n", "other", False),
    }
    for name, (text, stream_kind, named_rows) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text(text)
        assert first_line_kind(path) == stream_kind, name
        found = kind_of_text(text)
        assert (found is not None and found[0] == RESULTS_KIND) == named_rows, name
