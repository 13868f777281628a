"""A hostile Parquet file cannot make collbench decode a huge batch before the row bound is checked.

The bound on a row (``MAX_LINE_BYTES``, issue 36) was checked on each batch of ``TABLE_CHUNK_ROWS`` rows
after pyarrow had decoded it: 4096 rows of up to 1 MiB each, or one long value that a dictionary column
stores once and a dense read copies out once per row. Now text columns are read dictionary-encoded and
a batch holds at most ``PARQUET_BATCH_BYTES`` of its row group's uncompressed bytes (from the file's
metadata). The files are crafted in tmp_path with pyarrow, as another tool would write them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from synthetic_rows import point_row
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import InputFileError
from collbench.results import io as results


def _table(rows: int, host: pa.Array) -> pa.Table:
    base = [point_row("ring", 1 << (k % 20), 10.0 + k, world_size=4).to_dict() for k in range(rows)]
    columns = {name: [row[name] for row in base] for name in base[0]}
    table = pa.table({name: values for name, values in columns.items() if name != "host"})
    return table.append_column("host", host)


def _spy_batches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(rows, decoded bytes) of each batch as the row bound sees it: what pyarrow had decoded by then."""
    checked: list[tuple[int, int]] = []
    real = results._check_row_bytes

    def spy(path: Path, batch: Any, first: int) -> None:
        checked.append((batch.num_rows, batch.nbytes))
        real(path, batch, first)

    monkeypatch.setattr(results, "_check_row_bytes", spy)
    return checked


def test_one_long_value_repeated_by_a_dictionary_is_refused_without_copying_it_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2,000 rows share one 2 MiB host name: a few kB in the file, 4 GB once decoded densely.
    rows, long = 2000, "h" * (2 << 20)
    host = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array([long]))
    path = tmp_path / "repeated.parquet"
    pq.write_table(_table(rows, host), path)
    assert path.stat().st_size < 1 << 20
    checked = _spy_batches(monkeypatch)
    result = CliRunner().invoke(app, ["fit", str(path)], env={"COLUMNS": "80"})
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert lines == [f"error: {path}: row 1: not a result row (longer than {results.MAX_LINE_BYTES} bytes)"]
    assert len(checked) == 1 and checked[0][1] < 4 << 20, checked  # the value once, not 2,000 times


def test_a_batch_decodes_at_most_its_share_of_the_row_groups_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The bound scaled down (4 KiB a row, 64 KiB a batch) the way tests/unit/test_results_streaming does:
    # 4,096 rows, every other one 6 kB of distinct text (past the bound, though the group's average,
    # about 3 kB a row, is within it). Before, the whole group was one batch: 4,096 rows, 12 MB.
    monkeypatch.setattr(results, "MAX_LINE_BYTES", 4096)
    monkeypatch.setattr(results, "PARQUET_BATCH_BYTES", 64 << 10)
    rows = 4096
    host = pa.array(["h" if i % 2 == 0 else f"{i:06d}" + "x" * 6000 for i in range(rows)])
    path = tmp_path / "long.parquet"
    # Plain text (no dictionary page, which pyarrow decodes whole whatever the batch): only the batch's
    # own rows are decoded.
    pq.write_table(_table(rows, host), path, row_group_size=rows, use_dictionary=False)
    group = pq.ParquetFile(path).metadata.row_group(0)
    assert group.num_rows == rows and group.total_byte_size <= 4096 * rows
    checked = _spy_batches(monkeypatch)
    with pytest.raises(InputFileError, match=r"long\.parquet: row 2: not a result row \(longer than 4096 bytes\)"):
        results.read_rows(path)
    per_row = -(-group.total_byte_size // rows)
    assert len(checked) == 1, checked  # refused at the first batch
    assert checked[0][0] == (64 << 10) // per_row < 64
    assert checked[0][1] < 2 * (64 << 10)


def test_rows_within_the_bound_read_the_same_in_small_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A batch of a few rows (the group's bytes a row set high) and dictionary-encoded text still give
    # back the rows written, nulls included.
    rows = [point_row("ring", 1 << k, 10.0 + k, world_size=4) for k in range(10)]
    path = tmp_path / "r.parquet"
    results.write_rows(path, rows)
    monkeypatch.setattr(results, "PARQUET_BATCH_BYTES", 1)
    assert results.read_rows(path) == rows


def test_without_pyarrow_a_parquet_file_is_not_read_whole_but_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pandas' other engine (fastparquet) decodes a file whole, past any bound: reading is pyarrow's alone.
    path = tmp_path / "r.parquet"
    results.write_rows(path, [point_row("ring", 1024, 10.0)])
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # `import pyarrow.parquet` raises ImportError
    with pytest.raises(InputFileError, match=r"r\.parquet: reading Parquet needs pyarrow \(pip install pyarrow"):
        results.read_rows(path)
