"""A result line cut short or split by another process's output is never lost silently: import and fit
read the rest of a real published log and say, in one note, how many lines they could not read and
which. The fixture stays as published; each test builds its damaged copy under tmp_path.

What the damage looks like: nccl-tests prints a result line in several ``printf`` calls (the size,
count, type, redop and root first, then each half's figures: ``src/common.cu``), so another rank's
output or an NCCL INFO line lands between them and cuts the row in two.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.importers.nccl_tests import read_nccl_tests
from collbench.results.io import read_rows

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
REPO_RESULTS = Path(__file__).resolve().parents[2] / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
GCP = REAL / "all_reduce_perf-h100-2node-mpirun-gcp.log"
WIDE = {"COLUMNS": "200"}
INFO = "gcp-host-1:123:456 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0\n"


def _damaged(tmp_path: Path, sizes: tuple[str, ...], where: str = "sum") -> Path:
    """A copy of the GCP log with each of ``sizes``' rows cut after ``where`` and an NCCL line between."""
    lines = GCP.read_text(encoding="utf-8").splitlines(keepends=True)
    for size in sizes:
        i = next(n for n, line in enumerate(lines) if line.split()[:1] == [size])
        row = lines[i]
        at = row.index(where) + len(where)
        lines[i : i + 1] = [row[:at] + "\n", INFO, row[at:]]
    out = tmp_path / "damaged.log"
    out.write_text("".join(lines), encoding="utf-8")
    return out


def test_clean_log_reads_every_row_with_no_note() -> None:
    notes: list[str] = []
    rows = read_nccl_tests(GCP, notes=notes)
    assert len(rows) == 62
    assert not [n for n in notes if "could not be read" in n]


def test_interleaved_rows_are_counted_and_quoted(tmp_path: Path) -> None:
    log = _damaged(tmp_path, ("1048576", "4194304"))
    notes: list[str] = []
    rows = read_nccl_tests(log, notes=notes)
    # The two sizes are lost (their times are on lines that carry no size); the other 29 stay whole.
    assert len(rows) == 58
    assert {r.size_bytes for r in rows}.isdisjoint({1048576, 4194304})
    cut = [n for n in notes if "could not be read" in n]
    assert cut == [
        f"{log}: 2 result lines could not be read (cut or interleaved):"
        " line 49 '1048576 262144 float sum', line 53 '4194304 1048576 float sum'"
    ]


def test_a_row_cut_after_its_first_half_is_counted_with_its_tail(tmp_path: Path) -> None:
    # Cut after the out-of-place #wrong: the first piece holds one whole half (kept: it was measured),
    # the tail holds the in-place half with no size; both are named.
    log = _damaged(tmp_path, ("1048576",), where="      0 ")
    notes: list[str] = []
    rows = read_nccl_tests(log, notes=notes)
    assert len(rows) == 61
    assert [r.in_place for r in rows if r.size_bytes == 1048576] == [False]
    (cut,) = [n for n in notes if "could not be read" in n]
    assert "2 result lines could not be read" in cut
    assert "line 49 '1048576 262144 float sum -1" in cut and "line 51 '" in cut


def test_many_cut_rows_quote_three_with_numbers_whole(tmp_path: Path) -> None:
    sizes = ("1024", "2048", "4096", "8192", "16384")
    log = _damaged(tmp_path, sizes, where="      0 ")
    notes: list[str] = []
    read_nccl_tests(log, notes=notes)
    (cut,) = [n for n in notes if "could not be read" in n]
    assert "10 result lines could not be read" in cut
    assert cut.count("line ") == 3 and cut.endswith("and 7 more")
    quoted = [part.split("'")[1] for part in cut.split("line ")[1:]]
    for text in quoted:
        # Each quote is whole tokens of the line (cut at a space, marked), never a number cut in two.
        words = text.removesuffix(" ...").split()
        assert words and all(w in GCP.read_text(encoding="utf-8").split() for w in words)


@pytest.mark.parametrize("command", [["import", "nccl-tests"], ["fit"]])
def test_import_and_fit_print_the_note(tmp_path: Path, command: list[str]) -> None:
    log = _damaged(tmp_path, ("1048576", "4194304"))
    out = ["-O", str(tmp_path / "rows.jsonl")] if command[0] == "import" else []
    result = CliRunner().invoke(app, [*command, str(log), *out], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "2 result lines could not be read (cut or interleaved): line 49" in result.stderr
    if command[0] == "import":
        assert len(read_rows(tmp_path / "rows.jsonl")) == 58
        assert "58 rows: all-reduce" in result.output


@pytest.mark.parametrize("name", sorted(p.name for p in REAL.glob("*.log")))
def test_published_logs_give_no_cut_note(name: str) -> None:
    notes: list[str] = []
    op = "gather" if name == "gather_perf-a100-2node-issue-excerpt.log" else None
    read_nccl_tests(REAL / name, op=op, strict_op=False, notes=notes)
    assert not [n for n in notes if "could not be read" in n]


ROCE = REAL / "all_reduce_perf-16rank-k8s-roce-legacy.log"


def _glued(tmp_path: Path, size: str) -> Path:
    """A copy of the RoCE log (no root column: the first printf of a row ends at its redop) with an NCCL
    line written right after ``size``'s redop, and the row's figures on the line after it."""
    lines = ROCE.read_text(encoding="utf-8").splitlines(keepends=True)
    i = next(n for n, line in enumerate(lines) if line.split()[:1] == [size])
    row = lines[i]
    at = row.index(" sum") + len(" sum")
    lines[i : i + 1] = [row[:at] + INFO, row[at:]]
    out = tmp_path / "glued.log"
    out.write_text("".join(lines), encoding="utf-8")
    return out


def test_a_row_with_output_glued_onto_its_redop_is_named_not_fatal(tmp_path: Path) -> None:
    # 'sumgcp-host-1:123:456 [0] NCCL INFO ...' stopped import: "its redop column holds
    # 'sumgcp-host-1:123:456', not a reduction". The row's size and its figures are on two lines now,
    # neither a row: both named, every other row read.
    log = _glued(tmp_path, "1048576")
    assert "float     sumgcp-host-1:123:456 [0] NCCL INFO" in log.read_text(encoding="utf-8")
    notes: list[str] = []
    rows = read_nccl_tests(log, notes=notes)
    whole = read_nccl_tests(ROCE)
    assert len(whole) == 58 and len(rows) == 56
    assert {r.size_bytes for r in rows} == {r.size_bytes for r in whole} - {1048576}
    (cut,) = [n for n in notes if "could not be read" in n]
    assert "2 result lines could not be read" in cut
    assert "line 20 '1048576 262144 float sumgcp-host-1:123:456 [0] ...'" in cut
    assert "line 21 '307.5 3.41 6.39 5e-07 225.1 4.66 8.74 5e-07'" in cut
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "-O", str(tmp_path / "rows.jsonl")], env=WIDE)
    assert result.exit_code == 0, result.output
    assert len(read_rows(tmp_path / "rows.jsonl")) == 56
    assert "2 result lines could not be read (cut or interleaved): line 20" in result.stderr


def test_a_reduction_named_alone_is_a_row_whatever_it_is() -> None:
    # Every name nccl-tests prints in the column is a reduction, not a glued one (mulsum: ncclPreMulSum).
    from collbench.importers.nccl_tests_scan import _is_glued_row

    for name in ("sum", "prod", "max", "min", "avg", "mulsum", "none"):
        assert not _is_glued_row(["8", "2", "float", name, "-1", "1.0"])
    assert _is_glued_row(["8", "2", "float", "maxhost:1:2", "[0]", "NCCL"])
    assert not _is_glued_row(["8", "2", "float", "12.5", "0.00", "0.00"])  # no redop column: a time


@pytest.mark.parametrize(
    ("zeroed", "quoted"),
    [
        (b"     1048576", "line 49 '\\x00 262144 float sum -1"),  # its size: the row was skipped unsaid
        (b"203", "line 49 '1048576 262144 float sum -1 \\x00.2 5.16"),  # a time: the whole import stopped
    ],
)
def test_a_row_a_zero_filled_block_reached_is_named(tmp_path: Path, zeroed: bytes, quoted: str) -> None:
    # A node that crashed or lost power leaves its log's last written blocks as NUL bytes (the size
    # reached the disk, the data did not). A row such a run reaches lost part of what it said: named
    # with the cut rows, the rest of the log read.
    data = GCP.read_bytes()
    at = data.index(zeroed, data.index(b"     1048576 "))
    log = tmp_path / "zeroed.log"
    log.write_bytes(data[:at] + b"\x00" * len(zeroed) + data[at + len(zeroed) :])
    notes: list[str] = []
    rows = read_nccl_tests(log, notes=notes)
    assert len(rows) == 60 and 1048576 not in {r.size_bytes for r in rows}
    (cut,) = [n for n in notes if "could not be read" in n]
    assert "1 result line could not be read" in cut and quoted in cut, cut
    result = CliRunner().invoke(app, ["fit", str(log)], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "1 result line could not be read (cut or interleaved): line 49" in result.stderr


def test_a_barrier_block_sweep_printed_is_named_not_dropped(tmp_path: Path) -> None:
    # `sweep --format nccl-tests` prints a barrier as a block of times with no size (it moves no data):
    # import read the other blocks and dropped it without a word (16 rows of a 17-row sweep).
    from new_op_rows import barrier_rows

    from collbench.cli.render.results import nccl_tests_text

    ring = [r for r in read_rows(REPO_RESULTS) if r.algo == "ring"]
    log = tmp_path / "sweep.log"
    log.write_text(nccl_tests_text(ring + barrier_rows("native", 2, 80.8)), encoding="utf-8")
    notes: list[str] = []
    rows = read_nccl_tests(log, notes=notes)
    assert rows and {r.op for r in rows} == {"all-reduce"}  # the ring block read whole
    said = (
        f"{log}: collbench's barrier native block of times without sizes not read (the op moves no data);"
        " the sweep's rows (--stream, -O) hold them"
    )
    assert said in notes
    alone = tmp_path / "barrier.log"
    alone.write_text(nccl_tests_text(barrier_rows("native", 2, 80.8)), encoding="utf-8")
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(alone), "-O", str(tmp_path / "r.jsonl")], env=WIDE)
    assert result.exit_code == 2 and result.stderr.splitlines() == [f"error: {said.replace(str(log), str(alone))}"]
