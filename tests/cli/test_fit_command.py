"""`collbench fit` in-process."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.cells import cell_len
from synthetic_rows import make_rows
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import write_rows

FIX = Path(__file__).parents[1] / "fixtures" / "nccl_tests"


def test_fit_json_on_collbench_rows_and_a_plot(tmp_path: Path) -> None:
    rows = make_rows("ring", 4, 10.0, 1e-3 / 5, noise=0.01, seed=0, in_place=(False,))
    rows += make_rows("recursive-doubling", 4, 10.0, 1e-3 / 5, noise=0.01, seed=1, in_place=(False,))
    path = tmp_path / "r.csv"
    write_rows(path, rows)
    png = tmp_path / "fit.png"
    result = CliRunner().invoke(app, ["fit", str(path), "--json", "--plot", str(png)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {f["algo"] for f in doc["fits"]} == {"ring", "recursive-doubling"}
    assert doc["crossovers"][0]["below"] == "recursive-doubling"
    assert png.stat().st_size > 10_000


def test_fit_table_on_an_nccl_tests_log() -> None:
    result = CliRunner().invoke(app, ["fit", str(FIX / "all_reduce_perf_8gpu.log"), "--op", "all-reduce"])
    assert result.exit_code == 0, result.output
    assert "native" in result.stdout and "segments of all-reduce" in result.stdout


def test_fit_bad_inputs(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["fit", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == 2 and "no such file" in missing.output
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    none = runner.invoke(app, ["fit", str(empty)])
    assert none.exit_code == 2 and "no result rows" in none.output
    bad_op = runner.invoke(app, ["fit", str(FIX / "all_reduce_perf_8gpu.log"), "--op", "all-to-some"])
    assert bad_op.exit_code == 2 and "unknown op" in bad_op.output
    filtered = runner.invoke(app, ["fit", str(FIX / "all_reduce_perf_8gpu.log"), "--op", "broadcast"])
    assert filtered.exit_code == 2 and "no rows left" in filtered.output
    # An algorithm no row can be filed under is named, as an op is: '--algo rign' said "no rows left".
    for name, said in (("rign", "unknown algorithm 'rign'; known: ring,"), ("native:rnig", "unknown native variant")):
        bad_algo = runner.invoke(app, ["fit", str(FIX / "all_reduce_perf_8gpu.log"), "--algo", f"ring,{name}"])
        assert bad_algo.exit_code == 2 and bad_algo.stderr.startswith(f"error: --algo: {said}"), bad_algo.output
    forced = runner.invoke(app, ["fit", str(FIX / "all_reduce_perf_8gpu.log"), "--algo", "native:ring"])
    assert forced.exit_code == 2 and "no rows left" in forced.output  # a name rows may hold, none here


def test_a_fit_that_misses_its_points_says_so_in_the_table_and_the_json() -> None:
    # A published log whose times alternate 84/130/580 us with size: no non-decreasing model follows it.
    log = Path(__file__).parents[1] / "fixtures" / "real" / "all_reduce_perf-16rank-k8s-roce-legacy.log"
    runner = CliRunner()
    table = runner.invoke(app, ["fit", str(log)], env={"COLUMNS": "100"})
    assert table.exit_code == 0, table.output
    assert "native not used: misses a point by 28% (bound 25%" in " ".join(table.stdout.split())
    doc = json.loads(runner.invoke(app, ["fit", str(log), "--json"]).stdout)
    (fit,) = doc["fits"]
    assert fit["usable"] is False and fit["unusable_because"].startswith("misses a point by 28%")
    assert "at 4 KiB measured 139.8 us" in fit["unusable_because"]
    assert doc["crossovers"] == []


# A line that ends on a number and a next one that starts with its unit: the pair was parted.
PARTED = re.compile(r"\d\s*\n\s*(?:B|KiB|MiB|us|ms|%)(?=[\s,;.:)]|$)", re.MULTILINE)


@pytest.mark.parametrize("columns", ["80", None], ids=["COLUMNS=80", "piped"])
def test_why_a_fit_is_not_used_wraps_under_its_table_in_80_columns(columns: str | None) -> None:
    # The reason was the table's last column: in a pipe (160 columns) every row was as wide as it,
    # and a line of the table ran to 160. It is said under the table now, wrapped at words to 80.
    log = Path(__file__).parents[1] / "fixtures" / "real" / "all_reduce_perf-16rank-k8s-roce-legacy.log"
    runner = CliRunner()
    table = runner.invoke(app, ["fit", str(log)], env={"COLUMNS": columns})
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert all(cell_len(line) <= 80 for line in lines), max(lines, key=cell_len)
    assert not PARTED.search(table.stdout), table.stdout
    (row,) = [line for line in lines if line.startswith("native ") and "not used" not in line]
    assert row.split()[-1] == "no"
    why = json.loads(runner.invoke(app, ["fit", str(log), "--json"]).stdout)["fits"][0]["unusable_because"]
    start = next(i for i, line in enumerate(lines) if line.startswith("native not used: "))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("  "))
    said = lines[start:end]
    assert " ".join(" ".join(said).split()) == " ".join(f"native not used: {why}".split())
    assert len(said) > 1 and all(cell_len(line) <= 80 for line in said)


def test_rows_of_several_dtypes_are_said_and_dash_d_fits_one(tmp_path: Path) -> None:
    # A sweep of -d float32 and one of -d bfloat16 streamed into one file (as sweep's refusal of two
    # dtypes suggests) were fitted as one model without a word: each size took the faster dtype's time.
    from dataclasses import replace

    fast = make_rows("ring", 4, 10.0, 1e-3 / 5, noise=0.0, seed=0, in_place=(False,))
    # Every time of the row 3x, as a run that much slower has them: a p50 alone past its max is refused.
    slow = [
        replace(
            r,
            dtype="bfloat16",
            time_us=r.time_us * 3,
            time_us_mean=r.time_us_mean * 3,
            time_us_min=r.time_us_min * 3,
            time_us_max=r.time_us_max * 3,
        )
        for r in fast
    ]
    path = tmp_path / "r.jsonl"
    write_rows(path, fast + slow)
    runner = CliRunner()
    both = runner.invoke(app, ["fit", str(path), "--json"], env={"COLUMNS": "300"})
    assert both.exit_code == 0, both.output
    assert "note: all-reduce: rows of bfloat16 and float32 fitted as one model, each size at the fastest" in both.stderr
    alone = {}
    for dtype in ("float32", "bf16"):
        result = runner.invoke(app, ["fit", str(path), "--json", "-d", dtype], env={"COLUMNS": "300"})
        assert result.exit_code == 0, result.output
        assert "fitted as one model" not in result.stderr, result.stderr
        (alone[dtype],) = json.loads(result.stdout)["fits"]
    (mixed,) = json.loads(both.stdout)["fits"]
    assert mixed["alpha_us"] == alone["float32"]["alpha_us"]  # the fastest of each size: float32's
    assert alone["bf16"]["alpha_us"] > 2.5 * alone["float32"]["alpha_us"]
    none = runner.invoke(app, ["fit", str(path), "-d", "int64"])
    assert none.exit_code == 2 and "no rows left after --op/--algo/--dtype" in none.output
    bad = runner.invoke(app, ["fit", str(path), "-d", "int16"])  # a type neither nccl-tests nor collbench has
    assert bad.exit_code == 2 and "unknown dtype 'int16'" in bad.output


def test_each_crossover_says_how_far_ahead_the_new_choice_gets() -> None:
    # The example's fits cross twice; the table gave the sizes alone, as findings. native ->
    # rabenseifner at 6.19 MiB gains at most 3.8% up to 16 MiB, within rabenseifner's 3.9% median
    # error (the profile keeps native there): marked '*'. recursive-doubling -> native gains 7.8%.
    results = Path(__file__).parents[2] / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
    result = CliRunner().invoke(app, ["fit", str(results)], env={"COLUMNS": "80", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert "all-reduce  gloo     2      1.09 MiB  recursive-doubling  native         7.8%" in lines
    assert "all-reduce  gloo     2      6.19 MiB  native              rabenseifner  3.8%*" in lines
    said = " ".join(result.stdout.split())
    assert "*: 1 crossover where that is no more than the two fits' median error" in said
    assert all(cell_len(line) <= 80 for line in lines)


def test_rows_of_several_reductions_are_said(tmp_path: Path) -> None:
    # A sweep of -o sum and one of -o max streamed into one file (--stream F --resume) were fitted as one
    # model without a word, as several dtypes were before. An all-gather's rows keep the sweep's -o, which
    # it never applied: nothing is said of them.
    from dataclasses import replace

    sums = make_rows("ring", 4, 10.0, 1e-3 / 5, noise=0.0, seed=0, in_place=(False,))
    maxes = [replace(r, redop="max") for r in sums]
    gathers = [replace(r, op="all-gather", redop=redop) for r, redop in zip(sums, ["sum", "max"] * 20, strict=False)]
    path = tmp_path / "r.jsonl"
    write_rows(path, sums + maxes + gathers)
    result = CliRunner().invoke(app, ["fit", str(path), "--json"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert (
        "note: all-reduce: rows of the max and sum reductions fitted as one model, each size at the fastest of "
        "them; a results file of one reduction fits it alone"
    ) in result.stderr
    assert "all-gather: rows of the" not in result.stderr
    alone = tmp_path / "sum.jsonl"
    write_rows(alone, sums)
    one = CliRunner().invoke(app, ["fit", str(alone), "--json"], env={"COLUMNS": "300"})
    assert one.exit_code == 0 and "reductions fitted as one" not in one.stderr, one.output


def test_dash_o_writes_what_json_prints_and_refuses_to_replace(tmp_path: Path) -> None:
    # docs/tour: the file a command writes is -O everywhere; fit had none ('No such option: -O').
    log = Path(__file__).parents[1] / "fixtures" / "real" / "all_reduce_perf-h100-2node-mpirun-gcp.log"
    runner = CliRunner()
    fits = tmp_path / "h100.json"
    wrote = runner.invoke(app, ["fit", str(log), "-O", str(fits)])
    assert wrote.exit_code == 0, wrote.output
    assert "segments of all-reduce" in wrote.stdout and f"wrote fits to {fits}" in wrote.stderr
    printed = runner.invoke(app, ["fit", str(log), "--json"])
    assert json.loads(fits.read_text()) == json.loads(printed.stdout)
    predicted = runner.invoke(app, ["predict", "--fits", str(fits), "--ranks", "32", "--sizes", "1M"])
    assert predicted.exit_code == 0, predicted.output
    # A second run refuses to replace the file without --overwrite, leaving it as it was.
    fits.write_text('{"fits": []}\n')
    again = runner.invoke(app, ["fit", str(log), "-O", str(fits)])
    assert again.exit_code == 2 and "is not empty; pass --overwrite to replace it" in again.output
    assert fits.read_text() == '{"fits": []}\n'
    replaced = runner.invoke(app, ["fit", str(log), "-O", str(fits), "--overwrite", "--json"])
    assert replaced.exit_code == 0, replaced.output
    assert json.loads(fits.read_text()) == json.loads(replaced.stdout) == json.loads(printed.stdout)


def test_dash_o_never_replaces_what_was_measured(tmp_path: Path) -> None:
    log = Path(__file__).parents[1] / "fixtures" / "real" / "all_reduce_perf-h100-2node-mpirun-gcp.log"
    runner = CliRunner()
    rows = tmp_path / "rows.json"  # rows under a .json name: results, --overwrite or not
    write_rows(tmp_path / "r.jsonl", make_rows("ring", 4, 10.0, 1e-3 / 5, noise=0.0, seed=0, in_place=(False,)))
    rows.write_bytes((tmp_path / "r.jsonl").read_bytes())
    kept = rows.read_bytes()
    refused = runner.invoke(app, ["fit", str(log), "-O", str(rows), "--overwrite"])
    assert refused.exit_code == 2 and "holds collbench result rows" in refused.output
    assert rows.read_bytes() == kept
    own = tmp_path / "log.json"  # the log fitted, named as -O
    own.write_bytes(log.read_bytes())
    itself = runner.invoke(app, ["fit", str(own), "-O", str(own), "--overwrite"])
    assert itself.exit_code == 2 and "is one of the files fitted" in itself.output
    assert own.read_bytes() == log.read_bytes()
    not_json = runner.invoke(app, ["fit", str(log), "-O", str(tmp_path / "fits.txt")])
    assert not_json.exit_code == 2 and "use a .json name" in not_json.output
    assert not (tmp_path / "fits.txt").exists()
    for result in (refused, itself, not_json):
        assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_fits_record_what_measured_them_and_predict_says_it(tmp_path: Path) -> None:
    # A fits file did not say whether its numbers came from a published log or from collbench's own rows.
    log = Path(__file__).parents[1] / "fixtures" / "real" / "all_reduce_perf-h100-2node-mpirun-gcp.log"
    rows = Path(__file__).parents[2] / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
    runner = CliRunner()
    for given, source, words in ((log, "nccl-tests", "an nccl-tests log"), (rows, "collbench", "collbench's own rows")):
        fits = tmp_path / f"{source}.json"
        wrote = runner.invoke(app, ["fit", str(given), "-O", str(fits)])
        assert wrote.exit_code == 0, wrote.output
        assert {f["source"] for f in json.loads(fits.read_text())["fits"]} == {source}
        predicted = runner.invoke(app, ["predict", "--fits", str(fits), "--ranks", "4", "--sizes", "1M", "--json"])
        assert predicted.exit_code == 0, predicted.output
        predictions = json.loads(predicted.stdout)["predictions"]
        assert predictions and all(p["basis"].startswith(f"fitted from {words}; ") for p in predictions)
        assert {p["fit_source"] for p in predictions} == {source}
    # A file from before fits kept it says nothing of it, rather than a guess.
    data = json.loads((tmp_path / "nccl-tests.json").read_text())
    for fit in data["fits"]:
        del fit["source"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    predicted = runner.invoke(app, ["predict", "--fits", str(old), "--ranks", "32", "--sizes", "1M", "--json"])
    assert predicted.exit_code == 0 and "fitted from" not in predicted.stdout, predicted.output


def test_no_crossovers_among_fits_none_of_which_is_used(tmp_path: Path) -> None:
    # Three sizes an algorithm (sweep -b 1K -e 64K -f 8) fit nothing usable (two parameters need four
    # points): the crossover line said "one algorithm is fastest over the whole range, or only one was
    # measured" under two algorithms each marked "use: no", as if the fits had found a winner.
    sizes = [1024, 8192, 65536]
    rows = make_rows("ring", 4, 10.0, 1e-3 / 5, noise=0.01, seed=0, sizes=sizes, in_place=(False,))
    rows += make_rows("direct", 4, 10.0, 1e-3 / 5, noise=0.01, seed=1, sizes=sizes, in_place=(False,))
    path = tmp_path / "r.jsonl"
    write_rows(path, rows)
    result = CliRunner().invoke(app, ["fit", str(path)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "direct not used: 3 points for 2 parameters" in text and "ring not used: 3 points" in text, text
    assert "no crossovers: they are found between usable fits, and no op here has two of one world size" in text
    assert "one algorithm is fastest" not in text
    # Two usable fits that never cross still say what they did before.
    both = make_rows("ring", 4, 10.0, 1e-3 / 5, noise=0.01, seed=0, in_place=(False,))
    write_rows(path, both)
    one = CliRunner().invoke(app, ["fit", str(path)], env={"COLUMNS": "80"})
    assert one.exit_code == 0, one.output
    assert "no crossovers: one algorithm is fastest over the whole range" in " ".join(one.stdout.split())
