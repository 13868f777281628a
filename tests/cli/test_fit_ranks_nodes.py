"""`fit --ranks` and `--nodes`, and a log's node count kept through `import` then `fit` (issue 32, item 5)."""

from __future__ import annotations

import json
from pathlib import Path

from refused import refused_line
from typer.testing import CliRunner

from collbench.cli.app import app

REAL = Path(__file__).parents[1] / "fixtures" / "real"
GB200 = REAL / "all_reduce_perf-gb200-1440rank-one-rank-line.log"
RESULTS = Path(__file__).parents[2] / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
WIDE = {"COLUMNS": "200"}


def _fit_shapes(output: str) -> list[tuple[int, int | None]]:
    return [(f["world_size"], f.get("nodes")) for f in json.loads(output)["fits"]]


def test_import_then_fit_keeps_the_node_count_a_direct_fit_gives(tmp_path: Path) -> None:
    runner = CliRunner()
    rows = tmp_path / "rows.jsonl"
    imported = runner.invoke(app, ["import", "nccl-tests", str(GB200), "-O", str(rows)], env=WIDE)
    assert imported.exit_code == 0, imported.output
    # The log names one host; its rank line's device 3 says 4 ranks a node (a GB200 compute tray).
    assert "1440 ranks on 360 nodes" in imported.output
    direct = runner.invoke(app, ["fit", str(GB200), "--json"], env=WIDE)
    via_rows = runner.invoke(app, ["fit", str(rows), "--json"], env=WIDE)
    assert direct.exit_code == 0 and via_rows.exit_code == 0, via_rows.output
    assert _fit_shapes(direct.stdout) == _fit_shapes(via_rows.stdout) == [(1440, 360)]


def test_nodes_option_on_import_and_fit(tmp_path: Path) -> None:
    runner = CliRunner()
    # Counted in NVL72 racks: 20 NVLink domains.
    fitted = runner.invoke(app, ["fit", str(GB200), "--nodes", "20", "--json"], env=WIDE)
    assert fitted.exit_code == 0, fitted.output
    assert _fit_shapes(fitted.stdout) == [(1440, 20)]
    rows = tmp_path / "rows.jsonl"
    imported = runner.invoke(app, ["import", "nccl-tests", str(GB200), "--nodes", "20", "-O", str(rows)], env=WIDE)
    assert imported.exit_code == 0 and "1440 ranks on 20 nodes" in imported.output
    again = runner.invoke(app, ["fit", str(rows), "--json"], env=WIDE)
    assert _fit_shapes(again.stdout) == [(1440, 20)]
    # Rows that say their node count keep it: another --nodes is refused, nothing replaced.
    other = runner.invoke(app, ["fit", str(rows), "--nodes", "360"], env=WIDE)
    assert other.exit_code == 2 and "its rows say 20 nodes, not 360; drop --nodes" in other.output
    uneven = runner.invoke(app, ["fit", str(GB200), "--nodes", "7"], env=WIDE)
    assert uneven.exit_code == 2 and "1440 ranks do not spread evenly over --nodes 7" in uneven.output
    zero = runner.invoke(app, ["import", "nccl-tests", str(GB200), "--nodes", "0"], env=WIDE)
    assert zero.exit_code == 2 and "--nodes 0: import nccl-tests needs at least 1 node" in zero.output
    assert "Traceback" not in uneven.output + other.output + zero.output
    # Rows of one node said '1 nodes'.
    one = runner.invoke(app, ["fit", str(RESULTS), "--nodes", "7"], env=WIDE)
    assert one.exit_code == 2 and "its rows say 1 node, not 7; drop --nodes" in one.output, one.output


def test_fit_ranks_for_a_log_that_does_not_say(tmp_path: Path) -> None:
    lines = (REAL / "broadcast_perf-2080ti-x2-autodl.log").read_text().splitlines()
    log = tmp_path / "bcast.log"
    # Without its rank lines, command line and nThread line nothing says how many ran.
    log.write_text("\n".join(ln for ln in lines if "Rank" not in ln and "_perf -b" not in ln and "nGpus" not in ln))
    runner = CliRunner()
    missing = runner.invoke(app, ["fit", str(log)], env=WIDE)
    assert missing.exit_code == 2 and "pass --ranks N" in missing.output
    given = runner.invoke(app, ["fit", str(log), "--ranks", "8", "--nodes", "1", "--json"], env=WIDE)
    assert given.exit_code == 0, given.output
    assert _fit_shapes(given.stdout) == [(8, 1)]
    bad = runner.invoke(app, ["fit", str(log), "--ranks", "8", "--nodes", "3"], env=WIDE)
    assert bad.exit_code == 2 and "--ranks 8 do not spread evenly over --nodes 3" in bad.output


def test_fit_ranks_other_than_the_rows_say_is_refused() -> None:
    # Rows say their rank count: --ranks 3 of 2-rank rows fitted 2 ranks without a word on the option,
    # where a log saying another count, and --nodes against rows, were refused.
    assert (
        refused_line(["fit", str(RESULTS), "--ranks", "3"])
        == f"error: {RESULTS}: its rows say 2 ranks, not 3; drop --ranks"
    )
    same = CliRunner().invoke(app, ["fit", str(RESULTS), "--ranks", "2", "--json"], env=WIDE)
    assert same.exit_code == 0, same.output
    assert set(_fit_shapes(same.output)) == {(2, 1)}
