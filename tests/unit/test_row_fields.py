"""Result rows are checked field by field as they are read: type, finite, range, known names."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.errors import InputFileError
from collbench.results import fields as fields_module
from collbench.results.fields import FieldError, checked_fields
from collbench.results.io import read_rows, write_rows
from collbench.results.row import ResultRow


def _row(**changes: Any) -> dict[str, Any]:
    base = ResultRow(
        op="all-reduce", algo="ring", backend="gloo", world_size=4, dtype="float32", redop="sum", in_place=False,
        size_bytes=1024, count=256, iters=10, time_us=12.5, time_us_mean=13.0, time_us_min=12.0, time_us_max=15.0,
        algbw_gbps=0.08, busbw_gbps=0.12, wrong=0,
    ).to_dict()  # fmt: skip
    base.update(changes)
    return base


@pytest.mark.parametrize(
    ("changes", "field", "problem"),
    [
        ({"time_us": math.inf}, "time_us", "not a finite number"),
        ({"time_us": math.nan}, "time_us", "not a finite number"),
        ({"time_us_min": -1.0}, "time_us_min", "out of range"),
        ({"busbw_gbps": "fast"}, "busbw_gbps", "expected a number"),
        ({"op": 3}, "op", "expected text"),
        ({"op": "all-to-none"}, "op", "unknown op"),
        ({"algo": "teleport"}, "algo", "unknown algorithm"),
        ({"algo": "native:warp"}, "algo", "unknown native variant"),
        ({"dtype": "float8"}, "dtype", "unknown dtype"),
        ({"redop": "xor"}, "redop", "unknown reduction"),
        ({"world_size": 0}, "world_size", "out of range"),
        ({"world_size": 2.5}, "world_size", "whole number"),
        ({"world_size": True}, "world_size", "expected a number"),
        ({"in_place": "maybe"}, "in_place", "true or false"),
        ({"wrong": -2}, "wrong", "out of range"),
        ({"segment_bytes": 0}, "segment_bytes", "out of range"),
        ({"size_bytes": None}, "size_bytes", "empty"),
        ({"host": 5}, "host", "expected text"),
        ({"tune_round": -1}, "tune_round", "out of range"),
        ({"tune_round": 1.5}, "tune_round", "whole number"),
        ({"tune_round": 10**30}, "tune_round", "out of range"),  # a whole number, read as one
        ({"tune_round": 1e300}, "tune_round", "out of range"),
        ({"tune_round": 10**400}, "tune_round", "out of range"),  # past any float
        ({"tune_round": "1_0"}, "tune_round", "expected a number"),
        ({"size_bytes": "1_024"}, "size_bytes", "expected a number"),
        # Each in range alone, not together: it was fitted and predicted as 'its measurement on 5 nodes'.
        ({"world_size": 2, "nodes": 5}, "nodes", "5 nodes for the row's 2 ranks"),
        ({"iters": 10**15}, "iters", "out of range"),
        # No clock times a call below a nanosecond: 1e-12 us was fitted as a point of 10^14 GB/s.
        ({"time_us_min": 1e-12}, "time_us_min", "1e-12 us is below a nanosecond"),
        ({"time_us_min": 0.0}, "time_us_min", "0 us for 1,024 bytes"),
        # Any samples' statistics run min <= p25 <= median <= max and min <= mean <= max.
        ({"time_us_max": 11.0}, "time_us_max", "11 us is below time_us 12.5 us"),
        ({"time_us_max": 12.8}, "time_us_max", "12.8 us is below time_us_mean 13 us"),
        ({"time_us_min": 12.8}, "time_us", "12.5 us is below time_us_min 12.8 us"),
        ({"time_us_p25": 12.9}, "time_us", "12.5 us is below time_us_p25 12.9 us"),
        ({"time_us_p25": 11.0}, "time_us_p25", "11 us is below time_us_min 12 us"),
        ({"time_us_mean": 16.0}, "time_us_max", "15 us is below time_us_mean 16 us"),
    ],
)
def test_bad_field_is_named(changes: dict[str, Any], field: str, problem: str) -> None:
    with pytest.raises(FieldError, match=problem) as info:
        ResultRow.from_dict(_row(**changes))
    assert info.value.field == field


def test_times_a_real_run_can_have_are_kept() -> None:
    # A call that moved nothing, printed as 0.00 by nccl-tests (-b 0 returns at once; published logs
    # show 0.01 us): an exact 0 of a 0-byte row only. A mean of equal times may land an ulp outside them.
    zero = {name: 0.0 for name in ("time_us", "time_us_mean", "time_us_min", "time_us_max", "time_us_p25")}
    assert ResultRow.from_dict(_row(size_bytes=0, count=0, **zero)).time_us == 0.0
    equal = {"time_us": 0.1, "time_us_min": 0.1, "time_us_max": 0.1, "time_us_p25": 0.1}
    mean = sum([0.1] * 10) / 10
    assert mean < 0.1
    assert ResultRow.from_dict(_row(time_us_mean=mean, **equal)).time_us_mean == mean
    assert ResultRow.from_dict(_row(time_us_min=0.001, time_us_p25=0.001)).time_us_min == 0.001


def test_missing_required_field() -> None:
    data = _row()
    del data["time_us"]
    with pytest.raises(FieldError, match="field time_us: missing"):
        ResultRow.from_dict(data)


def test_text_cells_and_empty_optionals_convert() -> None:
    text = {k: "" if v is None else str(v) for k, v in _row(segment_bytes=None, nccl_algo="").items()}
    row = ResultRow.from_dict(text)
    assert row == ResultRow.from_dict(_row())
    assert row.segment_bytes is None and row.world_size == 4 and row.in_place is False


def test_native_variants_and_unknown_keys_are_accepted() -> None:
    row = ResultRow.from_dict(_row(algo="native:tree/ll128", some_future_field=1))
    assert row.algo == "native:tree/ll128"


def test_fields_added_later_are_checked_by_their_annotation() -> None:
    @dataclasses.dataclass(frozen=True)
    class Later:
        time_us: float
        stall_fraction: float | None = None
        reduce_path: str | None = None

    assert checked_fields(Later, {"time_us": "1.5", "stall_fraction": ""}) == {"time_us": 1.5, "stall_fraction": None}
    with pytest.raises(FieldError, match=r"stall_fraction: 1\.5 is out of range"):
        checked_fields(Later, {"time_us": 1, "stall_fraction": 1.5})
    with pytest.raises(FieldError, match="reduce_path: expected text"):
        checked_fields(Later, {"time_us": 1, "reduce_path": 7})


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_readers_name_file_line_and_field(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"r{suffix}"
    good = ResultRow.from_dict(_row())
    write_rows(path, [good, good])
    text = path.read_text().splitlines()
    if suffix == ".jsonl":
        text[1] = json.dumps(_row(time_us="Infinity"))
        expected = f"{path}:2: "
    else:
        cells = text[2].split(",")
        cells[10] = ""  # time_us
        text[2] = ",".join(cells)
        expected = f"{path}:3: "
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(InputFileError) as info:
        read_rows(path)
    assert str(info.value).startswith(expected) and "field time_us" in str(info.value)


def test_parquet_reader_names_the_row(tmp_path: Path) -> None:
    import pandas as pd

    path = tmp_path / "r.parquet"
    pd.DataFrame([_row(), _row(time_us=-3.0)]).to_parquet(path)
    with pytest.raises(InputFileError, match=r"r.parquet: row 2: .*field time_us: -3.0 is out of range"):
        read_rows(path)


def test_writer_refuses_what_no_reader_would_take(tmp_path: Path) -> None:
    bad = dataclasses.replace(ResultRow.from_dict(_row()), time_us=math.nan)
    path = tmp_path / "out.csv"
    with pytest.raises(InputFileError, match="row 2 was not written: field time_us"):
        write_rows(path, [ResultRow.from_dict(_row()), bad])
    assert not path.exists()


@pytest.mark.parametrize(("raw", "expected"), [(3, 3), ("3", 3), (" 2 ", 2), ("4.0", 4), (None, None)])
def test_tune_round_reads_whole_numbers(raw: Any, expected: int | None) -> None:
    assert ResultRow.from_dict(_row(tune_round=raw)).tune_round == expected


# Every field's fast check must give what the full check gives: the same value, or (through the full
# check it falls back to) the same error. Values a file may hold for any field, well-formed or not.
_ODD_VALUES: list[Any] = [
    None, True, False, 0, 1, -1, 2, 7, 1024, 10**6, 2**53 + 1, 2**62 - 1, 2**62, 2**63, -(2**62), 10**30,
    10**400, 0.0, -0.0, 0.5, 1.0, 1.5, 12.5, -3.0, 1e300, 1e-300, 5e-324, math.inf, -math.inf, math.nan,
    "", " ", "\t", "3", " 2 ", "4.0", "1_0", "1e3", "nan", "inf", "true", "no", "fast", "ring", " ring",
    "ring ", "all-reduce", "native", "native:tree/ll128", "native:warp", "float32", "float8", "sum", "none",
    "xor", "cuda-kernel", "torch-ops", " cuda-kernel", "gloo", "x" * 65, "ring" * 20, [1], {"a": 1},
]  # fmt: skip


def _full_check(data: dict[str, Any]) -> dict[str, Any]:
    """What checked_fields gives when every field meets the full check alone."""
    out: dict[str, Any] = {}
    for spec in fields_module._specs(ResultRow):
        if spec.name not in data:
            if spec.required:
                raise FieldError(spec.name, "missing")
            continue
        value = fields_module._checked_value(spec, data[spec.name])
        if value is not fields_module._DEFAULT:
            out[spec.name] = value
    return out


def _outcome(check: Any, data: dict[str, Any]) -> Any:
    try:
        return ("ok", check(ResultRow, data) if check is checked_fields else check(data))
    except FieldError as exc:
        return ("error", str(exc))


def _same(a: Any, b: Any) -> bool:
    # NaN never reaches a result (it is refused), so == compares values; types must match too.
    return a == b and {k: type(v) for k, v in (a[1] if a[0] == "ok" else {}).items()} == {
        k: type(v) for k, v in (b[1] if b[0] == "ok" else {}).items()
    }


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(ResultRow)])
def test_each_field_fast_check_agrees_with_the_full_check(field: str) -> None:
    for value in _ODD_VALUES:
        data = _row(**{field: value})
        fast, full = _outcome(checked_fields, data), _outcome(_full_check, data)
        assert _same(fast, full), (field, value, fast, full)
    missing = _row()
    del missing[field]
    assert _same(_outcome(checked_fields, missing), _outcome(_full_check, missing))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from([f.name for f in dataclasses.fields(ResultRow)]), st.sampled_from(_ODD_VALUES)))
def test_rows_of_odd_values_read_as_the_full_check_reads_them(changes: dict[str, Any]) -> None:
    data = _row(**changes)
    assert _same(_outcome(checked_fields, data), _outcome(_full_check, data))


def test_numpy_and_text_values_take_the_full_check() -> None:
    import numpy as np

    data = _row(world_size=np.int64(4), time_us=np.float64(12.5), in_place=np.bool_(True), size_bytes="1024")
    row = ResultRow.from_dict(data)
    assert (row.world_size, row.time_us, row.in_place, row.size_bytes) == (4, 12.5, True, 1024)
    assert type(row.world_size) is int and type(row.time_us) is float and type(row.in_place) is bool


def test_a_long_unknown_name_is_refused_as_any_unknown_name() -> None:
    with pytest.raises(FieldError, match="unknown algorithm 'xxxxxxxx"):
        ResultRow.from_dict(_row(algo="x" * 10_000))


def test_an_unknown_algorithm_lists_each_known_one_once() -> None:
    # native is a registered algorithm; the list said "..., linear, native, native".
    from collbench.schedules.registry import algorithm_names

    with pytest.raises(FieldError) as caught:
        ResultRow.from_dict(_row(algo="recursive-ring"))
    known = str(caught.value).split("known: ")[1].split(", ")
    assert sorted(known) == sorted(set(algorithm_names())) and "native" in known
