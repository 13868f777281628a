"""Every command that writes checks its options before its output files, and a refused command leaves
nothing behind (issue 34: `tune --op bogus` in a folder holding a profile said "pass --overwrite",
and in an empty folder it left collbench-profile-results.partial-topology.yaml)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import ConfigError
from collbench.tuning import pipeline

WIDE = {"COLUMNS": "200", "NO_COLOR": "1"}
FIXTURES = Path(__file__).parents[1] / "fixtures"
PROFILE = FIXTURES / "profiles" / "cpu-2core-gloo-4ranks.yaml"
LOG = FIXTURES / "nccl_tests" / "all_reduce_perf_8gpu.log"


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_tune_with_an_unknown_op_in_an_empty_folder_says_so_and_leaves_it_empty(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["tune", "--op", "bogus", "--quick"], env=WIDE)
    assert result.exit_code == 2, result.output
    assert "error: unknown op 'bogus'" in result.output
    assert _files(tmp_path) == {}


def test_tune_with_an_unknown_op_beside_a_profile_names_the_op_and_keeps_the_profile(tmp_path: Path) -> None:
    (tmp_path / "collbench-profile.yaml").write_bytes(PROFILE.read_bytes())
    before = _files(tmp_path)
    for op in ("bogus", "all-reduce,bogus"):
        result = CliRunner().invoke(app, ["tune", "--op", op, "--quick"], env=WIDE)
        assert result.exit_code == 2, result.output
        assert "error: unknown op 'bogus'" in result.output and "--overwrite" not in result.output
    assert _files(tmp_path) == before


def test_a_tune_the_sweep_refuses_leaves_no_partial_topology(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal after the planned topology was kept beside the results, before any row: it goes too."""

    def refused(*args: object, **kwargs: object) -> list[object]:
        raise ConfigError("refused by the sweep's own check")

    monkeypatch.setattr(pipeline, "fixed_rounds", refused)
    result = CliRunner().invoke(app, ["tune", "--quick"], env=WIDE)
    assert result.exit_code == 2, result.output
    assert "error: refused by the sweep's own check" in result.output
    assert _files(tmp_path) == {}


def _stream_with_rows(tmp_path: Path) -> Path:
    stream = tmp_path / "collbench-sweep.jsonl"
    stream.write_text(json.dumps({"op": "all-reduce", "algo": "ring", "size_bytes": 1024}) + "\n")
    return stream


@pytest.mark.parametrize(
    ("option", "says"),
    [
        (["--op", "bogus"], "unknown op 'bogus'"),
        (["--algo", "bogus"], "unknown algorithm 'bogus'"),
        (["--topology", "nothere.yaml"], "nothere.yaml: no such file"),
    ],
)
def test_sweep_checks_its_options_before_a_stream_that_holds_rows(tmp_path: Path, option: list[str], says: str) -> None:
    _stream_with_rows(tmp_path)
    before = _files(tmp_path)
    result = CliRunner().invoke(app, ["sweep", "--ranks", "2", *option], env=WIDE)
    assert result.exit_code == 2, result.output
    assert says in result.output and "--resume" not in result.output
    assert _files(tmp_path) == before


def test_profile_predict_checks_its_shapes_before_the_file_it_would_write(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_bytes(PROFILE.read_bytes())
    (tmp_path / "p.predicted.yaml").write_text("kept: true\n")
    before = _files(tmp_path)
    result = CliRunner().invoke(app, ["profile", "predict", str(profile), "--ranks", "bogus"], env=WIDE)
    assert result.exit_code == 2, result.output
    assert "--ranks" in result.output and "exists" not in result.output
    assert _files(tmp_path) == before


def test_import_checks_its_options_before_its_output(tmp_path: Path) -> None:
    target = tmp_path / "no-such-folder" / "rows.jsonl"
    result = CliRunner().invoke(
        app, ["import", "nccl-tests", str(LOG), "--algo", "native:bogus", "-O", str(target)], env=WIDE
    )
    assert result.exit_code == 2, result.output
    assert "bogus" in result.output and "no-such-folder" not in result.output


def test_sweep_checks_its_options_before_the_stream_it_would_resume(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["sweep", "--ranks", "2", "--resume", "--algo", "bogus"], env=WIDE)
    assert result.exit_code == 2, result.output
    assert "unknown algorithm 'bogus'" in result.output and "no collbench-sweep.jsonl" not in result.output
    assert _files(tmp_path) == {}


def test_fit_checks_its_ops_before_the_plot_it_would_write(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["fit", str(LOG), "--op", "bogus", "--plot", str(tmp_path / "no-such-folder" / "p.png")], env=WIDE
    )
    assert result.exit_code == 2, result.output
    assert "unknown op 'bogus'" in result.output and "no-such-folder" not in result.output
