"""A command's output that is there already, with something in it, is replaced only with --overwrite, as
sweep, tune, fit -O, import and profile refuse it: `discover -O` (it refused only a topology --probe
measured), `report -O`, `fit --plot` and `layout --nccl-graph-xml` replaced the file a run before had
written, or any other, without a word. One `error:` line, exit 2, the file as it was and nothing written
beside it; --overwrite replaces it; an empty file is nothing to lose and is written over. The inputs are
the repository's real files, read in place; everything written goes under tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
SMI = REPO / "tests" / "fixtures" / "real" / "a100-x8-nv12-17nics.topo.txt"
RUNNER = CliRunner()

CASES = [
    (["discover", "--from-nvidia-smi", str(SMI), "-O", "{T}"], "topo.yaml", "-O", "schema_version:"),
    (["report", str(RESULTS), "-O", "{T}"], "page.html", "-O", "<!DOCTYPE html>"),
    (["fit", str(RESULTS), "--plot", "{T}"], "fits.png", "--plot", "\x89PNG"),
    (["layout", "--from-nvidia-smi", str(SMI), "--nccl-graph-xml", "{T}"], "g.xml", "--nccl-graph-xml", "<graphs"),
]


@pytest.mark.parametrize(("args", "name", "option", "written"), CASES)
def test_an_output_with_content_is_replaced_only_with_overwrite(
    args: list[str], name: str, option: str, written: str, tmp_path: Path
) -> None:
    target = tmp_path / name
    # What an earlier run left there, or anything else the user keeps under that name.
    target.write_bytes(b"kept: an earlier run's output\n")
    command = [a.format(T=target) for a in args]
    result = RUNNER.invoke(app, command, env={"COLUMNS": "80"})
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"error: {target} is not empty; pass --overwrite to replace it, or {option} FILE to write elsewhere"
    )
    assert target.read_bytes() == b"kept: an earlier run's output\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]

    result = RUNNER.invoke(app, [*command, "--overwrite"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert target.read_bytes().decode("latin-1").startswith(written)


@pytest.mark.parametrize(("args", "name", "option", "written"), CASES)
def test_an_empty_output_is_written_without_overwrite(
    args: list[str], name: str, option: str, written: str, tmp_path: Path
) -> None:
    target = tmp_path / name
    target.touch()
    result = RUNNER.invoke(app, [a.format(T=target) for a in args], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert target.read_bytes().decode("latin-1").startswith(written)


def test_a_second_run_into_the_same_name_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The flow a user runs: `collbench report rows` twice (its default -O, report.html) keeps the first page."""
    monkeypatch.chdir(tmp_path)
    result = RUNNER.invoke(app, ["report", str(RESULTS)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    first = (tmp_path / "report.html").read_bytes()
    result = RUNNER.invoke(app, ["report", str(RESULTS)], env={"COLUMNS": "80"})
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        "error: report.html is not empty; pass --overwrite to replace it, or -O FILE to write elsewhere"
    )
    assert (tmp_path / "report.html").read_bytes() == first


def test_an_nvml_recording_is_not_replaced_unasked(tmp_path: Path) -> None:
    """`discover --record FILE` saved over whatever FILE held once NVML had answered: a recording of a
    machine no longer at hand among them. Refused before NVML is asked (so here, with or without a GPU),
    and a profile there is never replaced by a recording, --overwrite or not."""
    kept = tmp_path / "rec.json"
    kept.write_text('{"format": "collbench-nvml-recording"}\n')
    result = RUNNER.invoke(app, ["discover", "--record", str(kept)], env={"COLUMNS": "80"})
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"error: {kept} is not empty; pass --overwrite to replace it, or --record FILE to write elsewhere"
    )
    assert kept.read_text() == '{"format": "collbench-nvml-recording"}\n'
    profile = tmp_path / "p.json"
    profile.write_bytes((REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml").read_bytes())
    result = RUNNER.invoke(app, ["discover", "--record", str(profile), "--overwrite"], env={"COLUMNS": "80"})
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"error: {profile}: holds a collbench profile; writing an NVML recording there would replace it: give "
        "another file name"
    )
    assert profile.read_bytes() == (REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml").read_bytes()
