"""`fit --json` carries the measured node count; `predict` keeps the measured ranks a node when --nodes is
not given, advises for where the fits were measured, and `profile predict` never rewrites its input."""

from __future__ import annotations

import json
from pathlib import Path

from fits_files import fits_file
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.models.fitted import Fit

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
REAL_H100 = REAL / "all_reduce_perf-h100-2node-mpirun-gcp.log"
EXAMPLE = Path(__file__).resolve().parents[2] / "profiles" / "cpu-2core-gloo-2ranks.yaml"


def _h100_fits(tmp_path: Path) -> Path:
    return fits_file(REAL_H100, tmp_path / "f.json")


def test_fit_json_carries_the_node_count_its_rows_give(tmp_path: Path) -> None:
    """The log names the host of each of its 16 ranks, two hosts: every fit says 2 nodes."""
    doc = json.loads(_h100_fits(tmp_path).read_text())
    assert doc["fits"] and all(f["nodes"] == 2 for f in doc["fits"])
    loaded = Fit.from_dict(doc["fits"][0])
    assert loaded.nodes == 2 and loaded.to_dict()["nodes"] == 2
    # A file written before fits kept the node count still loads, saying nothing of it.
    old = {k: v for k, v in doc["fits"][0].items() if k != "nodes"}
    assert Fit.from_dict(old).nodes is None and "nodes" not in Fit.from_dict(old).to_dict()


def test_predict_without_nodes_keeps_the_measured_ranks_a_node_and_reproduces_the_log(tmp_path: Path) -> None:
    """nccl-tests printed 6759.0 us (out of place) for 1 GiB at 16 ranks on 2 nodes; asked at 16 ranks
    with no --nodes, the prediction is that shape, within the fit's shown error of the log."""
    fits = _h100_fits(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["predict", "--fits", str(fits), "--ranks", "16", "--sizes", "1G", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["nodes"] == 2
    (pred,) = doc["predictions"]
    assert pred["error_pct"] is not None
    assert abs(pred["time_us"] - 6759.0) / 6759.0 * 100 <= pred["error_pct"]
    assert "assumed: --nodes not given: 2 nodes (8 ranks a node, as measured at 16 ranks on 2 nodes)" in result.stderr
    text = runner.invoke(app, ["predict", "--fits", str(fits), "--ranks", "64", "--sizes", "1G"])
    assert text.exit_code == 0, text.output
    assert "predicted at 64 ranks on 8 nodes" in text.stdout and "8 nodes (8 ranks a node" in text.stderr


def test_predict_asks_for_the_nodes_when_the_fits_do_not_say_them(tmp_path: Path) -> None:
    # It took 1 node: 1,024 ranks of a 2-node log were priced as one node of 1,024 GPUs. With no measured
    # ranks a node to keep, it asks, in one line, for the nodes to predict on or those measured on.
    doc = json.loads(_h100_fits(tmp_path).read_text())
    for f in doc["fits"]:
        del f["nodes"]
    fits = tmp_path / "old.json"
    fits.write_text(json.dumps(doc))
    runner = CliRunner()
    result = runner.invoke(app, ["predict", "--fits", str(fits), "--ranks", "1024", "--sizes", "1G"])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: --nodes not given, and the fits do not say the nodes they were measured on")
    assert "give --nodes N" in line and "--measured-nodes M" in line and "predicted at" not in result.output
    measured = runner.invoke(
        app, ["predict", "--fits", str(fits), "--ranks", "1024", "--sizes", "1G", "--measured-nodes", "2"]
    )
    assert measured.exit_code == 0, measured.output
    assert "predicted at 1024 ranks on 128 nodes" in measured.stdout
    assert "128 nodes (8 ranks a node, as measured at 16 ranks on 2 nodes)" in measured.stderr
    given = runner.invoke(app, ["predict", "--fits", str(fits), "--ranks", "16", "--sizes", "1G", "--nodes", "2"])
    assert given.exit_code == 0 and "predicted at 16 ranks on 2 nodes" in given.stdout, given.output


def test_a_log_naming_neither_nodes_nor_gpu_is_asked_for_its_nodes_not_put_on_one(tmp_path: Path) -> None:
    # The p5 README excerpt prints no rank lines: fit leaves its nodes unknown, so predict asks; fit
    # --nodes 2 records them, and import --nodes 2 then fit keeps them through the rows.
    log = REAL / "all_reduce_perf-p5-2node-mpijob-readme-excerpt.log"
    runner = CliRunner()
    bare = tmp_path / "bare.json"
    bare.write_text(runner.invoke(app, ["fit", str(log), "--json"]).stdout)
    asked = runner.invoke(app, ["predict", "--fits", str(bare), "--ranks", "1024"])
    assert asked.exit_code == 2 and "--nodes not given" in asked.output, asked.output
    rows = tmp_path / "rows.jsonl"
    imported = runner.invoke(app, ["import", "nccl-tests", str(log), "--nodes", "2", "-O", str(rows)])
    assert imported.exit_code == 0, imported.output
    for source in ([str(log), "--nodes", "2"], [str(rows)]):
        fitted = runner.invoke(app, ["fit", *source, "--json"])
        assert fitted.exit_code == 0, fitted.output
        assert [f["nodes"] for f in json.loads(fitted.stdout)["fits"]] == [2], source
        fits = tmp_path / "fits.json"
        fits.write_text(fitted.stdout)
        result = runner.invoke(app, ["predict", "--fits", str(fits), "--ranks", "1024", "--gpu", "H100"])
        assert result.exit_code == 0, result.output
        assert "predicted at 1024 ranks on 128 nodes" in result.stdout


def _unusable(tmp_path: Path, backend: str) -> Path:
    fit = Fit(
        "all-reduce", "native", backend, 16, 5.0, 1e-5, None, 0.99, 3.0, 28.0, 8, 1 << 30,
        points=20, unusable_because="misses a point by 28% (bound 25% at every point)",
    )  # fmt: skip
    path = tmp_path / f"{backend}.json"
    path.write_text(json.dumps({"fits": [fit.to_dict()]}))
    return path


def test_refusal_advice_fits_where_the_fits_were_measured(tmp_path: Path) -> None:
    cluster = CliRunner().invoke(app, ["predict", "--fits", str(_unusable(tmp_path, "nccl")), "--ranks", "32"])
    assert cluster.exit_code == 2, cluster.output
    assert "nccl-tests -n" in cluster.output and "fewer ranks than cores" not in cluster.output
    cpu = CliRunner().invoke(app, ["predict", "--fits", str(_unusable(tmp_path, "gloo")), "--ranks", "32"])
    assert cpu.exit_code == 2 and "fewer ranks than cores" in cpu.output, cpu.output


def test_profile_predict_without_output_writes_a_new_file_never_the_input(tmp_path: Path) -> None:
    profile = tmp_path / "example.yaml"
    profile.write_bytes(EXAMPLE.read_bytes())
    result = CliRunner().invoke(app, ["profile", "predict", str(profile), "--ranks", "8"])
    assert result.exit_code == 0, result.output
    written = tmp_path / "example.predicted.yaml"
    assert profile.read_bytes() == EXAMPLE.read_bytes() and written.is_file()
    assert f"wrote {written}" in " ".join(result.stdout.split())
    # The default path taken already: refused in one line, nothing replaced.
    before = written.read_bytes()
    again = CliRunner().invoke(app, ["profile", "predict", str(profile), "--ranks", "16"])
    assert again.exit_code == 2 and "give -O" in again.stderr and again.stderr.strip().count("\n") == 0
    assert written.read_bytes() == before and profile.read_bytes() == EXAMPLE.read_bytes()


REAL_GB200 = REAL / "all_reduce_perf-gb200-1440rank-one-rank-line.log"


def test_a_log_without_host_names_gives_ranks_a_node_from_its_rank_lines_devices(tmp_path: Path) -> None:
    """The GB200 log prints one rank line, rank 1439 on device 3: 4 GPUs a node, so 360 nodes (not 180 as
    8 ranks a node would say). Predicted at its own shape with no --nodes, the fit's error is shown."""
    runner = CliRunner()
    fitted = runner.invoke(app, ["fit", str(REAL_GB200), "--json"])
    assert fitted.exit_code == 0, fitted.output
    assert [f["nodes"] for f in json.loads(fitted.stdout)["fits"]] == [360]
    assert "reach device 3: taken as 4 ranks a node (1440 ranks on 360 nodes)" in fitted.stderr
    fits = tmp_path / "gb.json"
    fits.write_text(fitted.stdout)
    result = runner.invoke(app, ["predict", "--fits", str(fits), "--ranks", "1440", "--sizes", "1G", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["nodes"] == 360 and doc["predictions"][0]["error_pct"] is not None
    assert "taken as 180" not in result.stderr and "8 ranks a node" not in result.stderr


def test_ranks_a_node_is_the_highest_device_number_plus_one() -> None:
    from collbench.importers.nccl_tests_infer import ranks_per_node_from_devices

    assert ranks_per_node_from_devices(REAL_H100) == 8
    assert ranks_per_node_from_devices(REAL_GB200) == 4


def test_a_launcher_that_shows_each_rank_one_gpu_leaves_the_node_count_unknown(tmp_path: Path) -> None:
    from collbench.importers.nccl_tests_infer import ranks_per_node_from_devices

    log = tmp_path / "isolated.log"
    log.write_text(
        "#  Rank  0 Group  0 Pid  100 on nodeA device  0 [0x1b] NVIDIA H100 80GB HBM3\n"
        "#  Rank  1 Group  0 Pid  101 on nodeA device  0 [0x2b] NVIDIA H100 80GB HBM3\n"
    )
    assert ranks_per_node_from_devices(log) is None
