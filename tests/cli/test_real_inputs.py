"""The CLI on real pastes: import reads every row of every published log, fit labels unnamed logs with
--op, and a paste with no readable device is one red line and exit 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import read_rows

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
LOGS = sorted(p.name for p in REAL.glob("*.log"))
WIDE = {"COLUMNS": "200"}


def _result_lines(path: Path) -> int:
    text = path.read_text(encoding="utf-8").replace("[1,0]<stdout>:", " ")
    # Slurm's `srun --label` prefix ("0: ") is not part of the line.
    lines = [re.sub(r"^\s*\d+: ", " ", line) for line in text.splitlines()]
    return sum(1 for line in lines if len(line.split()) >= 11 and line.split()[0].isdigit())


@pytest.mark.parametrize("name", LOGS)
def test_import_reads_every_data_row(tmp_path: Path, name: str) -> None:
    out = tmp_path / "rows.jsonl"
    # The excerpt whose columns fit scatter and gather alike needs --op (it is asked for, not guessed).
    op = ["--op", "gather"] if name == "gather_perf-a100-2node-issue-excerpt.log" else []
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(REAL / name), "-O", str(out), *op], env=WIDE)
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert len(rows) == 2 * _result_lines(REAL / name)
    assert sum(r.in_place for r in rows) == len(rows) // 2
    # Whatever was inferred is said, one line each, and the summary names unknown node counts as such.
    assert "Traceback" not in result.output
    if rows[0].nodes == 0:
        assert "an unknown number of nodes" in result.output
        assert "assumed:" in result.stderr


def test_fit_labels_an_unnamed_log_with_op(tmp_path: Path) -> None:
    log = REAL / "all_reduce_perf-dgx-a100-4node-slurm-legacy.log"
    result = CliRunner().invoke(app, ["fit", str(log), "--op", "all-reduce", "--json"], env=WIDE)
    assert result.exit_code == 0, result.output
    fits = json.loads(result.stdout)["fits"]
    assert {f["op"] for f in fits} == {"all-reduce"}
    # --op named the collective: nothing about the op was left to the columns.
    assert "from the columns" not in result.stderr
    assert "took 32 ranks from busbw/algbw" in result.stderr


def test_fit_op_still_filters_a_named_log() -> None:
    log = REAL / "broadcast_perf-2080ti-x2-autodl.log"
    result = CliRunner().invoke(app, ["fit", str(log), "--op", "all-reduce"], env=WIDE)
    assert result.exit_code == 2 and "no rows left after --op/--algo" in result.output


def test_import_ranks_option(tmp_path: Path) -> None:
    lines = (REAL / "broadcast_perf-2080ti-x2-autodl.log").read_text().splitlines()
    log = tmp_path / "bcast.log"
    log.write_text("\n".join(line for line in lines if "Rank" not in line) + "\n")
    runner = CliRunner()
    # The command line (one process, -g2) still says 2 ranks, and that is what is taken, aloud.
    said = runner.invoke(app, ["import", "nccl-tests", str(log)], env=WIDE)
    assert said.exit_code == 0 and "took 2 ranks from the command line (one process" in said.stderr
    assert "56 rows: broadcast, 2 ranks on 1 node" in said.stderr
    # Without it (and the nThread line) nothing says how many ran: broadcast's busbw is its algbw.
    log.write_text("\n".join(ln for ln in lines if "Rank" not in ln and "_perf -b" not in ln and "nGpus" not in ln))
    missing = runner.invoke(app, ["import", "nccl-tests", str(log)], env=WIDE)
    assert missing.exit_code == 2 and "pass --ranks N" in missing.output
    given = runner.invoke(app, ["import", "nccl-tests", str(log), "--ranks", "8"], env=WIDE)
    assert given.exit_code == 0, given.output
    assert "56 rows: broadcast, 8 ranks on an unknown number of nodes" in given.stderr


@pytest.mark.parametrize(
    "text",
    [
        "nvidia-smi: command not found\n",
        "        GPU0    GPU1    CPU Affinity    NUMA Affinity\n",
        "\ufeff\r\n\t \r\n",
    ],
)
def test_paste_without_a_device_is_one_line_and_exit_2(tmp_path: Path, text: str) -> None:
    paste = tmp_path / "paste.txt"
    paste.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, ["discover", "--from-nvidia-smi", str(paste)], env=WIDE)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and str(paste) in lines[0] and "Traceback" not in result.output


def test_discover_says_what_it_assumed() -> None:
    paste = REAL / "h800-x8-nv8-cut-paste.topo.txt"
    result = CliRunner().invoke(app, ["discover", "--from-nvidia-smi", str(paste)], env=WIDE)
    assert result.exit_code == 0, result.output
    assumed = [line for line in result.stderr.splitlines() if line.startswith("assumed:")]
    assert len(assumed) == 6 and any("have no column in the header" in line for line in assumed)


def test_import_says_how_many_rows_failed_validation(tmp_path: Path) -> None:
    log = REAL / "all_gather_perf-v100-x8-failed-legacy-issue-excerpt.log"
    out = tmp_path / "rows.jsonl"
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "--output", str(out)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "2 rows failed validation" in result.output


def test_import_with_an_op_the_columns_contradict_is_one_line(tmp_path: Path) -> None:
    log = REAL / "all_reduce_perf-dgx-a100-4node-slurm-legacy.log"
    out = tmp_path / "rows.jsonl"
    args = ["import", "nccl-tests", str(log), "--op", "all-gather", "--ranks", "32", "--output", str(out)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
    assert result.exit_code != 0 and not out.exists()
    assert "seems to be all-reduce" in result.output and "Traceback" not in result.output


def test_fit_leaves_failed_rows_out_and_says_so() -> None:
    log = REAL / "all_gather_perf-v100-x8-failed-legacy-issue-excerpt.log"
    result = CliRunner().invoke(app, ["fit", str(log)], env={"COLUMNS": "300"})
    assert result.exit_code != 0
    assert "2 rows failed validation (wrong > 0): left out of the fits" in result.output
    # Named by its file, as every input error is ('error: results: ...' read as a file called results).
    assert f"error: {log}: no rows with a positive time and right data to fit (2 failed validation)" in result.output
