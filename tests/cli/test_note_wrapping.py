"""Notes, warnings and assumptions wrapped where the width is known (COLUMNS, a terminal) keep a number
beside its unit: Rich's own word wrapping ended a line on ``12.3`` and began the next with ``GB/s``.
In a pipe with no COLUMNS each stays one whole line (grep reads it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.cli.console import print_note

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
H100_LOG = REPO / "tests" / "fixtures" / "real" / "all_reduce_perf-h100-2node-mpirun-gcp.log"
UNIT = r"(?:B|KiB|MiB|GiB|us|ms|GB/s|ranks?|nodes?)"
# A line that ends on a number followed by one that starts with a unit: the pair was parted.
PARTED = re.compile(rf"\d\s*\n\s*{UNIT}(?=[\s,;.:)]|$)", re.MULTILINE)

LONG_NOTE = "all-reduce ring x2: the fit's bus bandwidth, 12.3 GB/s, is below the link's 25 GB/s; alpha 4.56 us, " + (
    "measured at 1.75 MiB on 2 nodes of 8 ranks, priced at 512 nodes; " * 3
)


def _lines_ok(text: str, columns: int) -> None:
    for line in text.splitlines():
        assert cell_len(line) <= columns, f"{cell_len(line)} columns: {line!r}"
    assert not PARTED.search(text), f"a number parted from its unit at {columns} columns:\n{text}"


@pytest.mark.parametrize("lead", range(0, 24))
def test_a_long_note_at_80_columns_keeps_each_number_with_its_unit(
    lead: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # ``lead`` shifts the note so that each of its numbers, in turn, falls at the 80th column.
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    note = "w" * lead + " " + LONG_NOTE
    print_note("note", note)
    err = capsys.readouterr().err
    _lines_ok(err, 80)
    assert " ".join(err.split()) == " ".join(f"note: {note}".split())  # every word there, in order


def test_a_note_in_a_pipe_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    print_note("note", LONG_NOTE)
    assert capsys.readouterr().err == f"note: {LONG_NOTE}\n"


def test_a_note_is_data_not_markup(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # A rule's text such as native:ring[/LL] came out of a profile someone else wrote.
    monkeypatch.setenv("COLUMNS", "80")
    print_note("note", "forced [bold]native:ring[/LL] kept")
    assert capsys.readouterr().err == "note: forced [bold]native:ring[/LL] kept\n"


@pytest.mark.parametrize("columns", [72, 76, 80, 84])
def test_predict_notes_keep_numbers_with_units(columns: int, tmp_path: Path) -> None:
    runner = CliRunner()
    fits = tmp_path / "h100.json"
    fits.write_text(runner.invoke(app, ["fit", str(H100_LOG), "--json"]).stdout)
    env = {"COLUMNS": str(columns), "NO_COLOR": "1"}
    result = runner.invoke(app, ["predict", "--fits", str(fits), "--ranks", "4096", "--sizes", "1K"], env=env)
    assert result.exit_code == 0, result.output
    assert "assumed: --nodes not given: 512 nodes" in " ".join(result.stderr.split())
    _lines_ok(result.stderr, columns)


def test_a_word_wider_than_the_line_is_folded_whole(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A log's path past the width was cropped at the margin: 'fit' of a fixture under a long folder
    # printed '.../all_reduce_perf-p5-2node-mpijob-readm' and the rest of the name was gone.
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("NO_COLOR", "1")
    path = "/work/some/long/folder/all_reduce_perf-p5-2node-mpijob-readme-excerpt.log"
    print_note("assumed", f"{path}: no test name in the log")
    err = capsys.readouterr().err
    assert all(cell_len(line) <= 40 for line in err.splitlines()), err
    assert "".join(err.split()) == "".join(f"assumed: {path}: no test name in the log".split())  # nothing lost


def test_a_path_wider_than_the_line_is_folded_after_a_folder(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # 'fit' of a fixture from a clone's folder at 80 columns: the path (78 characters) fitted the line
    # and its colon did not, which was folded onto a line of its own, '  :'.
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    path = "clone/tests/fixtures/real/alltoall_perf-gb200-2node-mpirun-continued-lines.log"
    print_note("assumed", f"{path}: no rank count in the log")
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "assumed:",
        "  clone/tests/fixtures/real/",
        "  alltoall_perf-gb200-2node-mpirun-continued-lines.log:",
        "  no rank count in the log",
    ]
