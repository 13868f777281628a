"""A log of nccl-tests' types that collbench's rows do not hold is said in one line, and one that holds
them beside held ones is read for the held ones, the rest named: ``-d int8`` (and uint8, uint32, uint64,
f8e4m3, f8e5m2; ``-d all`` runs every type into one log) stopped ``import`` at its first row with
"row 1 was not written: field dtype: unknown dtype 'int8'", naming a row of the output, not the log,
while ``fit`` fitted the same rows.

The fixture stays as published; each test writes its copy with the type column changed under tmp_path
(nccl-tests prints the type's name there: ``test_typenames`` in src/common.cu).
"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import read_rows

LOG = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "all_reduce_perf-2080ti-x2-autodl.log"
WIDE = {"COLUMNS": "300"}
KNOWN = "they hold float, double, half, bfloat16, int32, int64"


def _of_type(name: str) -> str:
    return LOG.read_text(encoding="utf-8").replace("     float     sum ", f" {name:>9}     sum ")


def test_a_log_of_a_type_collbench_does_not_hold_is_one_error_line(tmp_path: Path) -> None:
    log = tmp_path / "int8.log"
    log.write_text(_of_type("int8"), encoding="utf-8")
    out = tmp_path / "rows.jsonl"
    for command in (["import", "nccl-tests", str(log), "-O", str(out)], ["fit", str(log)]):
        result = CliRunner().invoke(app, command, env=WIDE)
        assert result.exit_code == 2, result.output
        assert result.stderr.splitlines() == [
            f"error: {log}: its rows are of type int8, which collbench's rows do not hold ({KNOWN}):"
            " measure one of those with -d"
        ]
    assert not out.exists()


def test_rows_of_held_types_are_read_and_the_others_named(tmp_path: Path) -> None:
    # A -d all log: the float table, then uint8's; import keeps the float rows and says what it left.
    log = tmp_path / "all.log"
    log.write_text(LOG.read_text(encoding="utf-8") + _of_type("uint8"), encoding="utf-8")
    out = tmp_path / "rows.jsonl"
    result = CliRunner().invoke(app, ["import", "nccl-tests", str(log), "-O", str(out)], env=WIDE)
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert len(rows) == 56 and {r.dtype for r in rows} == {"float32"}
    note = f"{log}: 56 rows of type uint8, which collbench's rows do not hold ({KNOWN}) left out; 56 read"
    assert note in result.stderr
    result = CliRunner().invoke(app, ["fit", str(log)], env=WIDE)
    assert result.exit_code == 0 and note in result.stderr, result.output
