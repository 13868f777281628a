"""`collbench predict` in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from fits_files import fits_file
from synthetic_rows import make_rows
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.models.costs import cost_terms
from collbench.models.fit import fit_results


def _fits_file(tmp_path: Path) -> Path:
    rows = make_rows("ring", 4, 10.0, 1e-3 / 5, noise=0.0, seed=0, in_place=(False,))
    rows += make_rows("recursive-doubling", 4, 10.0, 1e-3 / 5, noise=0.0, seed=0, in_place=(False,))
    path = tmp_path / "fits.json"
    path.write_text(json.dumps(fit_results(rows).to_dict()))
    return path


def test_predict_4096_ranks_json(tmp_path: Path) -> None:
    fits = _fits_file(tmp_path)
    result = CliRunner().invoke(
        app, ["predict", "--fits", str(fits), "--ranks", "4096", "--nodes", "1", "--sizes", "1K,1M,1G", "--json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    ring = next(p for p in doc["predictions"] if p["algo"] == "ring" and p["size_bytes"] == 1 << 20)
    expected = cost_terms("all-reduce", "ring", 4096, 1 << 20).time_us(10.0, 1e-3 / 5, 0.0)
    assert abs(ring["time_us"] - expected) / expected < 0.01
    assert ring["simulated_us"] is None and ring["fitted_world_size"] == 4
    choice = {c["size_bytes"]: c["algo"] for c in doc["choice"]}
    assert choice[1024] == "recursive-doubling" and choice[1 << 30] == "ring"
    assert doc["crossovers"][0]["below"] == "recursive-doubling"


def test_predict_small_world_simulates_the_schedule_from_a_profile(tmp_path: Path) -> None:
    fits = json.loads(_fits_file(tmp_path).read_text())["fits"]
    profile = tmp_path / "p.yaml"
    # The example profile with these fits: predict reads a profile's fits, and checks the whole profile.
    data = yaml.safe_load((Path(__file__).parents[2] / "profiles" / "cpu-2core-gloo-2ranks.yaml").read_text())
    profile.write_text(yaml.safe_dump({**data, "fits": fits}))
    args = ["predict", "--profile", str(profile), "--ranks", "8", "--nodes", "1", "--sizes", "64K", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    ring = next(p for p in doc["predictions"] if p["algo"] == "ring")
    assert abs(ring["simulated_us"] - ring["time_us"]) / ring["time_us"] < 1e-6
    table = CliRunner().invoke(app, ["predict", "--profile", str(profile), "--ranks", "8", "--nodes", "1"])
    assert table.exit_code == 0 and "choice per size" in table.stdout


def test_predict_bad_inputs(tmp_path: Path) -> None:
    runner = CliRunner()
    fits = _fits_file(tmp_path)
    results = tmp_path / "results.jsonl"
    measured = make_rows("ring", 4, 10.0, 1e-3 / 5, noise=0.0, seed=0)
    results.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in measured))
    example = yaml.safe_load((Path(__file__).parents[2] / "profiles" / "cpu-2core-gloo-2ranks.yaml").read_text())
    example["rule_sets"][0]["rules"][0]["algo"] = "warp-drive"
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(example))
    cases = [
        (["predict", "--ranks", "8"], "exactly one"),
        (["predict", "--fits", str(tmp_path / "none.json"), "--ranks", "8"], "no such file"),
        (["predict", "--fits", str(fits), "--ranks", "8", "--op", "broadcast"], "no fits for broadcast"),
        (["predict", "--fits", str(fits), "--ranks", "8", "--op", "bogus"], "unknown op"),
        (["predict", "--fits", str(fits), "--ranks", "8", "--sizes", "12Q"], "size"),
        (["predict", "--fits", str(fits), "--ranks", "8", "--sizes", "1K,0.5"], "whole number of bytes"),
        # NCCL's own model alone reads these; on gloo's fits they changed nothing, without a word.
        (
            ["predict", "--fits", str(fits), "--ranks", "8", "--nodes", "1", "--collnet"],
            "--collnet describes NCCL's own choice, and these fits are gloo's: leave it out",
        ),
        (
            ["predict", "--fits", str(fits), "--ranks", "8", "--nodes", "1", "--no-nvls"],
            "--no-nvls describes NCCL's own choice, and these fits are gloo's: leave it out",
        ),
        # A profile whose rules are broken is refused as every reader of profiles refuses it: predict took
        # its fits alone and predicted, exit 0.
        (["predict", "--profile", str(broken), "--ranks", "8", "--nodes", "1"], "not a valid collbench profile"),
        # A sweep's results in place of its fits: it said only "not JSON: Extra data".
        (["predict", "--fits", str(results), "--ranks", "8"], "results, not fits: fit them first"),
        # ... and in place of a profile: "not YAML: expected '<document start>', but found '{'".
        (
            ["predict", "--profile", str(results), "--ranks", "8"],
            "this is collbench result rows (fit, report and compare read them), not a collbench profile",
        ),
    ]
    for args, message in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (args, result.output)


def test_predict_refuses_negative_alpha_and_unreadable_files(tmp_path: Path) -> None:
    good = _fits_file(tmp_path)
    data = json.loads(good.read_text())
    data["fits"][0]["alpha_us"] = -3.0
    neg = tmp_path / "neg.json"
    neg.write_text(json.dumps(data))
    result = CliRunner().invoke(app, ["predict", "--ranks", "64", "--fits", str(neg)])
    assert result.exit_code == 2 and "alpha_us" in result.output
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00")
    for args in (["--fits", str(binary)], ["--profile", str(tmp_path)]):
        result = CliRunner().invoke(app, ["predict", "--ranks", "64", *args])
        assert result.exit_code == 2 and "Traceback" not in result.output


REAL_H100 = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "all_reduce_perf-h100-2node-mpirun-gcp.log"


def test_predict_says_where_each_number_comes_from_and_how_sure_it_is(tmp_path: Path) -> None:
    """The issue's example: the H100 2-node log's fit at 1,024 ranks on 128 nodes rises with size, and
    every prediction names its fit, its scale and (away from the measured shape) no error claim."""
    runner = CliRunner()
    fits = fits_file(REAL_H100, tmp_path / "f.json")
    args = ["predict", "--fits", str(fits), "--ranks", "1024", "--nodes", "128", "--sizes", "32K,64K,1M"]
    result = runner.invoke(app, [*args, "--measured-nodes", "2", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    times = [p["time_us"] for p in doc["predictions"]]
    assert times == sorted(times)
    for p in doc["predictions"]:
        assert p["fit"] == "all-reduce native nccl x16 on 2 nodes"
        assert p["scale"] == 64 and p["scale_text"] == "x64 the measured world size"
        assert p["error_pct"] is None and "NCCL's model" in p["basis"]
    at_home = runner.invoke(app, ["predict", "--fits", str(fits), "--ranks", "16", "--nodes", "2", "--sizes", "1M"])
    assert at_home.exit_code == 0, at_home.output
    assert "x16" in at_home.stdout and "±" in at_home.stdout  # measured there: the model's error is shown
    text = runner.invoke(app, args)
    # Every row shares its fits and scale: said once, in the title.
    assert text.exit_code == 0 and "from fits at 16 ranks (x64)" in text.stdout
    # The log names both hosts: the fit carries its 2 nodes, so nothing is guessed about them.
    assert "does not say" not in text.stderr and "on 2 nodes" in text.stdout


def test_predict_refuses_a_bad_arch_or_node_count_in_one_line(tmp_path: Path) -> None:
    fits = _fits_file(tmp_path)
    for extra, message in [(["--nccl-arch", "kepler"], "--nccl-arch"), (["--measured-nodes", "3"], "spread evenly")]:
        result = CliRunner().invoke(app, ["predict", "--fits", str(fits), "--ranks", "8", *extra])
        assert result.exit_code == 2, result.output
        assert message in result.output and "Traceback" not in result.output


def test_predict_refuses_a_size_of_0_bytes_as_fit_does(tmp_path: Path) -> None:
    # fit keeps 0-byte rows out of every model (fit_points._EMPTY: NCCL returns at once for a count
    # of 0); predict pricing one with a fit's latency would time a call that does not happen.
    fits = _fits_file(tmp_path)
    for sizes in ("0", "0,1K", "1M,0"):
        result = CliRunner().invoke(app, ["predict", "--fits", str(fits), "--ranks", "64", "--sizes", sizes])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: --sizes 0: a call of 0 bytes moves no data")
    ok = CliRunner().invoke(app, ["predict", "--fits", str(fits), "--ranks", "64", "--nodes", "1", "--sizes", "1,1K"])
    assert ok.exit_code == 0, ok.output


def test_predict_of_no_size_is_one_line(tmp_path: Path) -> None:
    # '--sizes ,,' printed the nodes it assumed, then 'no sizes to predict': two lines, the first moot.
    fits = _fits_file(tmp_path)
    for sizes in (",,", "", " "):
        result = CliRunner().invoke(app, ["predict", "--fits", str(fits), "--ranks", "64", "--sizes", sizes])
        assert result.exit_code == 2, result.output
        said = f"error: --sizes {sizes!r} names no size; give sizes such as 4K,1M"
        assert result.output.strip().splitlines() == [said], result.output


def test_predict_refuses_a_size_no_rank_holds(tmp_path: Path) -> None:
    # 999999999G was priced at 976562 TiB and 4e9 s; sizes in every file collbench reads are below 2^50.
    fits = _fits_file(tmp_path)
    for sizes in ("999999999G", "1K,1048576G"):
        result = CliRunner().invoke(app, ["predict", "--fits", str(fits), "--ranks", "64", "--sizes", sizes])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].endswith(
            ": sizes are below 2^50 bytes (1 PiB), more than any rank's message (K/M/G are powers of 1024)"
        )
    ok = CliRunner().invoke(
        app, ["predict", "--fits", str(fits), "--ranks", "64", "--nodes", "1", "--sizes", "1048575G"]
    )
    assert ok.exit_code == 0, ok.output


def test_predict_reads_a_profile_once_and_every_reader_checks_its_fits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import collbench.fileio

    example = Path(__file__).parents[2] / "profiles" / "cpu-2core-gloo-2ranks.yaml"
    real_read = collbench.fileio.read_text_file
    read: list[Path] = []

    def counting(path: Path, *args: object, **kwargs: object) -> str:
        read.append(Path(path))
        return real_read(path, *args, **kwargs)  # type: ignore[arg-type]

    # Every reader of text files (Profile.load, the fits' loader) reads through fileio.read_text_file.
    for module in ("collbench.profile.document", "collbench.models.stored"):
        monkeypatch.setattr(f"{module}.read_text_file", counting)
    result = CliRunner().invoke(app, ["predict", "--profile", str(example), "--ranks", "8"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert read == [example]  # it was read three times: Profile.load, the fits, the nodes measured
    # A fit predict would refuse is refused by every reader of the profile alike (it was read by predict
    # alone): here export.
    data = yaml.safe_load(example.read_text())
    data["fits"][0]["alpha_us"] = -1.0
    broken = tmp_path / "p.yaml"
    broken.write_text(yaml.safe_dump(data))
    for args in (["predict", "--profile", str(broken), "--ranks", "8"], ["export", "nccl-tuner", str(broken)]):
        refused = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
        assert refused.exit_code == 2, refused.output
        assert "alpha_us is -1.0; it must be a finite number >= 0" in refused.output, args


def test_a_profile_given_as_fits_is_sent_to_profile(tmp_path: Path) -> None:
    # --fits took a profile for its fits alone: one of a schema to come, or of rules that leave a gap,
    # predicted, exit 0 (what fed5432 stopped for --profile), and the nodes its rule sets were measured
    # on went unsaid ("the fits do not say their node count"). YAML or JSON, it is sent to --profile.
    example = Path(__file__).parents[2] / "profiles" / "cpu-2core-gloo-2ranks.yaml"
    data = yaml.safe_load(example.read_text())
    data["schema_version"] = 99
    future = tmp_path / "future.yaml"
    future.write_text(yaml.safe_dump(data))
    as_json = tmp_path / "p.json"
    as_json.write_text(json.dumps(yaml.safe_load(example.read_text())))
    for path in (example, future, as_json):
        result = CliRunner().invoke(app, ["predict", "--fits", str(path), "--ranks", "16", "--nodes", "8"])
        assert result.exit_code == 2, result.output
        assert result.stderr.splitlines() == [
            f"error: {path}: this is a collbench profile: give it as --profile {path} (read whole: its rules"
            " checked, and the nodes its rule sets were measured on kept)"
        ]


def test_the_error_columns_legend_does_not_read_as_an_error() -> None:
    # A failure is one line starting 'error: ' (and a non-zero exit); the error column's legend started so
    # on stdout after a table that predicted fine, as if something had failed.
    profile = Path(__file__).resolve().parents[2] / "profiles" / "cpu-2core-gloo-2ranks.yaml"
    result = CliRunner().invoke(
        app, ["predict", "--profile", str(profile), "--ranks", "2", "--sizes", "64K"], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    assert "error column: the model's median error on measured points near" in result.stdout
    assert not [line for line in result.stdout.splitlines() if line.startswith("error: ")], result.stdout
