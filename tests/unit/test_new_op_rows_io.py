"""Rows of the newer ops as a sweep writes them read back unchanged, by the fast and the full check alike.

A barrier row is one point at 0 bytes and 0 elements, with no bandwidth (0.0) and nothing checked
(wrong -1); an all-to-all row carries its whole-block count. JSON rows take the fields' fast path,
CSV text cells the full check: both must give the same row.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from collbench.results.fields import checked_fields
from collbench.results.io import read_rows, write_rows
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op

BARRIER = ResultRow(
    op=Op.BARRIER.value,
    algo="native",
    backend="gloo",
    world_size=3,
    dtype="float32",
    redop="sum",
    in_place=False,
    size_bytes=0,
    count=0,
    iters=1200,
    time_us=91.5,
    time_us_mean=95.25,
    time_us_min=80.0,
    time_us_max=400.0,
    algbw_gbps=0.0,
    busbw_gbps=0.0,
    wrong=-1,
    segment_bytes=None,
    stall_fraction=0.0,
    bimodal=False,
    time_us_p25=88.5,
    timestamp=1.5,
    host="h",
)
ALL_TO_ALL = dataclasses.replace(
    BARRIER, op=Op.ALL_TO_ALL.value, size_bytes=4092, count=1023, algbw_gbps=0.0447, busbw_gbps=0.0298, wrong=0
)


@pytest.mark.parametrize("row", [BARRIER, ALL_TO_ALL], ids=["barrier", "all-to-all"])
def test_fast_and_full_checks_give_the_same_row(row: ResultRow) -> None:
    data = row.to_dict()
    fast = checked_fields(ResultRow, data)
    # Every value as text (what a CSV cell gives): the full check reads it.
    full = checked_fields(ResultRow, {k: ("" if v is None else str(v)) for k, v in data.items()})
    assert ResultRow(**fast) == ResultRow(**full) == row


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_rows_of_the_new_ops_round_trip(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"rows{suffix}"
    write_rows(path, [BARRIER, ALL_TO_ALL])
    back = read_rows(path)
    assert back == [BARRIER, ALL_TO_ALL]
