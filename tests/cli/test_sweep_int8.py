"""`collbench sweep --dtype int8` and `--dtype uint8` on real gloo ranks: every op and algorithm runs with
every result checked (wrong 0), at 2, 3 and 4 ranks, sum and prod (the reduction that overflows
fastest); avg of an integer type and the types gloo does not carry are refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import read_rows
from collbench.schedules.ops import Op

pytestmark = pytest.mark.dist

RUNNER = CliRunner()
WIDE = {"COLUMNS": "300"}


@pytest.mark.slow  # a minute of ranks on 2 busy cores: CI runs it in its second step
@pytest.mark.parametrize(("ranks", "dtype", "redop"), [(2, "int8", "prod"), (3, "uint8", "sum"), (4, "int8", "sum")])
def test_int8_sweeps_check_every_result(tmp_path: Path, ranks: int, dtype: str, redop: str) -> None:
    out = tmp_path / "rows.jsonl"
    args = ["sweep", "--ranks", str(ranks), "--dtype", dtype, "-o", redop, "--op", "all", "--algo", "all"]
    args += ["-b", "1", "-e", "1K", "-f", "32", "-n", "1", "-w", "0", "--output", str(out)]
    result = RUNNER.invoke(app, args, env=WIDE)
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert {r.op for r in rows} == {op.value for op in Op}
    assert {r.dtype for r in rows} == {dtype}
    checked = [r for r in rows if r.op != "barrier"]
    assert checked and all(r.wrong == 0 and r.time_us > 0 for r in checked)
    assert "wrong elements: 0 (OK" in result.output


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["--dtype", "int8", "-o", "avg"],
            "error: avg of int8 is refused: NCCL's is the sum divided by the rank count",
        ),
        (["--dtype", "uint64"], "(gloo carries no uint32 or uint64)"),
    ],
)
def test_what_a_sweep_of_integers_cannot_run_is_one_line(tmp_path: Path, args: list[str], words: str) -> None:
    out = tmp_path / "rows.jsonl"
    result = RUNNER.invoke(app, ["sweep", "--ranks", "2", *args, "-O", str(out)], env=WIDE)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and words in line
    assert not out.exists()
