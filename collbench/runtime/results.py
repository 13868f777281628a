"""One measured point, as every later stage (fit, tune, plot, import) reads it.

Columns follow DESIGN.md's measurement conventions: times in microseconds, bandwidths in GB/s
(10^9 bytes/s), ``size_bytes`` as nccl-tests counts it. Files: JSONL while running (one row a line,
appended as measured), CSV or Parquet at the end; pandas only at that edge.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collbench.errors import InputFileError
from collbench.fileio import read_text_file


@dataclass(frozen=True, slots=True)
class ResultRow:
    op: str
    algo: str
    backend: str
    world_size: int
    dtype: str
    redop: str
    in_place: bool
    size_bytes: int
    count: int
    iters: int
    time_us: float
    """The point's time: median over iterations of the slowest rank's time per iteration."""
    time_us_mean: float
    time_us_min: float
    time_us_max: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int
    """Wrong elements found by the data check; -1 when the check was off."""
    nodes: int = 1
    root: int = 0
    layout: str = "rank-order"
    segment_bytes: int | None = None
    host: str = ""
    topology_fingerprint: str = ""
    torch_version: str = ""
    backend_version: str = ""
    cuda_version: str = ""
    driver_version: str = ""
    device_name: str = ""
    nccl_algo: str = ""
    """What NCCL reported choosing (native runs with TUNING logs), or the forced variant."""
    nccl_proto: str = ""
    source: str = "collbench"
    """Who measured it: ``collbench`` or ``nccl-tests`` (imported logs)."""
    timestamp: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ResultRow:
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        # CSV and Parquet readers give NaN/None for empty optional cells.
        seg = kwargs.get("segment_bytes")
        if seg is not None and seg == seg:
            kwargs["segment_bytes"] = int(seg)
        else:
            kwargs["segment_bytes"] = None
        for key in ("world_size", "size_bytes", "count", "iters", "wrong", "nodes", "root"):
            if key in kwargs:
                kwargs[key] = int(kwargs[key])
        if "in_place" in kwargs:
            kwargs["in_place"] = _to_bool(kwargs["in_place"])
        return cls(**kwargs)

    @property
    def key(self) -> tuple[Any, ...]:
        """What identifies a point, for ``--resume``."""
        return (
            self.op,
            self.algo,
            self.backend,
            self.world_size,
            self.dtype,
            self.redop,
            self.in_place,
            self.size_bytes,
            self.root,
            self.layout,
            self.segment_bytes,
        )


def _to_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    return bool(value)


def append_jsonl(path: Path, row: ResultRow) -> None:
    """Append one row and flush it to disk, so a crash loses nothing measured."""
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row.to_dict(), sort_keys=True) + "\n")
        f.flush()


def read_jsonl(path: Path) -> Iterator[ResultRow]:
    """Rows of a JSONL file; a torn last line (a crash mid-write) is skipped.

    Raises InputFileError for a missing file, a directory, text that is not UTF-8, a line that is not
    JSON (but the last) or not a JSON object, or an object that is not a result row.
    """
    # Split on newlines only, as the writer ends rows (str.splitlines would also split on \x1c...).
    lines = read_text_file(path, "a JSONL file of collbench result rows").split("\n")
    if lines and not lines[-1]:
        lines.pop()
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            if lineno == len(lines):
                return
            raise InputFileError(str(path), f"not a JSON row ({exc.msg})", line=lineno) from exc
        if not isinstance(data, dict):
            raise InputFileError(
                str(path), f"not a result row (a JSON {type(data).__name__}, not an object)", line=lineno
            )
        try:
            yield ResultRow.from_dict(data)
        except (TypeError, ValueError) as exc:
            raise InputFileError(str(path), f"not a collbench result row ({exc})", line=lineno) from exc


def write_rows(path: Path, rows: Iterable[ResultRow]) -> None:
    """Write rows to ``.jsonl``, ``.csv`` or ``.parquet`` (by extension), atomically.

    Raises InputFileError for another extension or when the file cannot be written.
    """
    rows = list(rows)
    suffix = path.suffix.lower()
    if suffix not in (".jsonl", ".csv", ".parquet"):
        raise InputFileError(str(path), "unknown results format; use .jsonl, .csv or .parquet")
    tmp = path.with_name(path.name + ".tmp")
    try:
        _write_tmp(tmp, suffix, rows)
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise InputFileError(str(path), f"cannot write results: {exc.strerror or exc}") from None


def _write_tmp(tmp: Path, suffix: str, rows: list[ResultRow]) -> None:
    if suffix == ".jsonl":
        with tmp.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row.to_dict(), sort_keys=True) + "\n")
    elif suffix in (".csv", ".parquet"):
        import pandas as pd

        columns = [f.name for f in dataclasses.fields(ResultRow)]
        frame = pd.DataFrame([r.to_dict() for r in rows], columns=columns)
        if suffix == ".csv":
            frame.to_csv(tmp, index=False)
        else:
            frame.to_parquet(tmp, index=False)


def read_rows(path: Path) -> list[ResultRow]:
    """Read result rows from a ``.jsonl``, ``.csv`` or ``.parquet`` file."""
    if not path.exists():
        raise InputFileError(str(path), "no such file")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = list(read_jsonl(path))
    elif suffix in (".csv", ".parquet"):
        import pandas as pd

        try:
            frame = pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)
        except Exception as exc:  # pandas raises many types for a bad file
            raise InputFileError(str(path), f"cannot read results ({exc})") from exc
        frame = frame.astype(object).where(frame.notna(), None)
        try:
            rows = [ResultRow.from_dict({str(k): v for k, v in rec.items()}) for rec in frame.to_dict(orient="records")]
        except (TypeError, ValueError) as exc:
            raise InputFileError(str(path), f"not collbench result rows ({exc})") from exc
    else:
        raise InputFileError(str(path), "unknown results format; use .jsonl, .csv or .parquet")
    if not rows:
        raise InputFileError(str(path), "no result rows in the file")
    return rows
