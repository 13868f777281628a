"""nccl-tests logs (text, legacy text, -J JSON) into result rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.errors import InputFileError
from collbench.importers.nccl_tests import looks_like_nccl_tests, nccl_version_string, read_nccl_tests
from collbench.models.fit_points import summarize

FIX = Path(__file__).parents[1] / "fixtures" / "nccl_tests"
REAL = Path(__file__).parents[1] / "fixtures" / "real"


def test_all_reduce_text_table() -> None:
    rows = read_nccl_tests(FIX / "all_reduce_perf_8gpu.log")
    assert len(rows) == 2 * 25
    first, second = rows[0], rows[1]
    assert (first.op, first.world_size, first.nodes, first.dtype, first.redop) == ("all-reduce", 8, 1, "float32", "sum")
    assert (first.size_bytes, first.count, first.in_place, second.in_place) == (8, 2, False, True)
    assert first.time_us == pytest.approx(24.18) and second.time_us == pytest.approx(24.35)
    assert first.iters == 20 and first.wrong == 0 and first.algo == "native" and first.source == "nccl-tests"
    assert first.host == "gpu59" and first.device_name == "NVIDIA GeForce RTX 4090"
    assert first.backend == "nccl" and first.backend_version == "2.19.3"
    last = rows[-2]
    assert last.size_bytes == 134217728 and last.time_us == pytest.approx(20808.7)
    # busbw recomputed with collbench's factor matches the table's rounded column (11.29).
    assert last.busbw_gbps == pytest.approx(11.29, abs=0.01)


def test_legacy_layout_needs_the_pasted_command_line() -> None:
    rows = read_nccl_tests(FIX / "all_reduce_perf_2node_legacy.log", algo="native:ring")
    assert {r.op for r in rows} == {"all-reduce"}
    assert rows[0].world_size == 2 and rows[0].nodes == 2 and rows[0].wrong == 0
    assert rows[0].algo == "native:ring" and rows[0].root == 0
    assert len(rows) == 24


def test_unchecked_broadcast_has_no_wrong_count() -> None:
    rows = read_nccl_tests(FIX / "broadcast_perf_4rank_unchecked.log")
    assert {r.wrong for r in rows} == {-1}
    assert rows[0].op == "broadcast" and rows[0].redop == "none" and rows[0].world_size == 4 and rows[0].nodes == 2
    assert rows[0].busbw_gbps == pytest.approx(rows[0].algbw_gbps)


def test_json_output() -> None:
    rows = read_nccl_tests(FIX / "reduce_scatter_perf_4gpu.json")
    assert rows[0].op == "reduce-scatter" and rows[0].world_size == 4 and rows[0].dtype == "bfloat16"
    assert rows[0].nccl_algo == "Ring" and rows[0].nccl_proto == "Simple" and rows[0].backend_version == "2.27.3"
    assert rows[0].iters == 20 and len(rows) == 2 * 14
    assert rows[0].busbw_gbps == pytest.approx(rows[0].algbw_gbps * 3 / 4)


def test_a_json_time_below_a_nanosecond_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "rs.json"
    log.write_text((FIX / "reduce_scatter_perf_4gpu.json").read_text().replace('"time":20.189985', '"time":1e-12'))
    with pytest.raises(InputFileError, match=r"rs.json: result 0 .*1e-12 us is below a nanosecond"):
        read_nccl_tests(log)


def test_detection() -> None:
    for f in FIX.iterdir():
        if f.suffix != ".py":
            assert looks_like_nccl_tests(f), f
    assert nccl_version_string(21903) == "2.19.3"


def test_bad_logs(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="no such file"):
        read_nccl_tests(tmp_path / "missing.log")
    empty = tmp_path / "empty.log"
    empty.write_text("# nothing here\n")
    with pytest.raises(InputFileError, match="no nccl-tests result lines"):
        read_nccl_tests(empty)
    a2av = tmp_path / "a2av.log"
    a2av.write_text((FIX / "all_reduce_perf_8gpu.log").read_text().replace("all_reduce_perf", "alltoallv_perf"))
    with pytest.raises(InputFileError, match="alltoallv_perf moves blocks of different sizes"):
        read_nccl_tests(a2av)
    anon = tmp_path / "anon.log"
    anon.write_text(
        "\n".join(
            line for line in (FIX / "all_reduce_perf_2node_legacy.log").read_text().splitlines() if "_perf" not in line
        )
    )
    # No program name: the columns (redop sum, no root, count x 4 B = size) say all-reduce, and a note says so.
    notes: list[str] = []
    assert read_nccl_tests(anon, notes=notes)[0].op == "all-reduce"
    assert len(notes) == 1 and "took all-reduce from the columns" in notes[0]
    assert read_nccl_tests(anon, op="all-reduce")[0].op == "all-reduce"
    odd = tmp_path / "odd.log"
    first_row = "           8             2     float"
    odd.write_text(anon.read_text().replace(first_row, first_row.replace("2", "3")))
    with pytest.raises(InputFileError, match="columns do not identify one; pass --op"):
        read_nccl_tests(odd)


@pytest.mark.parametrize("token", ["inf", "nan", "-Infinity"])
def test_a_wrong_count_that_is_not_finite_is_one_error_naming_the_line(tmp_path: Path, token: str) -> None:
    # Found by tests/faults/test_fuzz_readers.py: float() accepts these and round(inf) raised OverflowError.
    lines = (FIX / "all_reduce_perf_8gpu.log").read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["8388608"])
    fields = lines[at].split()
    fields[8] = token
    lines[at] = "  ".join(fields) + "\n"
    log = tmp_path / "log.txt"
    log.write_text("".join(lines))
    with pytest.raises(InputFileError, match=rf"log.txt:{at + 1}: .*\(#wrong '{token}' is not a count\)"):
        read_nccl_tests(log)


@pytest.mark.parametrize(
    ("token", "problem"), [("0.00", "0 us for 8,388,608 bytes"), ("1e-12", "1e-12 us is below a nanosecond")]
)
def test_a_time_no_clock_reads_is_one_error_naming_the_line(tmp_path: Path, token: str, problem: str) -> None:
    lines = (FIX / "all_reduce_perf_8gpu.log").read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.split()[:1] == ["8388608"])
    fields = lines[at].split()
    fields[5] = token
    lines[at] = "  ".join(fields) + "\n"
    log = tmp_path / "log.txt"
    log.write_text("".join(lines))
    with pytest.raises(InputFileError, match=rf"log.txt:{at + 1}: time '{token}' is not a time \({problem}"):
        read_nccl_tests(log)
    # nccl-tests -b 0: a call that moved nothing returns at once and may print 0.00 (published: 0.01).
    lines[at] = "  0  0  float  sum  -1  0.00  0.00  0.00  0  0.01  0.00  0.00  0\n"
    log.write_text("".join(lines))
    assert [r.time_us for r in read_nccl_tests(log) if r.size_bytes == 0] == [0.0, 0.01]


_LEGACY_HEADER = (
    "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
)


@pytest.mark.parametrize(
    ("errors", "wrong"),
    [
        (("2e-07", "0e+00"), [0, 0]),  # within float's bound (1e-5): the check passed
        (("1e+00", "2e-07"), [1, 0]),  # beyond it: failed, the count unknown (at least one)
        (("3e-04*", "0e+00"), [1, 0]),  # rccl-tests marks an error beyond the bound with an asterisk
    ],
)
def test_legacy_error_column_against_the_types_bound(tmp_path: Path, errors: tuple[str, str], wrong: list[int]) -> None:
    line = f"  1048576  262144  float  sum  89.15  11.76  21.56  {errors[0]}  88.14  11.90  21.81  {errors[1]}\n"
    log = tmp_path / "log.txt"
    log.write_text("# all_reduce_perf\n" + _LEGACY_HEADER + line)
    assert [r.wrong for r in read_nccl_tests(log, ranks=12)] == wrong


def test_wrong_counts_printed_as_floats_fail_the_row(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text(
        "# Collective test starting: all_reduce_perf\n"
        "     4194304       1048576     float     sum      -1    619.0    6.78    6.78  2.09715e+06    619.0"
        "    6.78    6.78  2.09715e+06\n"
        "# Out of bounds values : 108 FAILED\n"
    )
    assert [r.wrong for r in read_nccl_tests(log, ranks=2)] == [2097150, 2097150]


def test_a_failed_footer_with_no_failed_row_says_so(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text(
        "# Collective test starting: all_reduce_perf\n"
        "     4194304       1048576     float     sum      -1    619.0    6.78    6.78  0    619.0    6.78    6.78  0\n"
        "# Out of bounds values : 4 FAILED\n"
    )
    notes: list[str] = []
    read_nccl_tests(log, ranks=2, notes=notes)
    assert any("4 values failed validation but no row says which" in n for n in notes)


def test_failed_rows_are_never_fitted() -> None:
    rows = read_nccl_tests(REAL / "all_gather_perf-v100-x8-failed-legacy-issue-excerpt.log")
    summaries = summarize(rows)
    assert summaries.rows_seen == 2 and len(summaries) == 0


@pytest.mark.parametrize(
    ("name", "op", "seems"),
    [
        ("all_reduce_perf-dgx-a100-4node-slurm-legacy.log", "all-gather", "all-reduce"),
        ("broadcast-a100-x8-legacy-superbench.log", "all-gather", "broadcast"),
        ("reduce_scatter-a100-x8-legacy-superbench.log", "all-reduce", "reduce-scatter"),
    ],
)
def test_an_op_the_columns_contradict_is_refused_naming_the_op_they_show(name: str, op: str, seems: str) -> None:
    with pytest.raises(InputFileError, match=rf"columns do not match --op {op}: .* seems to be {seems}"):
        read_nccl_tests(REAL / name, op=op, ranks=8)


def test_a_line_that_does_not_fit_the_headers_columns_names_the_line(tmp_path: Path) -> None:
    # An all-gather line (no redop column) under an all-reduce header: its time sits where redop should.
    log = tmp_path / "log.txt"
    log.write_text(_LEGACY_HEADER + "  8  2  float  1.63  0.00  0.00  0e+00  1.70  0.00  0.00  0e+00\n")
    with pytest.raises(InputFileError, match=r"log.txt:2: .*redop column holds '1.63', not a reduction"):
        read_nccl_tests(log, op="all-gather", ranks=2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"results": ' + "[" * 100_000 + "]" * 100_000 + "}", "nests too deep to read"),
        ('{"a": ' * 100_000 + "1" + "}" * 100_000, "nests too deep to read"),
        ('{"args": ["all_reduce_perf"], "config": "x", "results": []}', "'config.devices' is not a list"),
        ('{"args": ["all_reduce_perf"], "config": {"devices": ["x"]}, "results": []}', "is not a list of devices"),
        (
            '{"args": ["all_reduce_perf"], "config": {"devices": [{"hostname": "h"}]},'
            ' "results": [{"size": 8, "count": 2, "type": "float", "redop": "sum", "out_of_place": "fast"}]}',
            "result 0 is not an nccl-tests result",
        ),
    ],
)
def test_hostile_json_is_one_error_line(tmp_path: Path, text: str, expected: str) -> None:
    log = tmp_path / "run.json"
    log.write_text(text)
    with pytest.raises(InputFileError, match=expected):
        read_nccl_tests(log)
