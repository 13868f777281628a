"""import nccl-tests -O never replaces rows already in the file, and its summary says every shape it read.

`collbench import nccl-tests LOG -O results.jsonl`, with results.jsonl holding 844 rows measured by
`collbench tune`, replaced them by the log's 56 without a word; and a paste of two runs (16 ranks
on 2 nodes, then 2 ranks on 1 node) was summed up as '118 rows: all-reduce, 16 ranks on 2 nodes'.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app

REPO = Path(__file__).resolve().parents[2]
REAL = REPO / "tests" / "fixtures" / "real"
H100 = REAL / "all_reduce_perf-h100-2node-mpirun-gcp.log"  # 16 ranks on 2 nodes, 31 sizes
RTX = REAL / "all_reduce_perf-2080ti-x2-autodl.log"  # 2 ranks on 1 node, 28 sizes
MEASURED = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.output


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_an_output_that_holds_rows_is_refused_and_kept(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"results{suffix}"
    out.write_bytes(MEASURED.read_bytes())  # content is what counts, whatever the name says
    before = out.read_bytes()
    code, output = _run("import", "nccl-tests", str(RTX), "-O", str(out))
    assert code == 2, output
    errors = [line for line in output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and str(out) in errors[0] and "--overwrite" in errors[0], output
    assert out.read_bytes() == before


def test_overwrite_replaces_it_and_an_empty_file_is_written(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    out.write_bytes(MEASURED.read_bytes())
    code, output = _run("import", "nccl-tests", str(RTX), "-O", str(out), "--overwrite")
    assert code == 0, output
    assert len(out.read_text().splitlines()) == 56  # the log's 28 sizes, out-of-place and in-place
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    code, output = _run("import", "nccl-tests", str(RTX), "-O", str(empty))
    assert code == 0, output
    assert len(empty.read_text().splitlines()) == 56


def test_the_summary_names_every_shape_of_a_paste_of_two_runs(tmp_path: Path) -> None:
    log = tmp_path / "two-runs.log"
    log.write_text(H100.read_text() + "\n" + RTX.read_text())
    code, output = _run("import", "nccl-tests", str(log), "-O", str(tmp_path / "rows.jsonl"))
    assert code == 0, output
    summary = next(line for line in output.splitlines() if " rows: " in line)
    assert summary.startswith("118 rows: all-reduce, "), summary
    assert "16 ranks on 2 nodes" in summary and "2 ranks on 1 node" in summary, summary


def test_the_summary_of_one_run_reads_as_before(tmp_path: Path) -> None:
    code, output = _run("import", "nccl-tests", str(RTX), "-O", str(tmp_path / "rows.jsonl"))
    assert code == 0, output
    assert output.splitlines() == [
        "56 rows: all-reduce, 2 ranks on 1 node, 8 B to 1 GiB, algo native",
        f"wrote rows to {tmp_path / 'rows.jsonl'}",
    ]


@pytest.mark.parametrize("columns", [80, 60])
def test_the_path_written_is_never_cut_at_the_terminals_width(tmp_path: Path, columns: int) -> None:
    # At 80 columns the summary broke between 'wrote' and the path ('..., algo native; wrote' over
    # '/tmp/.../rows.jsonl'), and a path wider than the terminal was folded across lines.
    for out in (tmp_path / "rows.jsonl", tmp_path / ("a-rather-long-folder-name-" * 3) / "rows.jsonl"):
        out.parent.mkdir(exist_ok=True)
        result = CliRunner().invoke(
            app, ["import", "nccl-tests", str(H100), "-O", str(out)], env={"COLUMNS": str(columns)}
        )
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        if len(f"wrote rows to {out}") <= columns:
            assert lines[-1] == f"wrote rows to {out}"
            summary = lines[:-1]
        else:  # the path whole on a line of its own, however wide
            assert lines[-2:] == ["wrote rows to", str(out)]
            summary = lines[:-2]
        # The summary's words wrap at the width, none cut: read back whole across its lines.
        assert all(len(line) <= columns for line in summary), summary
        said = " ".join(line.strip() for line in summary)
        assert said == "62 rows: all-reduce, 16 ranks on 2 nodes, 8 B to 8 GiB, algo native", summary
