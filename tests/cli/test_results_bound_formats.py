"""The bound on a results row (issue 36: a row longer than ``MAX_LINE_BYTES`` is refused in one line, the
file never held whole) holds for CSV and Parquet as for JSONL, in every command that reads results:
``report``, ``fit`` and ``compare``. pandas read a CSV line whole, however long, and pyarrow a
Parquet row group: both read a 20 kB row at a bound of 4 KiB. The bound is set small the way
tests/unit/test_results_streaming sets it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from synthetic_rows import point_row
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results import io as results
from collbench.results.io import write_rows

BOUND = 4096
ROWS = [point_row("ring", 1 << k, 10.0 + k, world_size=4) for k in range(10)]
LONG = dataclasses.replace(ROWS[3], host="h" * 20_000)  # a row of 20 kB: its host name


def _commands(path: Path, good: Path, tmp_path: Path) -> dict[str, list[str]]:
    return {
        "report": ["report", str(path), "-O", str(tmp_path / "r.html")],
        "fit": ["fit", str(path)],
        "compare": ["compare", str(good), str(path)],
    }


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_a_row_past_the_bound_is_one_line_and_exit_2_in_report_fit_and_compare(
    tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results, "MAX_LINE_BYTES", BOUND)
    path, good = tmp_path / f"long{suffix}", tmp_path / f"good{suffix}"
    write_rows(path, [*ROWS[:3], LONG, *ROWS[4:]])
    write_rows(good, ROWS)
    for name, args in _commands(path, good, tmp_path).items():
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
        assert result.exit_code == 2, (name, result.output)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {path}"), (name, result.stderr)
        assert f"{BOUND} bytes" in lines[0], lines[0]
        if suffix != ".parquet":  # a Parquet file has no lines: its row group is named
            where = 5 if suffix == ".csv" else 4  # the CSV's line 1 is its header
            assert lines[0].startswith(f"error: {path}:{where}: "), lines[0]
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_rows_within_the_bound_are_read(tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(results, "MAX_LINE_BYTES", BOUND)
    good = tmp_path / f"good{suffix}"
    write_rows(good, ROWS)
    assert results.read_rows(good) == ROWS
    result = CliRunner().invoke(app, ["fit", str(good)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output


def test_a_csv_line_past_the_bound_is_refused_before_pandas_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One line of 64 MiB with no newline: the reader stops at the bound's first block, not at the end.
    monkeypatch.setattr(results, "MAX_LINE_BYTES", BOUND)
    path = tmp_path / "endless.csv"
    with path.open("wb") as f:
        f.write(b"op," + b"x" * (64 << 20))
    read_at_refusal: list[int] = []
    real = results._BoundedLines._check

    def spy(self: results._BoundedLines, length: int) -> None:
        try:
            real(self, length)
        except results.InputFileError:
            read_at_refusal.append(self._file.tell())
            raise

    monkeypatch.setattr(results._BoundedLines, "_check", spy)
    with pytest.raises(results.InputFileError, match=rf"endless\.csv:1: .*longer than {BOUND} bytes"):
        results.read_rows(path)
    assert read_at_refusal and read_at_refusal[0] <= 1 << 20  # one block (pandas asks 256 KiB), not 64 MiB
