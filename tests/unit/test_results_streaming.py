"""Readers that stream: JSONL a line at a time (with a bound on a line), CSV and Parquet in chunks,
with the same rows and the same file/line/field in their errors as a whole-file read."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from synthetic_rows import point_row

from collbench.errors import InputFileError
from collbench.results import io as results
from collbench.results.io import iter_rows, read_rows, write_rows

ROWS = [point_row("ring", 1 << k, 10.0 + k, world_size=4) for k in range(10)]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_rows_read_in_chunks_are_the_rows_written(tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Chunks of 3 rows: 10 rows cross three chunk boundaries and end in a short chunk.
    monkeypatch.setattr(results, "TABLE_CHUNK_ROWS", 3)
    path = tmp_path / f"r{suffix}"
    write_rows(path, ROWS)
    assert read_rows(path) == ROWS


# CSV names the file's line (the header is line 1); Parquet, which has no lines, the row from 1.
@pytest.mark.parametrize(("suffix", "where"), [(".csv", "r.csv:9: not a"), (".parquet", "r.parquet: row 8: not a")])
def test_a_bad_row_past_a_chunk_boundary_names_its_line(
    tmp_path: Path, suffix: str, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results, "TABLE_CHUNK_ROWS", 3)
    path = tmp_path / f"r{suffix}"
    bad = [*ROWS[:7], dataclasses.replace(ROWS[7], op="all-to-nowhere"), *ROWS[8:]]
    # Written past write_rows' own check, as another tool (or a hand edit) would.
    monkeypatch.setattr(results.ResultRow, "from_dict", classmethod(lambda cls, data: cls(**data)))
    write_rows(path, bad)
    monkeypatch.undo()
    monkeypatch.setattr(results, "TABLE_CHUNK_ROWS", 3)
    rows = iter_rows(path)
    assert [next(rows) for _ in range(7)] == ROWS[:7]  # the rows before it are read before it is found
    with pytest.raises(InputFileError, match="op") as err:
        next(rows)
    assert str(err.value).startswith(str(path.parent)) and where in str(err.value)


def test_a_csv_that_breaks_further_in_is_one_input_file_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(results, "TABLE_CHUNK_ROWS", 3)
    path = tmp_path / "r.csv"
    write_rows(path, ROWS)
    text = path.read_text().splitlines()
    text[8] += ',"unterminated'
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(InputFileError, match="cannot read results"):
        read_rows(path)


def test_a_line_longer_than_the_bound_is_refused_without_reading_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results, "MAX_LINE_BYTES", 4096)
    path = tmp_path / "r.jsonl"
    write_rows(path, ROWS[:2])
    with path.open("ab") as f:
        f.write(b'{"op": "' + b"x" * 10_000 + b'"}\n')
    rows = iter_rows(path)
    assert [next(rows) for _ in range(2)] == ROWS[:2]
    with pytest.raises(InputFileError, match=r"r\.jsonl:3: .*longer than 4096 bytes"):
        next(rows)


def test_a_row_at_the_bound_is_still_a_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "r.jsonl"
    write_rows(path, ROWS[:1])
    monkeypatch.setattr(results, "MAX_LINE_BYTES", len(path.read_bytes()))
    assert read_rows(path) == ROWS[:1]
