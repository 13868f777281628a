"""`collbench export`: each target from a saved profile, errors as one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule

P = {"segment_bytes": None, "layout": "rank-order"}


RULES = (
    Rule("all-reduce", 0, 8191, "recursive-doubling", P, 1024, None, 20.0, 2.0),
    Rule("all-reduce", 8192, None, "ring", P, 1 << 20, None, 900.0, 1.4),
)


@pytest.fixture
def profile_path(tmp_path: Path) -> Path:
    """A profile measured over NCCL before collbench kept a selection among NCCL's own variants."""
    profile = Profile(fingerprint="fp", host="h", backend="nccl", rule_sets=(RuleSet(4, 1, RULES),))
    return profile.save(tmp_path / "p.yaml")


@pytest.fixture
def gloo_profile_path(tmp_path: Path) -> Path:
    profile = Profile(fingerprint="fp", host="h", backend="gloo", rule_sets=(RuleSet(4, 1, RULES),))
    return profile.save(tmp_path / "gloo.yaml")


NCCL_EXPORTS = (["nccl-tuner"], ["env"], ["nccl-plugin", "--output", "tuner"], ["nccl-plugin", "--show"])


@pytest.mark.parametrize("command", NCCL_EXPORTS, ids=" ".join)
def test_nccl_export_of_a_gloo_profile_is_refused_in_one_line(
    gloo_profile_path: Path, tmp_path: Path, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["export", command[0], str(gloo_profile_path), *command[1:]])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    line = " ".join(result.output.split())
    assert len(result.output.strip().splitlines()) <= 2, result.output  # one line, wrapped at most once
    assert "measured over gloo, not NCCL" in line
    assert "collbench tune --backend nccl" in line and "--from-other-backend" in line
    assert not (tmp_path / "tuner").exists()


@pytest.mark.parametrize("command", NCCL_EXPORTS[:3], ids=" ".join)
def test_nccl_export_of_a_gloo_profile_with_the_flag(
    gloo_profile_path: Path, tmp_path: Path, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["export", command[0], str(gloo_profile_path), *command[1:], "--from-other-backend"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    text = (tmp_path / "tuner" / "nccl-tuner.conf").read_text() if command[0] == "nccl-plugin" else result.stdout
    assert "measured with gloo, not NCCL" in text


@pytest.mark.parametrize("backend", ["gloo", "nccl"])
def test_ompi_rules_of_another_backends_profile_are_refused_in_one_line(tmp_path: Path, backend: str) -> None:
    profile = Profile(fingerprint="fp", host="h", backend=backend, rule_sets=(RuleSet(4, 1, RULES),))
    path = profile.save(tmp_path / "p.yaml")
    out = tmp_path / "rules.txt"
    result = CliRunner().invoke(app, ["export", "ompi-rules", str(path), "-O", str(out)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) <= 2, result.output
    line = " ".join(result.output.split())
    assert f"measured over {backend}, not Open MPI" in line
    assert "collbench tune --backend mpi" in line and "--from-other-backend" in line
    assert not out.exists()


def test_ompi_rules_of_a_gloo_profile_with_the_flag(gloo_profile_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", "ompi-rules", str(gloo_profile_path), "--from-other-backend"])
    assert result.exit_code == 0, result.output
    assert "backend gloo" in result.stdout and "ring -> ring" in result.stdout


def test_nccl_tuner(profile_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", "nccl-tuner", str(profile_path)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line and not line.startswith("#")]
    assert lines == ["allreduce,8192,-1,ring,simple,-1,1,4"]


def test_ompi_rules_to_file(profile_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "rules.txt"
    args = ["export", "ompi-rules", str(profile_path), "--output", str(out), "--from-other-backend"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    body = [line.split("#")[0].split() for line in out.read_text().splitlines()]
    assert [t for t in body if t] == [
        ["1"],
        ["2", "3"],
        *(["1", "1"], ["0", "0", "0", "0"]),  # smaller communicators: Open MPI's own choice
        *(["4", "2"], ["0", "3", "0", "0"], ["8192", "4", "0", "0"]),  # the profile's size
        *(["5", "1"], ["0", "0", "0", "0"]),  # larger communicators: Open MPI's own choice
    ]
    assert f"coll_tuned_dynamic_rules_filename {out}" in result.stderr


def test_env(profile_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", "env", str(profile_path)])
    assert result.exit_code == 0, result.output
    assert "allreduce: the answer changes with size" in result.stdout
    assert "NCCL_ALGO=" not in result.stdout.replace("no NCCL_ALGO", "")
    assert "note: allreduce: the answer changes with size" in result.stderr  # said on the terminal too


def test_nccl_tuner_notes_rules_left_out_on_the_terminal(profile_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "tuner.conf"
    result = CliRunner().invoke(app, ["export", "nccl-tuner", str(profile_path), "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "note: allreduce [0, 8191] bytes (4 ranks on 1 node, measured): recursive-doubling has no NCCL" in (
        result.stderr.replace("\n", " ")
    )


@pytest.mark.parametrize("command", ["env", "nccl-tuner"])
def test_profile_nccl_cannot_follow_is_one_line_exit_2(tmp_path: Path, command: str) -> None:
    rules = (Rule("broadcast", 0, None, "native:tree", P),)
    path = Profile(fingerprint="fp", host="h", backend="nccl", rule_sets=(RuleSet(4, 1, rules),)).save(
        tmp_path / "p.yaml"
    )
    result = CliRunner().invoke(app, ["export", command, str(path)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "native:tree, which NCCL cannot run: NCCL runs broadcast with Ring only" in result.output.replace("\n", "")


def test_overlapping_rules_are_one_line_exit_2(profile_path: Path) -> None:
    text = profile_path.read_text().replace("min_bytes: 8192", "min_bytes: 4096")
    profile_path.write_text(text)
    result = CliRunner().invoke(app, ["export", "nccl-tuner", str(profile_path)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output and "starts at 4096 bytes, expected 8192" in result.output


def test_missing_profile_is_one_line_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", "env", str(tmp_path / "none.yaml")])
    assert result.exit_code == 2
    assert "no such profile" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("where", ["dir", "under-a-file"])
def test_unwritable_output_is_one_line(profile_path: Path, tmp_path: Path, where: str) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("")
    out = tmp_path if where == "dir" else blocker / "o.txt"
    result = CliRunner().invoke(app, ["export", "env", str(profile_path), "--output", str(out)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output and str(out) in result.output


@pytest.mark.parametrize("kind", ["binary", "directory"])
def test_unreadable_profile_is_one_line(tmp_path: Path, kind: str) -> None:
    bad = tmp_path / "bad.yaml"
    if kind == "binary":
        bad.write_bytes(b"\xff\xfe\x00\x01")
    else:
        bad.mkdir()
    result = CliRunner().invoke(app, ["export", "nccl-tuner", str(bad)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output and str(bad) in result.output


@pytest.mark.parametrize("algo", ["warp-drive", "native:nvls_sharp"])
def test_unknown_algorithm_is_one_line_exit_2(profile_path: Path, algo: str) -> None:
    profile_path.write_text(profile_path.read_text().replace("algo: ring", f"algo: {algo}"))
    for command in ("env", "nccl-tuner", "nccl-plugin"):
        result = CliRunner().invoke(
            app, ["export", command, str(profile_path), "--output", str(profile_path.parent / "o")]
        )
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert algo.removeprefix("native:") in result.output


@pytest.mark.parametrize("where", ["under-a-file", "name-too-long"])
@pytest.mark.parametrize("show", [False, True])
def test_nccl_plugin_output_that_cannot_be_written_is_one_line(
    profile_path: Path, tmp_path: Path, where: str, show: bool
) -> None:
    """Root writes through permission bits, so the write is made to fail by the path itself."""
    blocker = tmp_path / "afile"
    blocker.write_text("")
    out = blocker / "sub" if where == "under-a-file" else tmp_path / ("x" * 300)
    args = ["export", "nccl-plugin", str(profile_path), "--output", str(out), *(["--show"] if show else [])]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert str(out)[:40] in result.output.replace("\n", "")


def test_nccl_plugin_output_dash_is_refused_not_made_a_directory(
    profile_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plugin is a built library and its config: nothing a terminal can take, so no folder named '-'."""
    monkeypatch.chdir(tmp_path)
    args = ["export", "nccl-plugin", str(profile_path), "-O", "-", "--from-other-backend"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert "--output -" in result.output
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("show", [False, True])
def test_nccl_plugin_refuses_to_replace_a_build_without_overwrite(
    gloo_profile_path: Path, tmp_path: Path, show: bool
) -> None:
    """A plugin or config already in DIR may be what a job loads: replaced only with --overwrite."""
    out = tmp_path / "tuner"
    base = ["export", "nccl-plugin", str(gloo_profile_path), "-O", str(out), "--from-other-backend"]
    first = CliRunner().invoke(app, base)
    assert first.exit_code == 0, first.output
    config = out / "nccl-tuner.conf"
    config.write_text("# the build a job uses\n")
    plugin_bytes = (out / "libnccl-tuner-collbench.so").read_bytes()
    again = CliRunner().invoke(app, [*base, *(["--show"] if show else [])])
    assert again.exit_code == 2, again.output
    assert "Traceback" not in again.output
    assert again.output.startswith("error: ") and len(again.output.strip().splitlines()) <= 2, again.output
    line = " ".join(again.output.split())
    assert f"{out} holds a build already (libnccl-tuner-collbench.so, nccl-tuner.conf)" in line
    assert "--overwrite" in line
    assert config.read_text() == "# the build a job uses\n"
    assert (out / "libnccl-tuner-collbench.so").read_bytes() == plugin_bytes
    replaced = CliRunner().invoke(app, [*base, "--overwrite", *(["--show"] if show else [])])
    assert replaced.exit_code == 0, replaced.output
    assert "measured with gloo, not NCCL" in config.read_text()


@pytest.mark.parametrize("fmt", ["nccl-tuner", "env", "nccl-plugin"])
def test_export_notes_wrap_as_every_note(fmt: str, tmp_path: Path) -> None:
    # Export's notes went through Rich's own wrapping: at 80 columns their continued lines started at
    # the margin, under the "note:" they continue, unlike every other command's notes.
    profile = Path(__file__).resolve().parents[2] / "profiles" / "cpu-2core-gloo-2ranks.yaml"
    out = tmp_path / ("tuner" if fmt == "nccl-plugin" else "out.txt")
    result = CliRunner().invoke(
        app, ["export", fmt, str(profile), "--from-other-backend", "-O", str(out)], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    noted = [i for i, line in enumerate(lines) if line.startswith(("note:", "no equivalent:"))]
    assert noted, result.stderr
    for i in noted:
        assert len(lines[i]) <= 80 and lines[i + 1].startswith("  "), result.stderr


def test_the_command_to_use_an_export_is_one_line(tmp_path: Path) -> None:
    # "use: mpirun --mca coll_tuned_use_dynamic_rules 1 --mca" then "coll_tuned_dynamic_rules_filename"
    # and the path on lines of their own: pasted, the command broke.
    profile = Path(__file__).resolve().parents[2] / "profiles" / "cpu-2core-gloo-2ranks.yaml"
    out = tmp_path / ("deep/" * 6) / "collbench-ompi.rules"
    out.parent.mkdir(parents=True)
    args = ["export", "ompi-rules", str(profile), "--from-other-backend", "-O", str(out)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert f"wrote Open MPI rules to {out}" in lines
    use = [line for line in lines if line.startswith("use: ")]
    assert len(use) == 1, result.stderr
    assert use[0].startswith(
        f"use: mpirun --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename {out} "
    )


def test_the_command_to_use_an_export_names_the_file_by_its_full_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every rank opens coll_tuned_dynamic_rules_filename in its own working directory; given a name it
    # cannot open there, Open MPI 4.1 runs its fixed decisions without a word (observed: mpirun from
    # another folder with the 'use:' line's relative name ran redscat_allgather where the rule said
    # basic_linear). The line printed 'rules dir/x.rules' as -O was given.
    profile = Path(__file__).resolve().parents[2] / "profiles" / "cpu-2core-gloo-2ranks.yaml"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my rules").mkdir()
    args = ["export", "ompi-rules", str(profile), "--from-other-backend", "-O", "my rules/x [1].rules"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    use = [line for line in result.stderr.splitlines() if line.startswith("use: ")]
    full = tmp_path.resolve() / "my rules" / "x [1].rules"
    assert use == [
        f"use: mpirun --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename '{full}' ..."
    ]
