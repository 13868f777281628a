"""collbench.fileio: user-named files read and written with one InputFileError, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.errors import InputFileError
from collbench.fileio import atomic_write_text, check_writable, read_text_file


def test_read_text_file_reads_utf8(tmp_path: Path) -> None:
    p = tmp_path / "a.txt"
    p.write_text("héllo\n", encoding="utf-8")
    assert read_text_file(p, "text") == "héllo\n"


@pytest.mark.parametrize("kind", ["missing", "directory", "binary"])
def test_read_text_file_refuses_in_one_error(tmp_path: Path, kind: str) -> None:
    p = tmp_path / "x.yaml"
    if kind == "directory":
        p.mkdir()
    elif kind == "binary":
        p.write_bytes(b"\xff\xfe\x00bin")
    with pytest.raises(InputFileError, match="expected a thing") as info:
        read_text_file(p, "a thing")
    assert str(p) in str(info.value)


def test_check_writable(tmp_path: Path) -> None:
    check_writable(tmp_path / "new" / "deeper" / "f.txt")  # missing parents are made later
    with pytest.raises(InputFileError, match="directory"):
        check_writable(tmp_path)
    blocker = tmp_path / "afile"
    blocker.write_text("")
    with pytest.raises(InputFileError, match="cannot write"):
        check_writable(blocker / "x.txt")


def test_atomic_write_text(tmp_path: Path) -> None:
    p = tmp_path / "sub" / "o.txt"
    atomic_write_text(p, "one\n")
    atomic_write_text(p, "two\n")
    assert p.read_text() == "two\n"
    assert [q.name for q in p.parent.iterdir()] == ["o.txt"]
    with pytest.raises(InputFileError):
        atomic_write_text(tmp_path, "x")
