"""A row's times, bandwidths and timestamp are bounded as its sizes and ranks are (results.fields): a time
past a week a call, a bandwidth past an exabyte a second, a timestamp past the year 9999 are no
measurement. Each was read: a time of 1e308 us ended report in 'math range error' and compare in fsum's
OverflowError, a timestamp of 1e20 s the report's date of it, all tracebacks; an nccl-tests log whose
times say 1e308 was imported, then broke compare the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from refused import refused_line

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
LOG = REPO / "tests" / "fixtures" / "real" / "all_reduce_perf-h100-2node-mpirun-gcp.log"


@pytest.mark.parametrize(
    ("field", "value", "bound"),
    [
        ("time_us", 1e308, "from 0 to 6.048e+11"),
        ("time_us_max", 1e13, "from 0 to 6.048e+11"),
        ("busbw_gbps", 1e308, "from 0 to 1e+09"),
        ("timestamp", 1e20, "from 0 to 2.53402e+11"),
    ],
)
@pytest.mark.parametrize("command", ["report", "compare", "fit"])
def test_a_row_past_a_physical_bound_is_one_error_line(
    tmp_path: Path, field: str, value: float, bound: str, command: str
) -> None:
    row = json.loads(RESULTS.read_text().splitlines()[0])
    row[field] = value
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(row) + "\n")
    args = {
        "report": ["report", str(path), "-O", str(tmp_path / "r.html")],
        "compare": ["compare", str(RESULTS), str(path)],
        "fit": ["fit", str(path)],
    }[command]
    line = refused_line(args)
    assert (
        line
        == f"error: {path}:1: not a collbench result row (field {field}: {value!r} is out of range (must be {bound}))"
    )


def test_a_log_time_past_a_week_is_one_error_line(tmp_path: Path) -> None:
    text = LOG.read_text()
    first = next(line for line in text.splitlines() if line.split()[:1] == ["8"])
    cut = first.split()
    log = tmp_path / "all_reduce_perf.log"
    log.write_text(text.replace(first, first.replace(cut[5], "1e308", 1)))
    for args in (["import", "nccl-tests", str(log)], ["compare", str(LOG), str(log)]):
        line = refused_line(args)
        assert line.startswith(f"error: {log}:") and "time '1e308' is not a time" in line, line


def test_a_json_log_time_past_a_week_is_one_error_line(tmp_path: Path) -> None:
    # nccl-tests' -J output: its first result's time, as the text table's above.
    source = REPO / "tests" / "fixtures" / "nccl_tests" / "reduce_scatter_perf_4gpu.json"
    log = tmp_path / "rs.json"
    log.write_text(source.read_text().replace('"time":20.189985', '"time":1e308', 1))
    assert refused_line(["import", "nccl-tests", str(log)]) == (
        f"error: {log}: result 0 is not an nccl-tests result (time 1e+308 is not a time (NaN, infinite, negative "
        "or past a week))"
    )


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        # Imported as a 301-digit count that fit, report and compare then refused to read.
        (
            '"actual_iterations":20',
            '"actual_iterations":1e300',
            "its reduce-scatter row of 4096 bytes (out of place) is not a result: field iters: "
            "1000000000000000052504760255204420248... is out of range (must be from 0 to 6.048e+14)",
        ),
        # int()'s ValueError tracebacks; -1 was read as version '-1.9.99'.
        ('"nccl_version":22703', '"nccl_version":"x"', "'nccl_version' 'x' is not NCCL's version code (22703: 2.27.3)"),
        ('"nccl_version":22703', '"nccl_version":-1', "'nccl_version' '-1' is not NCCL's version code (22703: 2.27.3)"),
        (
            '"ngpus":4',
            '"ngpus":"four"',
            "'config.nthreads' and 'config.ngpus' are not whole numbers: not an nccl-tests -J file",
        ),
    ],
)
def test_a_json_log_field_of_no_sense_is_one_error_line(tmp_path: Path, old: str, new: str, said: str) -> None:
    source = REPO / "tests" / "fixtures" / "nccl_tests" / "reduce_scatter_perf_4gpu.json"
    text = source.read_text()
    assert old in text
    log = tmp_path / "rs.json"
    log.write_text(text.replace(old, new, 1))
    out = tmp_path / "rows.jsonl"
    line = refused_line(["import", "nccl-tests", str(log), "-O", str(out)])
    assert line in (f"error: {log}: {said}", f"error: {out}: {said}"), line
