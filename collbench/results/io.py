"""Result rows in files: JSONL while running (one row a line, appended as measured), CSV or Parquet
at the end; pandas only at that edge."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, cast

from collbench.errors import InputFileError
from collbench.fileio import atomic_output
from collbench.results.journal import append_line, json_line
from collbench.results.row import ResultRow
from collbench.yamljson import json_int


def append_jsonl(path: Path, row: ResultRow) -> None:
    """Append one row as one whole line, flushed to disk, so a crash loses nothing measured.

    Raises ValueError for a row that is not finite (never written), OSError when the disk refuses
    (the file is then left as it was before the call).
    """
    append_line(path, row.to_dict())


RESULT_SUFFIXES = (".jsonl", ".csv", ".parquet")
"""The names of the files collbench writes and reads rows in."""
MAX_LINE_BYTES = 1 << 20
"""The longest line a JSONL reader accepts: a row is well under a kilobyte, and a reader that streams must
not hold a line of unbounded length."""


def read_jsonl(path: Path) -> Iterator[ResultRow]:
    """Rows of a JSONL file, read a line at a time; a torn last line (a crash mid-write) is skipped.

    Raises InputFileError naming the file, line and field for a missing file, a directory, text that
    is not UTF-8, a line that is not JSON (but a last one without its newline), a line longer than
    ``MAX_LINE_BYTES``, not a JSON object, or a field of the wrong type or range.
    """
    if path.is_dir():
        raise InputFileError(str(path), "is a directory (expected a JSONL file of collbench result rows)")
    try:
        f = path.open("rb")
    except FileNotFoundError:
        raise InputFileError(str(path), "no such file (expected a JSONL file of collbench result rows)") from None
    except OSError as exc:
        raise InputFileError(str(path), f"cannot read: {exc.strerror or exc}") from None
    with f:
        lineno = 0
        while True:
            try:
                raw = f.readline(MAX_LINE_BYTES + 1)
            except OSError as exc:
                raise InputFileError(str(path), f"cannot read: {exc.strerror or exc}") from None
            if not raw:
                return
            lineno += 1
            if len(raw) > MAX_LINE_BYTES:
                # Read no further: a file of one endless line must not be held whole to be refused.
                raise InputFileError(str(path), f"not a result row (longer than {MAX_LINE_BYTES} bytes)", line=lineno)
            if lineno == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")  # an editor's byte-order mark: no part of the row
            row = _parse_line(path, lineno, raw)
            if row is not None:
                yield row


def _parse_line(path: Path, lineno: int, raw: bytes) -> ResultRow | None:
    # Lines end at b"\n" only, as the writer ends rows (str.splitlines would also split on \x1c...).
    torn = not raw.endswith(b"\n")
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if lineno == 1 and _utf16(raw):
            # A stream re-saved by PowerShell or Notepad as "Unicode": read a line at a time, it is no text.
            raise InputFileError(
                str(path), "is UTF-16 text (saved by a Windows tool); results are UTF-8: save it as UTF-8"
            ) from None
        # Not torn by a crash: rows are written as ASCII JSON, so a cut one is still text.
        raise InputFileError(str(path), f"not text (byte {exc.start} is not UTF-8)", line=lineno) from None
    if not line.strip():
        return None
    try:
        data = json.loads(line, parse_int=json_int)
    except (json.JSONDecodeError, RecursionError) as exc:
        if torn:
            return None
        msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise InputFileError(str(path), f"not a JSON row ({msg})", line=lineno) from None
    except ValueError as exc:  # json_int: an integer too long to be a number of a row
        raise InputFileError(str(path), f"not a result row ({exc})", line=lineno) from None
    if not isinstance(data, dict):
        raise InputFileError(str(path), f"not a result row (a JSON {type(data).__name__}, not an object)", line=lineno)
    try:
        return ResultRow.from_dict(data)
    except (TypeError, ValueError) as exc:
        raise InputFileError(str(path), f"not a collbench result row ({exc})", line=lineno) from None


def _utf16(raw: bytes) -> bool:
    """Whether a first line opens with UTF-16's mark and reads, so, as mostly ASCII text (binary that opens
    with the mark reads as CJK)."""
    encoding = {b"\xff\xfe": "utf-16-le", b"\xfe\xff": "utf-16-be"}.get(raw[:2])
    if encoding is None:
        return False
    body = raw[2 : 2 + (len(raw) - 2) // 2 * 2]
    text = body.decode(encoding, errors="replace")
    return bool(text) and sum(c.isascii() for c in text) * 2 >= len(text)


def parquet_problem() -> str | None:
    """Why Parquet cannot be read or written here, or None. Only pyarrow will do: it is not among
    collbench's own dependencies (it is in the ``parquet`` and ``test`` extras), and pandas' other
    engine, fastparquet, decodes a file whole before any row's bound can be checked, so a file it wrote
    could not be read back here (:func:`read_rows`). Without pyarrow, pandas raised ImportError only once
    the sweep had measured everything."""
    import importlib.util

    if importlib.util.find_spec("pyarrow") is not None:
        return None
    return "Parquet needs pyarrow (pip install pyarrow, or collbench[parquet]); .jsonl and .csv need nothing more"


def write_rows(path: Path, rows: Iterable[ResultRow]) -> None:
    """Write rows to ``.jsonl``, ``.csv`` or ``.parquet`` (by extension), atomically.

    Every row is checked as a reader would check it first: a file collbench writes always reads back.
    Raises InputFileError for another extension, a row that would not read back (naming its field),
    or when the file cannot be written.
    """
    rows = list(rows)
    suffix = path.suffix.lower()
    if suffix not in RESULT_SUFFIXES:
        raise InputFileError(str(path), "unknown results format; use .jsonl, .csv or .parquet")
    if suffix == ".parquet" and (problem := parquet_problem()) is not None:
        raise InputFileError(str(path), problem)
    for index, row in enumerate(rows, start=1):
        try:
            ResultRow.from_dict(row.to_dict())
        except ValueError as exc:
            raise InputFileError(str(path), f"row {index} was not written: {exc}") from None
    with atomic_output(path) as f:
        if suffix == ".jsonl":
            for row in rows:
                f.write(json_line(row.to_dict()))
        else:
            import pandas as pd

            columns = [field.name for field in dataclasses.fields(ResultRow)]
            frame = pd.DataFrame([r.to_dict() for r in rows], columns=columns)
            if suffix == ".csv":
                f.write(frame.to_csv(index=False).encode("utf-8"))
            else:
                frame.to_parquet(f, index=False, engine="pyarrow")


def read_rows(path: Path) -> list[ResultRow]:
    """Read result rows from a ``.jsonl``, ``.csv`` or ``.parquet`` file.

    Raises InputFileError naming the file, line (CSV: the file's line; Parquet: the row) and field.
    """
    return list(iter_rows(path))


def check_regular_file(path: Path) -> None:
    """Refuse what is not a regular file before a reader opens it: a FIFO blocks the open until a
    writer comes, and ``/dev/zero`` or ``/dev/urandom`` never end.

    Raises InputFileError for a missing file, a directory, a FIFO, a device or a socket.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputFileError(str(path), "no such file") from None
    except OSError as exc:
        raise InputFileError(str(path), f"cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise InputFileError(str(path), "is a directory (expected a results file or an nccl-tests log)")
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
        raise InputFileError(str(path), f"is {kind}, not a regular file (expected a results file or an nccl-tests log)")


def iter_rows(path: Path) -> Iterator[ResultRow]:
    """The rows of a results file one at a time (all three formats stream).

    Raises InputFileError as :func:`read_rows`, for what is not a regular file, and for a file with no rows.
    """
    check_regular_file(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows: Iterator[ResultRow] = read_jsonl(path)
    elif suffix in (".csv", ".parquet"):
        rows = _read_table(path, suffix)
    else:
        raise InputFileError(str(path), "unknown results format; use .jsonl, .csv or .parquet")
    empty = True
    for row in rows:
        empty = False
        yield row
    if empty:
        raise InputFileError(str(path), "no result rows in the file")


TABLE_CHUNK_ROWS = 4096
"""CSV and Parquet files are read this many rows at a time, so that a reader that streams holds no
more of the file than that."""


def _read_table(path: Path, suffix: str) -> Iterator[ResultRow]:
    # CSV: line 1 is the header; Parquet has no lines, so its rows are counted from 1.
    where = 2 if suffix == ".csv" else 1
    for frame in _table_chunks(path, suffix):
        if suffix == ".csv" and where == 2:
            _check_separator(path, [str(c) for c in frame.columns])
        frame = frame.astype(object).where(frame.notna(), None)
        for rec in frame.to_dict(orient="records"):
            try:
                yield ResultRow.from_dict({str(k): v for k, v in rec.items()})
            except (TypeError, ValueError) as exc:
                if suffix == ".csv":
                    raise InputFileError(str(path), f"not a collbench result row ({exc})", line=where) from None
                raise InputFileError(str(path), f"row {where}: not a collbench result row ({exc})") from None
            where += 1


def _check_separator(path: Path, columns: list[str]) -> None:
    """InputFileError for a CSV whose header is one column of the fields joined by another separator: a
    spreadsheet saving for a locale of decimal commas writes ';' (and a TSV '\t'), and every row then
    said only "field op: missing"."""
    if len(columns) != 1 or "size_bytes" not in columns[0]:
        return
    joined = next((sep for sep in (";", "\t", "|") if sep in columns[0]), None)
    if joined is not None:
        raise InputFileError(
            str(path),
            f"its header is one column of fields joined by {joined!r} (a spreadsheet saving for a locale of"
            " decimal commas writes ';'): collbench reads CSV of ',' separators and '.' decimals, as sweep"
            " -O FILE.csv writes it",
            line=1,
        )


def _table_chunks(path: Path, suffix: str) -> Iterator[Any]:
    """The file's rows as pandas frames of ``TABLE_CHUNK_ROWS`` rows; InputFileError for a bad file."""
    import pandas as pd

    stack = contextlib.ExitStack()
    try:
        if suffix == ".csv":
            # CSV cells stay text: each field's annotation decides what one becomes (and "" is empty).
            source = _BoundedLines(path)
            stack.callback(source.close)
            # pandas reads any object with read(); its stubs name a protocol of their own.
            chunks: Iterator[Any] = iter(
                pd.read_csv(cast(Any, source), dtype=str, keep_default_na=False, chunksize=TABLE_CHUNK_ROWS)
            )
        else:
            try:
                import pyarrow.parquet as pq
            except ImportError:
                # pandas' other engine, fastparquet, would decode the file whole before any row's
                # bound could be checked: a reader that streams is pyarrow's alone.
                raise InputFileError(
                    str(path),
                    "reading Parquet needs pyarrow (pip install pyarrow, or collbench[parquet]), which reads it a "
                    "batch at a time within the bound on a row",
                ) from None
            else:
                parquet = pq.ParquetFile(path)
                _check_row_count(path, parquet.metadata.num_rows)
                _check_row_groups(path, parquet.metadata)
                # Text columns stay dictionary-encoded as read: a column that repeats one long value
                # (a few bytes a row in the file) would otherwise be copied out once per row before
                # any row could be measured.
                text = [f.name for f in parquet.schema_arrow if _is_text(f.type)]
                parquet = pq.ParquetFile(path, metadata=parquet.metadata, read_dictionary=text)
                chunks = _parquet_frames(path, parquet)
    except InputFileError:
        stack.close()
        raise
    except Exception as exc:  # pandas and pyarrow raise many types for a bad file
        stack.close()
        raise _unreadable(path, exc) from None
    with stack:
        while True:
            try:
                frame = next(chunks)
            except StopIteration:
                return
            except InputFileError:
                raise
            except Exception as exc:  # a bad line or page further into the file
                raise _unreadable(path, exc) from None
            yield frame


def _unreadable(path: Path, exc: Exception) -> InputFileError:
    """What pandas' or pyarrow's ``exc`` says of ``path``: the system's read error (an errno: the disk, not
    the contents) in the words every reader uses, else what the library found wrong in the file."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return InputFileError(str(path), f"cannot read: {exc.strerror or exc}")
    return InputFileError(str(path), f"cannot read results ({_one_line(exc)})")


class _BoundedLines:
    """A CSV file as pandas reads it, a block at a time, refused (InputFileError naming the line) as soon
    as one line runs past ``MAX_LINE_BYTES``: the bound a JSONL line has. pandas would hold a line
    whole, however long, before it could say anything of it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = path.open("rb")
        self._line = 1
        self._run = 0  # bytes of the current line read so far

    def read(self, size: int = -1) -> bytes:
        block = self._file.read(size if 0 < size <= 1 << 20 else 1 << 20)
        start = 0
        while (end := block.find(b"\n", start)) >= 0:
            self._check(self._run + end + 1 - start)
            self._line, self._run, start = self._line + 1, 0, end + 1
        self._run += len(block) - start
        self._check(self._run)
        return block

    def _check(self, length: int) -> None:
        if length > MAX_LINE_BYTES:
            raise InputFileError(
                str(self.path), f"not a result row (longer than {MAX_LINE_BYTES} bytes)", line=self._line
            )

    def close(self) -> None:
        self._file.close()


MIN_PARQUET_BYTES_PER_ROW = 1
"""The fewest bytes of a Parquet file one result row can honestly take. Measured rows differ in their
times, so even a file of one run's rows repeated 200 times takes ~5 bytes a row; a file that claims
more rows than it has bytes (20 million in 2.5 MB) is columns of repeats, built to keep a reader busy
for minutes."""


def _check_row_count(path: Path, rows: int) -> None:
    """InputFileError, before any row is read, when ``rows`` is more than the file's size can hold."""
    size = path.stat().st_size
    if rows * MIN_PARQUET_BYTES_PER_ROW > size:
        raise InputFileError(
            str(path),
            f"claims {rows:,} rows in {size:,} bytes; a result row takes at least {MIN_PARQUET_BYTES_PER_ROW} "
            "byte, so the file is not results as collbench or pandas write them",
        )


PARQUET_BATCH_BYTES = 16 << 20
"""The most of a row group's uncompressed bytes (by its metadata) one Parquet batch decodes: a group
whose rows take 1 MiB each is read 16 rows at a time, so a batch past the row bound is refused when
16 MiB, not 4096 rows of it, have been decoded. A real row takes a few hundred bytes: 4096 of them,
``TABLE_CHUNK_ROWS``, are about 1 MiB."""


def _is_text(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _parquet_frames(path: Path, parquet: Any) -> Iterator[Any]:
    """The file's rows as frames of at most ``TABLE_CHUNK_ROWS`` rows and ``PARQUET_BATCH_BYTES`` of
    their row group's bytes, each batch refused (InputFileError naming the row) where a row's text
    runs past ``MAX_LINE_BYTES``, before pandas makes objects of it."""
    metadata = parquet.metadata
    first = 1
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        if group.num_rows <= 0:
            continue
        per_row = max(1, -(-group.total_byte_size // group.num_rows))
        batch_rows = max(1, min(TABLE_CHUNK_ROWS, PARQUET_BATCH_BYTES // per_row))
        for batch in parquet.iter_batches(batch_size=batch_rows, row_groups=[index]):
            _check_row_bytes(path, batch, first)
            first += batch.num_rows
            yield batch.to_pandas()


def _check_row_bytes(path: Path, batch: Any, first: int) -> None:
    """InputFileError naming the row (counted from ``first``) whose text columns together take more
    than ``MAX_LINE_BYTES``. A dictionary column's lengths are its values' lengths taken by index, so
    a repeated value is never copied out to be measured."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lengths = []
    for column in batch.columns:
        if pa.types.is_dictionary(column.type) and _is_text(column.type.value_type):
            each = pc.take(pc.binary_length(column.dictionary), column.indices)
        elif _is_text(column.type):
            each = pc.binary_length(column)
        else:
            continue
        lengths.append(pc.fill_null(each, 0).cast(pa.int64()))
    if not lengths or not batch.num_rows:
        return
    sizes = lengths[0]
    for more in lengths[1:]:
        sizes = pc.add(sizes, more)
    longest = pc.max(sizes).as_py()
    if longest > MAX_LINE_BYTES:
        row = first + pc.index(sizes, longest).as_py()
        raise InputFileError(str(path), f"row {row}: not a result row (longer than {MAX_LINE_BYTES} bytes)")


def _check_row_groups(path: Path, metadata: Any) -> None:
    """InputFileError, before a row group is read, for one whose rows take more than ``MAX_LINE_BYTES``
    each on average uncompressed: pyarrow reads a group whole, and the row a JSONL line may hold is
    the bound (a few hundred bytes is a real row)."""
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        if group.total_byte_size > MAX_LINE_BYTES * max(1, group.num_rows):
            raise InputFileError(
                str(path),
                f"row group {index + 1}: {group.total_byte_size:,} bytes for {group.num_rows:,} rows, more than "
                f"{MAX_LINE_BYTES} bytes a row; not results as collbench or pandas write them",
            )


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."
