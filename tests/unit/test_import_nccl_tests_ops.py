"""nccl-tests' other programs: alltoall_perf, scatter_perf, gather_perf, sendrecv_perf, hypercube_perf.

Real published logs (tests/fixtures/real, SOURCES.md) are imported and every row is checked against
the log's own columns, read here by a plain scan. For the layouts no published log was found for
(scatter, hypercube, the 2022 empty redop, per-iteration columns), lines are printed with nccl-tests'
own ``printf`` formats, quoted from NVIDIA/nccl-tests: ``src/util.cu`` @ a0b82b2 (2.19.6:
``writeBenchmarkLinePreamble``, ``writeBenchmarkLineBody``, ``writePerIterReport``,
``writeResultHeader``) and, before 2.13, ``src/common.cu`` and each test's ``print_line_header`` @
8274cb47b6dc70ce4411e7f114b77173d3892414.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import InputFileError
from collbench.importers.nccl_tests import read_nccl_tests
from collbench.importers.nccl_tests_ops import ranks_from_command
from collbench.results.row import ResultRow

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
BLOCK_OPS = {"all-to-all", "scatter", "gather", "all-gather"}


def _log_lines(path: Path) -> list[dict[str, str]]:
    """Each result line as {column: token}, by the header's own words (no redop blanks in these logs)."""
    header: list[str] = []
    out = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        words = raw.lstrip("#").split()
        if words[:1] == ["size"] and "time" in words:
            header = words
        elif words and len(words) == len(header) and words[0].isdigit():
            lead = header[: header.index("time")]
            cells = dict(zip(lead, words, strict=False))
            halves = words[len(lead) :]
            for i, name in enumerate(("time", "algbw", "busbw", "#wrong")):
                cells["out_" + name], cells["in_" + name] = halves[i], halves[4 + i]
            out.append(cells)
    return out


def _close(value: float, printed: str) -> bool:
    # nccl-tests prints bandwidths in 6 characters: two decimals, one past 999.99 (getFloatStr).
    return abs(value - float(printed)) <= 0.006 + 5e-4 * float(printed)


def _check_row(row: ResultRow, cells: dict[str, str], half: str, ranks: int) -> None:
    size, count = int(cells["size"]), int(cells["count"])
    assert row.size_bytes == size and row.dtype == "float32" and cells["type"] == "float"
    # collbench's count is the whole buffer: nccl-tests prints one rank's block for the block ops.
    assert row.count == (count * ranks if row.op in BLOCK_OPS else count) == size // 4
    assert row.redop == cells.get("redop", "none") and row.root == max(int(cells.get("root", "0")), 0)
    assert row.time_us == float(cells[half + "_time"])
    assert _close(row.algbw_gbps, cells[half + "_algbw"]) and _close(row.busbw_gbps, cells[half + "_busbw"])
    wrong = cells[half + "_#wrong"]
    assert row.wrong == (-1 if wrong == "N/A" else int(wrong))


@pytest.mark.parametrize(
    ("name", "op", "ranks"),
    [
        ("gather_perf-a100-2node-issue-excerpt.log", "gather", 2),
        ("alltoall_perf-gb300-x4-nccl-tests.log", "all-to-all", 4),
        ("alltoall_perf-gb300-64rank-elided-rank-lines.log", "all-to-all", 64),
        ("alltoall_perf-b300-x8-no-rank-lines.log", "all-to-all", 8),
        ("alltoall_perf-b300-2node-no-rank-lines.log", "all-to-all", 16),
        ("alltoall_perf-mi355x-x8-rccl-tests.log", "all-to-all", 8),
        ("sendrecv_perf-a100-x8-command-line.log", "sendrecv", 8),
    ],
)
def test_every_row_of_a_real_log_is_the_logs(name: str, op: str, ranks: int) -> None:
    rows = read_nccl_tests(REAL / name, op=op if name.startswith("gather") else None)  # its columns fit scatter too
    lines = _log_lines(REAL / name)
    assert len(rows) == 2 * len(lines) > 0
    library = "rccl" if "rccl-tests" in name else "nccl"  # rccl-tests' logs say RCCL measured them
    assert {(r.op, r.world_size, r.algo, r.backend) for r in rows} == {(op, ranks, "native", library)}
    for cells, out_row, in_row in zip(lines, rows[0::2], rows[1::2], strict=True):
        assert not out_row.in_place and in_row.in_place
        _check_row(out_row, cells, "out", ranks)
        _check_row(in_row, cells, "in", ranks)


def test_real_all_to_all_busbw_is_n_minus_1_over_n_and_sendrecv_is_1() -> None:
    a2a = read_nccl_tests(REAL / "alltoall_perf-gb300-x4-nccl-tests.log")[0]
    assert a2a.busbw_gbps == pytest.approx(a2a.algbw_gbps * 3 / 4)
    assert (a2a.backend_version, a2a.host, a2a.nodes) == ("2.28.7", "GPU-3882", 1)
    sendrecv = read_nccl_tests(REAL / "sendrecv_perf-a100-x8-command-line.log")[0]
    assert sendrecv.busbw_gbps == sendrecv.algbw_gbps and sendrecv.nodes == 1


# --- nccl-tests' printf formats, for the layouts no published log shows -------------------------------


def printf(fmt: str, *args: object) -> str:
    """C's printf, for the formats quoted from nccl-tests (%-formatting is C's own)."""
    return fmt % args


def _figure(value: float, width: int) -> str:
    """getFloatStr: %.2f, then %.1f, then %.0f, whichever fits the width."""
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        text = printf(fmt, width, value)
        if len(text) <= width:
            return text
    return printf("%*.1e", width, value)


def _new_line(size: int, count: int, redop: str, root: int, halves: list[tuple[float, float, float, str]]) -> str:
    """2.13+: writeBenchmarkLinePreamble then writeBenchmarkLineBody per half."""
    line = printf("%12li  %12li  %8s  %6s  %6s", size, count, "float", redop, printf("%6i", root))
    for time, algbw, busbw, wrong in halves:
        line += printf("  %7s  %6s  %6s  %6s", _figure(time, 7), _figure(algbw, 6), _figure(busbw, 6), wrong)
    return line


_COLUMNS = ("time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong")
_NEW_HEADER = (
    "#\n"
    + printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", *[""] * 5)
    + printf(
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n",
        *("size", "count", "type", "redop", "root", *_COLUMNS, 0, ""),
    )
)
_OLD_COLUMNS = ("time", "algbw", "busbw", "error", "time", "algbw", "busbw", "error")


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.log"
    path.write_text(text)
    return path


def test_hypercube_is_all_gather_by_recursive_doubling_with_its_blank_redop(tmp_path: Path) -> None:
    # hypercube.cu: TimeTest(..., "", -1): the redop column is blank space. 4 ranks of one GPU each.
    # HyperCubeGetBw: algbw = busbw = count x type size x (n-1) / time.
    size, count, time = 4 * 4 * 262144, 262144, 100.0
    per_rank_gbps = count * 4 * 3 / time / 1e3
    text = "# Collective test starting: hypercube_perf\n" + _NEW_HEADER
    text += _new_line(size, count, "", -1, [(time, per_rank_gbps, per_rank_gbps, "0")] * 2) + "\n"
    rows = read_nccl_tests(_write(tmp_path, text), ranks=4)
    assert [(r.op, r.algo, r.redop, r.root, r.count, r.in_place) for r in rows] == [
        ("all-gather", "recursive-doubling", "none", 0, size // 4, False),
        ("all-gather", "recursive-doubling", "none", 0, size // 4, True),
    ]
    # collbench's all-gather algbw is the whole gathered buffer; its busbw is hypercube's figure.
    assert rows[0].algbw_gbps == pytest.approx(size / time / 1e3)
    assert rows[0].busbw_gbps == pytest.approx(per_rank_gbps)
    with pytest.raises(InputFileError, match="program runs recursive-doubling, not --algo ring; drop --algo"):
        read_nccl_tests(_write(tmp_path, text), ranks=4, algo="ring")


def test_hypercube_ranks_come_from_its_columns(tmp_path: Path) -> None:
    text = "# Collective test starting: hypercube_perf\n" + _NEW_HEADER
    text += _new_line(8 * 256 * 4, 256, "", -1, [(10.0, 0.72, 0.72, "0")] * 2) + "\n"
    notes: list[str] = []
    rows = read_nccl_tests(_write(tmp_path, text), notes=notes)
    assert rows[0].world_size == 8 and any("took 8 ranks from the columns" in n for n in notes)


@pytest.mark.parametrize(("program", "op"), [("scatter_perf", "scatter"), ("gather_perf", "gather")])
def test_scatter_and_gather_over_every_root(tmp_path: Path, program: str, op: str) -> None:
    # scatter.cu / gather.cu with -r -1 (the default): one line per root, redop none, count = one block.
    text = f"# Collective test starting: {program}\n" + _NEW_HEADER
    for root in range(4):
        text += _new_line(4096, 256, "none", root, [(20.0, 0.20, 0.15, "0"), (19.0, 0.22, 0.16, "0")]) + "\n"
    rows = read_nccl_tests(_write(tmp_path, text))
    assert {(r.op, r.world_size, r.count) for r in rows} == {(op, 4, 1024)}
    assert [r.root for r in rows] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert rows[0].busbw_gbps == pytest.approx(4096 / 20.0 / 1e3 * 3 / 4)


def test_an_unnamed_scatter_or_gather_table_asks_for_op(tmp_path: Path) -> None:
    # A root and size = n x count x type size: scatter_perf and gather_perf print the same columns.
    text = _NEW_HEADER + _new_line(4096, 256, "none", 0, [(20.0, 0.20, 0.15, "0")] * 2) + "\n"
    path = _write(tmp_path, text)
    with pytest.raises(
        InputFileError, match="fit scatter_perf and gather_perf alike; pass --op scatter or --op gather"
    ):
        read_nccl_tests(path)
    rows = read_nccl_tests(path, op="gather")
    assert rows[0].op == "gather" and rows[0].world_size == 4


def test_unnamed_tables_that_other_programs_print_alike_take_op(tmp_path: Path) -> None:
    # alltoall_perf prints all-gather's columns and sendrecv_perf all-reduce's: --op says which, and the
    # columns' own guess (said in a note) is only taken without it.
    a2a = (REAL / "alltoall_perf-gb300-x4-nccl-tests.log").read_text().replace("alltoall_perf", "")
    notes: list[str] = []
    assert read_nccl_tests(_write(tmp_path, a2a), notes=notes)[0].op == "all-gather"
    assert any("alltoall_perf prints the same" in n for n in notes)
    assert {r.op for r in read_nccl_tests(_write(tmp_path, a2a), op="all-to-all")} == {"all-to-all"}
    sendrecv = "\n".join((REAL / "sendrecv_perf-a100-x8-command-line.log").read_text().splitlines()[1:])
    rows = read_nccl_tests(_write(tmp_path, sendrecv), op="sendrecv", ranks=8)
    assert {(r.op, r.world_size) for r in rows} == {("sendrecv", 8)}
    with pytest.raises(InputFileError, match=r"columns do not match --op gather: .* seems to be all-reduce"):
        read_nccl_tests(_write(tmp_path, sendrecv), op="gather", ranks=8)


def test_alltoall_of_2022_prints_an_empty_redop_before_its_root(tmp_path: Path) -> None:
    # 2.13 to September 2022: alltoall.cu's TimeTest(..., "", -1) under the five-column header.
    text = "# Collective test starting: alltoall_perf\n" + _NEW_HEADER
    text += _new_line(8192, 256, "", -1, [(30.0, 0.27, 0.24, "0")] * 2) + "\n"
    rows = read_nccl_tests(_write(tmp_path, text))
    assert [(r.op, r.redop, r.world_size, r.time_us) for r in rows] == [("all-to-all", "none", 8, 30.0)] * 2


def test_pre_2_13_layouts_of_alltoall_scatter_and_sendrecv(tmp_path: Path) -> None:
    # common.cu before 2.13: time, algbw, busbw, then the largest error (%5.0le), each half.
    body = printf("  %7s  %6.2f  %6.2f  %5.0le", "41.20", 0.20, 0.17, 0.0) * 2
    four = "# %10s  %12s  %8s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n"
    # alltoall.cu's print_line_header: "%12li  %12li  %8s  %6s" with an empty opName under "redop".
    a2a = printf(four, "size", "count", "type", "redop", *_OLD_COLUMNS)
    a2a += printf("%12li  %12li  %8s  %6s", 8192, 256, "float", "") + body + "\n"
    rows = read_nccl_tests(_write(tmp_path, "./build/alltoall_perf -b 8K -e 8K -g 8\n" + a2a))
    assert [(r.op, r.world_size, r.nodes, r.count, r.wrong) for r in rows] == [("all-to-all", 8, 1, 2048, 0)] * 2
    # scatter.cu: "%12li  %12li  %8s  %6i": a root, no redop.
    sc = printf(four, "size", "count", "type", "root", *_OLD_COLUMNS)
    sc += printf("%12li  %12li  %8s  %6i", 8192, 1024, "float", 1) + body + "\n"
    rows = read_nccl_tests(_write(tmp_path, "mpirun -np 2 ./build/scatter_perf -b 8K -e 8K -g 1\n" + sc))
    assert [(r.op, r.world_size, r.root, r.count) for r in rows] == [("scatter", 2, 1, 2048)] * 2
    # sendrecv.cu and hypercube.cu: "%12li  %12li  %8s": size, count, type only.
    sr = printf("# %10s  %12s  %8s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "size", "count", "type", *_OLD_COLUMNS)
    sr += printf("%12li  %12li  %8s", 8192, 2048, "float") + body + "\n"
    rows = read_nccl_tests(_write(tmp_path, "mpirun -np 4 sendrecv_perf -b 8K -e 8K\n" + sr))
    assert [(r.op, r.world_size, r.redop, r.count) for r in rows] == [("sendrecv", 4, "none", 2048)] * 2
    assert rows[0].busbw_gbps == rows[0].algbw_gbps


def test_per_iteration_columns_and_cputime_are_read_by_the_header(tmp_path: Path) -> None:
    # -R 1 (writeResultHeader's per_iter_timing): i_min i_max i_p99 i_cv% after each #wrong.
    names = ["time", "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%"]
    header = printf("#\n# %10s  %12s  %8s  %6s  %6s ", "size", "count", "type", "redop", "root")
    header += " ".join(names + names) + "\n"
    per_iter = printf("  %7s  %7s  %7s  %7s", "40.10", "52.30", "51.90", "7.20")
    line = printf("%12li  %12li  %8s  %6s  %6s", 1024, 256, "float", "sum", "    -1")
    line += printf("  %7s  %6s  %6s  %6g", "41.00", "0.02", "0.02", 0) + per_iter
    line += printf("  %7s  %6s  %6s  %6g", "43.50", "0.02", "0.02", 3) + per_iter
    named = "# Collective test starting: sendrecv_perf\n"
    rows = read_nccl_tests(_write(tmp_path, named + header + line + "\n"), ranks=2)
    assert [(r.time_us, r.wrong) for r in rows] == [(41.0, 0), (43.5, 3)]
    cpu = _NEW_HEADER.replace("    time", " cputime") + _new_line(1024, 256, "sum", -1, [(9.5, 0.1, 0.1, "0")] * 2)
    rows = read_nccl_tests(_write(tmp_path, named + cpu + "\n"), ranks=2)
    assert [r.time_us for r in rows] == [9.5, 9.5]


@pytest.mark.parametrize(
    ("program", "redop", "op", "algo"),
    [("alltoall_perf", "none", "all-to-all", "native"), ("hypercube_perf", "", "all-gather", "recursive-doubling")],
)
def test_json_of_the_other_programs(tmp_path: Path, program: str, redop: str, op: str, algo: str) -> None:
    # util.cu's -J writer: root is its printed string ("%6i"), count one rank's block; 4 GPUs in one process.
    device = {"rank": 0, "hostname": "h1", "device_info": "NVIDIA H100 80GB HBM3"}
    half = {"time": 50.0, "alg_bw": 0.33, "bus_bw": 0.25, "nwrong": 0.0}
    record = {"size": 16384, "count": 1024, "type": "float", "redop": redop, "root": "    -1"}
    data = {
        "args": [f"./build/{program}", "-g", "4"],
        "nccl_version": 22703,
        "config": {"nthreads": 1, "ngpus": 4, "iterations": 20, "devices": [device]},
        "results": [{**record, "out_of_place": half, "in_place": half}],
    }
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    rows = read_nccl_tests(path)
    assert [(r.op, r.algo, r.world_size, r.count, r.in_place) for r in rows] == [
        (op, algo, 4, 4096, False),
        (op, algo, 4, 4096, True),
    ]
    assert rows[0].busbw_gbps == pytest.approx(16384 / 50.0 / 1e3 * 3 / 4)
    # hypercube_perf's empty redop is none, as in its text table: `import` refused to write its rows.
    assert {r.redop for r in rows} == {"none" if program == "hypercube_perf" else redop}
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(path), "-O", str(tmp_path / "rows.jsonl")])
    assert result.exit_code == 0, result.output


def test_alltoallv_is_refused_in_one_line(tmp_path: Path) -> None:
    text = (REAL / "alltoall_perf-gb300-x4-nccl-tests.log").read_text().replace("alltoall_perf", "alltoallv_perf")
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(_write(tmp_path, text))])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert [line for line in result.output.splitlines() if line.strip()] == [
        f"error: {tmp_path / 'run.log'}: alltoallv_perf moves blocks of different sizes; collbench models"
        " equal-block all-to-all (alltoall_perf)"
    ]


@pytest.mark.parametrize(
    ("line", "ranks", "one_process"),
    [
        ("./build/sendrecv_perf -b 128M -e 1G -f 2 -g 8", 8, True),
        ("root@host:~/nccl-tests# ./build/broadcast_perf -b 8 -e 1024M -f 2 -g2", 2, True),
        ("mpirun -np 16 -N 8 ./build/alltoall_perf -b 8 -e 1G -g 1", 16, False),
        ("mpirun --np=4 alltoall_perf -t 2 -g 2", 16, False),
    ],
)
def test_ranks_from_a_command_line(line: str, ranks: int, one_process: bool) -> None:
    program = next(w.rsplit("/", 1)[-1] for w in line.split() if w.endswith("_perf"))
    said = ranks_from_command(line, program)
    assert said is not None and (said.ranks, said.one_process) == (ranks, one_process)


@pytest.mark.parametrize(
    "line",
    [
        "srun -N 2 --ntasks-per-node 8 ./build/alltoall_perf -g 1",  # tasks come from Slurm
        "mpirun --hostfile h ./build/alltoall_perf -g 1",  # no -np: the hostfile decides
        "./build/all_reduce_perf -g 8",  # not the program asked about
    ],
)
def test_a_command_line_that_does_not_say_gives_nothing(line: str) -> None:
    assert ranks_from_command(line, "alltoall_perf") is None


# Every program in every layout it has printed: (program, lead printf format, redop printed, root printed).
_LAYOUTS = [
    ("alltoall_perf", "new", "none", -1),
    ("alltoall_perf", "new", "", -1),  # 2.13 to September 2022
    ("alltoall_perf", "old", "", None),  # before 2.13: an empty redop under "redop", no root
    # Root 1: a rank of every world drawn (2 on 2 ranks is no run of scatter: the importer refuses it).
    ("scatter_perf", "new", "none", 1),
    ("scatter_perf", "old", None, 1),  # before 2.13: "%12li  %12li  %8s  %6i"
    ("gather_perf", "new", "none", 1),
    ("gather_perf", "old", None, 1),
    ("sendrecv_perf", "new", "sum", -1),
    ("sendrecv_perf", "old", None, None),  # before 2.13: size count type
    ("hypercube_perf", "new", "", -1),
    ("hypercube_perf", "old", None, None),
]
_OPS = {"alltoall_perf": "all-to-all", "scatter_perf": "scatter", "gather_perf": "gather"}
_OPS |= {"sendrecv_perf": "sendrecv", "hypercube_perf": "all-gather"}


@settings(max_examples=60, deadline=4000, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    layout=st.sampled_from(_LAYOUTS),
    ranks=st.sampled_from([2, 4, 8, 16]),
    blocks=st.lists(st.integers(1, 1 << 20), min_size=1, max_size=4),
    time=st.floats(0.5, 5e5, allow_nan=False),
)
def test_every_layout_of_every_program_reads_back(
    tmp_path: Path, layout: tuple[str, str, str | None, int | None], ranks: int, blocks: list[int], time: float
) -> None:
    program, style, redop, root = layout
    op = _OPS[program]
    columns = ["size", "count", "type"] + ["redop"] * (redop is not None) + ["root"] * (root is not None)
    if style == "new":
        columns = ["size", "count", "type", "redop", "root"]
    text = f"mpirun -np {ranks} ./build/{program} -b 8 -e 1G -g 1\n# " + " ".join(columns)
    text += " " + " ".join(_COLUMNS if style == "new" else _OLD_COLUMNS) + "\n"
    timestr = printf("%7.2f", time) if time < 100 else printf("%7.1f", time) if time < 10000 else printf("%7.0f", time)
    for block in blocks:
        count = block if program != "sendrecv_perf" else block * ranks  # sendrecv: the whole buffer
        size = count * 4 * (1 if program == "sendrecv_perf" else ranks)
        if style == "new":
            line = printf("%12li  %12li  %8s  %6s  %6s", size, count, "float", redop, printf("%6i", root))
        else:
            line = printf("%12li  %12li  %8s", size, count, "float")
            line += printf("  %6s", redop) if redop is not None else ""
            line += printf("  %6i", root) if root is not None else ""
        line += printf("  %7s  %6.2f  %6.2f  %6g", timestr, 1.0, 1.0, 0) * 2
        text += line + "\n"
    path = tmp_path / f"{program}.log"
    path.write_text(text)
    rows = read_nccl_tests(path, notes=[])
    assert len(rows) == 2 * len(blocks)
    assert {(r.op, r.world_size, r.dtype, r.wrong) for r in rows} == {(op, ranks, "float32", 0)}
    expected_sizes = [b * 4 * ranks for b in blocks]
    assert [r.size_bytes for r in rows[0::2]] == expected_sizes and [r.count for r in rows[1::2]] == [
        s // 4 for s in expected_sizes
    ]
    assert {r.root for r in rows} == {max(root or 0, 0)}
    assert {r.redop for r in rows} == {redop or "none"}
    assert all(r.time_us == pytest.approx(float(timestr)) for r in rows)
    assert {r.algo for r in rows} == {"recursive-doubling" if program == "hypercube_perf" else "native"}


def test_an_unnamed_hypercube_table_says_why_its_lines_do_not_fit(tmp_path: Path) -> None:
    # Without its name, a blank redop is a number under "redop": refused, saying which programs do that.
    text = _NEW_HEADER + _new_line(16384, 1024, "", -1, [(50.0, 0.25, 0.25, "0")] * 2) + "\n"
    with pytest.raises(InputFileError, match=r"run.log:4: .*holds '-1', not a reduction.*hypercube_perf"):
        read_nccl_tests(_write(tmp_path, text), op="all-gather", ranks=4)
