"""Output that the terminal's settings cannot take as written is still written, and the command ends as it
would: run as a user runs it (the console entry point sets up stdout and stderr, so a subprocess).

Each was broken: on an ASCII stdout (``PYTHONIOENCODING=ascii``, or ``LC_ALL=C`` where Python does not
coerce the locale) ``fit`` and ``explain`` ended in a UnicodeEncodeError's traceback on the R², ∞ and ·
of their tables, exit 1; ``report`` of a results file whose name is not UTF-8 in one on any stdout,
after the page was drawn, and in another writing the page (the page names its inputs); ``COLUMNS=0``
(Rich's width 0) made every command print nothing at all, its error line neither, and ``--help`` blank;
``COLUMNS=10`` ended ``sweep`` in an AssertionError's traceback from Rich after its points were measured.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"


def _run(args: list[str | bytes], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[bytes]:
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "PYTHONIOENCODING")}
    return subprocess.run(
        [sys.executable, "-m", "collbench.cli.app", *args],
        capture_output=True,
        cwd=tmp_path,
        env={**environ, **env},
        timeout=300,
    )


def test_an_ascii_stdout_gets_the_tables_with_escapes(tmp_path: Path) -> None:
    done = _run(["fit", str(RESULTS)], tmp_path, PYTHONIOENCODING="ascii")
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr
    assert b"R\\xb2" in done.stdout  # the R² column's head
    done = _run(["explain", "ring"], tmp_path, LC_ALL="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    assert done.returncode == 0, done.stderr.decode()
    assert b"ring all-reduce \\xb7 4 ranks" in done.stdout


def test_a_file_name_that_is_not_utf8_is_reported_and_named(tmp_path: Path) -> None:
    name = b"\xffrows.jsonl"  # a Latin-1 name: its byte is no UTF-8
    (tmp_path / os.fsdecode(name)).write_bytes(RESULTS.read_bytes())
    done = _run(["report", name, "-O", b"page.html"], tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.startswith(b"report: page.html"), done.stdout
    assert "\\udcffrows.jsonl" in (tmp_path / "page.html").read_text(encoding="utf-8")  # its provenance
    done = _run(["fit", b"\xffmissing.jsonl"], tmp_path, PYTHONIOENCODING="ascii")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [b"error: \xffmissing.jsonl: no such file"]  # the bytes as given


def test_columns_0_prints_as_if_not_set(tmp_path: Path) -> None:
    done = _run(["fit", "missing.jsonl"], tmp_path, COLUMNS="0")
    assert (done.returncode, done.stderr.splitlines()) == (2, [b"error: missing.jsonl: no such file"])
    done = _run(["explain", "ring"], tmp_path, COLUMNS="0")
    assert done.returncode == 0 and done.stdout.startswith(b"ring all-reduce"), done.stdout
    done = _run(["--help"], tmp_path, COLUMNS="0")
    assert done.returncode == 0 and b" Usage: " in done.stdout and b"sweep" in done.stdout, done.stdout


def test_a_width_too_narrow_for_a_table_draws_it_at_the_narrowest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rich cannot lay out a table whose columns are all kept whole in fewer columns than it has: sweep's
    # results table (10 columns) at COLUMNS=10 failed Rich's assertion "Sum of ratios must be > 0". It
    # is drawn 40 wide; the error line stays one line.
    from collbench.cli.console import console
    from collbench.cli.render.results import results_tables
    from collbench.results.io import read_rows

    rows = [r for r in read_rows(RESULTS) if r.algo == "ring"]
    monkeypatch.setenv("COLUMNS", "10")
    with console.capture() as captured:
        for table in results_tables(rows):
            console.print(table)
    drawn = captured.get().splitlines()
    assert any("ring" in line for line in drawn) and max(len(line) for line in drawn) == 40
    done = _run(["fit", "missing.jsonl"], tmp_path, COLUMNS="10")
    assert (done.returncode, done.stderr.splitlines()) == (2, [b"error: missing.jsonl: no such file"])
