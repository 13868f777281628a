"""collbench.fileio: user-named files read and written with one InputFileError, never a traceback."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from large_inputs import alias_bomb

from collbench.errors import InputFileError
from collbench.fileio import atomic_output, atomic_write_text, check_writable, read_text_file
from collbench.yamljson import parse_json, parse_yaml


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
    # A missing folder is refused, naming the first one missing: a typo's folders are never made.
    with pytest.raises(InputFileError, match=f"the folder {tmp_path / 'new'} does not exist"):
        check_writable(tmp_path / "new" / "deeper" / "f.txt")
    check_writable(tmp_path / "f.txt")
    with pytest.raises(InputFileError, match="directory"):
        check_writable(tmp_path)
    blocker = tmp_path / "afile"
    blocker.write_text("")
    with pytest.raises(InputFileError, match="cannot write"):
        check_writable(blocker / "x.txt")


def test_atomic_write_text(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    p = tmp_path / "sub" / "o.txt"
    atomic_write_text(p, "one\n")
    atomic_write_text(p, "two\n")
    assert p.read_text() == "two\n"
    assert [q.name for q in p.parent.iterdir()] == ["o.txt"]
    with pytest.raises(InputFileError):
        atomic_write_text(tmp_path, "x")


def test_atomic_write_never_follows_a_planted_temp_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    target = tmp_path / "out.txt"
    # The fixed names collbench once used for its temporary files.
    for name in (".out.txt.tmp", "out.txt.tmp"):
        (tmp_path / name).symlink_to(victim)
    atomic_write_text(target, "new\n")
    assert target.read_text() == "new\n" and victim.read_text() == "precious\n"


def test_atomic_write_keeps_the_old_mode_or_gives_the_umask_one(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.txt"
    atomic_write_text(fresh, "x")
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o666 & ~mask
    fresh.chmod(0o640)
    atomic_write_text(fresh, "y")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o640


def test_atomic_output_removes_its_temp_file_on_error(tmp_path: Path) -> None:
    target = tmp_path / "o.bin"
    with pytest.raises(RuntimeError), atomic_output(target) as f:
        f.write(b"half")
        raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []


def test_yaml_alias_bomb_is_one_line(tmp_path: Path) -> None:
    # Bounded work (once it took 33 s and 3 GB): the time is benchmarks/bench_input_bounds.py's to say.
    with pytest.raises(InputFileError, match="aliases expand to more than"):
        parse_yaml(alias_bomb(10), tmp_path / "t.yaml")


def test_yaml_of_more_values_than_the_alias_bound_written_out_is_read(tmp_path: Path) -> None:
    # discover --probe across 512 ranks writes 130,816 links, 1.8 million YAML nodes: tune --topology
    # refused that file with 'aliases expand to more than 1,000,000 values', though it holds no alias.
    links = "".join(f"- {{a: GPU{i}, b: GPU{i + 1}, kind: measured, bandwidth_gbps: 12.5}}\n" for i in range(120_000))
    data = parse_yaml("links:\n" + links, tmp_path / "t.yaml")
    assert len(data["links"]) == 120_000 and data["links"][-1]["b"] == "GPU120000"
    # Aliases still count: a few of them standing for a million and more values beside it are refused.
    with pytest.raises(InputFileError, match="aliases expand to more than"):
        parse_yaml("links:\n" + links + alias_bomb(7), tmp_path / "t.yaml")


def test_yaml_small_alias_use_and_self_reference(tmp_path: Path) -> None:
    assert parse_yaml("a: &x {b: 1}\nc: *x\n", tmp_path / "t.yaml") == {"a": {"b": 1}, "c": {"b": 1}}
    with pytest.raises(InputFileError, match="refers to itself"):
        parse_yaml("a: &x [1, *x]\n", tmp_path / "t.yaml")


@pytest.mark.parametrize("parse", [parse_yaml, parse_json])
def test_deep_nesting_is_one_line(tmp_path: Path, parse: Any) -> None:
    with pytest.raises(InputFileError, match="nested too deeply"):
        parse("[" * 100_000 + "]" * 100_000, tmp_path / "t")
