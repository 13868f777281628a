"""An -O (or --nccl-graph-xml) naming a file that holds a profile, result rows or a topology is refused when
the command writes another kind of file there: `discover -O tuned.yaml`, `export nccl-tuner P -O
other-profile.yaml`, `report -O rows.html` and `profile predict P -O rows.yaml` replaced the file without a
word (a profile is hours of measurement). A file of the kind written is replaced as before (a topology
re-discovered over the old one, with --overwrite), an export saying so. The files are the real ones,
copied under tmp_path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"
RESULTS = REPO / "profiles" / "cpu-2core-gloo-2ranks-results.jsonl"
SMI = REPO / "tests" / "fixtures" / "real" / "a100-x8-nv12-17nics.topo.txt"
RUNNER = CliRunner()


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("topo") / "topo.yaml"
    result = RUNNER.invoke(app, ["discover", "--from-nvidia-smi", str(SMI), "-O", str(out)])
    assert result.exit_code == 0, result.output
    return out


CASES = [
    (["discover", "--from-nvidia-smi", str(SMI), "-O", "{T}"], "profile", "t.yaml",
     "a collbench profile", "a collbench topology"),
    (["export", "nccl-tuner", "--from-other-backend", str(PROFILE), "-O", "{T}"], "profile", "other.yaml",
     "a collbench profile", "the NCCL tuner config"),
    (["export", "ompi-rules", "--from-other-backend", str(PROFILE), "-O", "{T}"], "topology", "rules.txt",
     "a collbench topology", "the Open MPI rules"),
    (["report", str(RESULTS), "-O", "{T}"], "rows", "rows.html", "collbench result rows", "an HTML page"),
    (["layout", "--from-nvidia-smi", str(SMI), "--nccl-graph-xml", "{T}"], "profile", "g.xml",
     "a collbench profile", "an NCCL graph XML"),
    (["fit", str(RESULTS), "--plot", "{T}"], "profile", "fits.png", "a collbench profile", "a plot"),
    (["profile", "predict", str(PROFILE), "--ranks", "8", "-O", "{T}"], "rows", "rows.yaml",
     "collbench result rows", "a collbench profile"),
    (["profile", "merge", str(PROFILE), str(PROFILE), "--prefer", "newer", "-O", "{T}"], "topology", "t.yaml",
     "a collbench topology", "a collbench profile"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "source", "name", "held", "writing"), CASES)
def test_a_record_of_another_kind_is_not_replaced(
    args: list[str], source: str, name: str, held: str, writing: str, topology: Path, tmp_path: Path
) -> None:
    target = tmp_path / name
    shutil.copyfile({"profile": PROFILE, "rows": RESULTS, "topology": topology}[source], target)
    before = target.read_bytes()
    result = RUNNER.invoke(app, [a.format(T=target) for a in args], env={"COLUMNS": "80"})
    assert result.exit_code == 2, result.output
    assert result.output.strip() == (
        f"error: {target}: holds {held}; writing {writing} there would replace it: give another file name"
    )
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_a_file_of_the_kind_written_is_replaced_as_before(topology: Path, tmp_path: Path) -> None:
    target = tmp_path / "topo.yaml"
    shutil.copyfile(topology, target)
    target.write_text(target.read_text().replace("host: unknown", "host: old"))
    # With --overwrite: without it, any file with content is refused (tests/cli/test_outputs_not_replaced.py).
    result = RUNNER.invoke(app, ["discover", "--from-nvidia-smi", str(SMI), "-O", str(target), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert target.read_text() == topology.read_text()
    # An export is derived, so replaced, but said (it was replaced without a word); a new file is written.
    config = tmp_path / "tuner.conf"
    config.write_text("allreduce,0,-1,ring,simple,-1,1,2\n")
    args = ["export", "nccl-tuner", "--from-other-backend", str(PROFILE), "-O", str(config)]
    result = RUNNER.invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert config.read_text().startswith("# NCCL tuner plugin config made by collbench")
    said = f"wrote NCCL tuner config to {config} (replaced the file that was there)"
    assert said in result.output.splitlines(), result.output
    config.unlink()
    result = RUNNER.invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert f"wrote NCCL tuner config to {config}" in result.output.splitlines() and "replaced" not in result.output


def test_a_profile_goes_to_a_yaml_name_only(tmp_path: Path) -> None:
    """`profile merge A B -O results.jsonl` replaced 844 measured rows with a profile, as tune -O refuses."""
    rows = tmp_path / "results.jsonl"
    shutil.copyfile(RESULTS, rows)
    for args in (
        ["profile", "merge", str(PROFILE), str(PROFILE), "--prefer", "newer", "-O", str(rows)],
        ["profile", "predict", str(PROFILE), "--ranks", "8", "-O", str(rows)],
    ):
        result = RUNNER.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert result.output.strip() == f"error: -O/--output {rows}: a profile is YAML; use a .yaml name"
        assert rows.read_bytes() == RESULTS.read_bytes()


def test_a_profile_is_not_replaced_by_another_unless_asked(tmp_path: Path) -> None:
    """`profile predict A -O B` and `profile merge A C -O B` replaced B, another measured profile, without a
    word, where `tune -O B` refuses it; --overwrite replaces it, and an input named as -O is rewritten
    holding what it held (`profile predict A -O A` adds A's predicted shapes to A)."""
    a, other = tmp_path / "a.yaml", tmp_path / "other.yaml"
    shutil.copyfile(PROFILE, a)
    shutil.copyfile(PROFILE, other)
    other.write_text(other.read_text().replace("host: vm", "host: another-vm"))
    before = other.read_bytes()
    predicted = tmp_path / "p16.yaml"
    made = RUNNER.invoke(app, ["profile", "predict", str(a), "--ranks", "16", "-O", str(predicted)])
    assert made.exit_code == 0, made.output
    for args in (
        ["profile", "predict", str(a), "--ranks", "8", "-O", str(other)],
        ["profile", "merge", str(a), str(predicted), "--prefer", "newer", "-O", str(other)],
    ):
        result = RUNNER.invoke(app, args, env={"COLUMNS": "200"})
        assert result.exit_code == 2, result.output
        assert result.output.strip() == (
            f"error: {other} is not empty; pass --overwrite to replace it, or -O FILE to write elsewhere"
        )
        assert other.read_bytes() == before
        result = RUNNER.invoke(app, [*args, "--overwrite"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert "host: vm" in other.read_text()
        other.write_bytes(before)
    result = RUNNER.invoke(app, ["profile", "predict", str(a), "--ranks", "8", "-O", str(a)])
    assert result.exit_code == 0, result.output
    assert "2 ranks on 1 node, 8 ranks on 4 nodes (predicted)" in result.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["-O", ""], "-O/--output .: a profile is YAML; use a .yaml name"),
        (["-O", "."], "-O/--output .: a profile is YAML; use a .yaml name"),
        (["-O", "/"], "-O/--output /: a profile is YAML; use a .yaml name"),
        (["-O", "p.yaml", "--results", ""], "--results .: use a .jsonl, .csv or .parquet name"),
    ],
)
def test_tune_output_that_is_no_file_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], said: str
) -> None:
    """'tune -O .' (or -O '', --results '') ended in pathlib's "PosixPath('.') has an empty name" traceback:
    the partial rows' names, made from -O and --results, were asked for before those were checked."""
    monkeypatch.chdir(tmp_path)
    result = RUNNER.invoke(app, ["tune", "--ranks", "2", "--quick", *args])
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"error: {said}"
    assert list(tmp_path.iterdir()) == []
