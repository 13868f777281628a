"""`collbench import nccl-tests` in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import read_rows

FIX = Path(__file__).parents[1] / "fixtures" / "nccl_tests"


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_import_writes_rows(tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"rows{suffix}"
    result = CliRunner().invoke(
        app,
        ["import", "nccl-tests", str(FIX / "reduce_scatter_perf_4gpu.json"), "--algo", "native:ring", "-O", str(out)],
    )
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert len(rows) == 28 and rows[0].algo == "native:ring" and rows[0].op == "reduce-scatter"


def test_import_to_stdout() -> None:
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(FIX / "broadcast_perf_4rank_unchecked.log")])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 30 and lines[0]["op"] == "broadcast"


def test_import_bad_inputs(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["import", "nccl-tests", str(tmp_path / "x.log")])
    assert missing.exit_code == 2 and "no such file" in missing.output
    bad_out = runner.invoke(app, ["import", "nccl-tests", str(FIX / "all_reduce_perf_8gpu.log"), "-O", "x.txt"])
    assert bad_out.exit_code == 2 and "unknown results format" in bad_out.output


def test_import_keeps_an_output_that_holds_rows_unless_overwrite(tmp_path: Path) -> None:
    """-O naming a file with rows (a sweep's results, say) replaced them without a word."""
    out = tmp_path / "measured.jsonl"
    kept = (FIX.parent.parent.parent / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl").read_bytes()[:5000]
    kept = kept[: kept.rindex(b"\n") + 1]
    out.write_bytes(kept)
    args = ["import", "nccl-tests", str(FIX / "all_reduce_perf_8gpu.log"), "-O", str(out)]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2, refused.output
    assert (
        refused.output.strip()
        == f"error: {out} is not empty; pass --overwrite to replace it, or -O FILE to write elsewhere"
    )
    assert out.read_bytes() == kept
    replaced = CliRunner().invoke(app, [*args, "--overwrite"])
    assert replaced.exit_code == 0, replaced.output
    assert {r.op for r in read_rows(out)} == {"all-reduce"} and read_rows(out)[0].world_size == 8


def test_import_unknown_algorithm_lists_native_once() -> None:
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(FIX / "all_reduce_perf_8gpu.log"), "--algo", "foo"])
    assert result.exit_code == 2
    known = result.output.split("known: ")[1].replace("\n", " ").split(", ")
    assert [k.strip() for k in known].count("native") == 1, result.output


REAL = Path(__file__).parents[1] / "fixtures" / "real"


def test_import_an_alltoall_log(tmp_path: Path) -> None:
    # The first thing a mixture-of-experts user tries: a published alltoall_perf log (SOURCES.md).
    out = tmp_path / "a2a.jsonl"
    result = CliRunner().invoke(
        app, ["import", "nccl-tests", str(REAL / "alltoall_perf-gb300-x4-nccl-tests.log"), "-O", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "4 rows: all-to-all, 4 ranks on 1 node, 8 GiB to 16 GiB, algo native" in result.output
    rows = read_rows(out)
    assert {(r.op, r.world_size, r.count) for r in rows} == {
        ("all-to-all", 4, 2147483648),
        ("all-to-all", 4, 4294967296),
    }


def test_import_new_ops_bad_inputs_are_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    gather = REAL / "gather_perf-a100-2node-issue-excerpt.log"
    # Under a name that names no collective, nothing says which of the two it is.
    excerpt = tmp_path / "excerpt.log"
    excerpt.write_bytes(gather.read_bytes())
    unnamed = runner.invoke(app, ["import", "nccl-tests", str(excerpt)])
    assert unnamed.exit_code == 2 and "Traceback" not in unnamed.output
    assert "fit scatter_perf and gather_perf alike; pass --op scatter or --op gather" in unnamed.output
    by_name = runner.invoke(app, ["import", "nccl-tests", str(gather)])
    assert by_name.exit_code == 0, by_name.output
    assert "took gather from the file's name (gather_perf-a100-2node-issue-excerpt.log)" in by_name.output
    wrong = runner.invoke(app, ["import", "nccl-tests", str(gather), "--op", "broadcast"])
    assert wrong.exit_code == 2 and "Traceback" not in wrong.output
    named = runner.invoke(
        app, ["import", "nccl-tests", str(REAL / "alltoall_perf-gb300-x4-nccl-tests.log"), "--op", "gather"]
    )
    assert named.exit_code == 2 and "the log measured all-to-all, not gather" in named.output
