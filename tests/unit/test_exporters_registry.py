"""The exporters' registry: the one list `collbench export` makes its commands of, each export behind one
signature (a profile and a request in, an Exported out), and the backends it serves asked of the backends."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.backends import BACKENDS
from collbench.cli.app import app
from collbench.exporters.exported import Exported
from collbench.exporters.nccl_env import build_nccl_env
from collbench.exporters.nccl_tuner import build_nccl_tuner
from collbench.exporters.ompi_rules import build_ompi_rules
from collbench.exporters.registry import EXPORTS, ExportRequest, export_named
from collbench.profile.document import Profile

PROFILE = Path(__file__).resolve().parents[2] / "profiles" / "cpu-2core-gloo-2ranks.yaml"


def test_export_has_one_command_per_entry_in_the_registrys_order_with_its_help() -> None:
    from collbench.cli.export import app as export_app

    commands = [c.name for c in export_app.registered_commands]
    assert commands == [e.name for e in EXPORTS]
    assert [c.help for c in export_app.registered_commands] == [e.help for e in EXPORTS]
    listed = CliRunner().invoke(app, ["export", "--help"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0
    for entry in EXPORTS:
        assert entry.name in listed.output
        assert entry.help.split(" ")[0] in listed.output


def test_the_backends_say_which_exports_take_their_profiles() -> None:
    served = {e.name: e.serves for e in EXPORTS}
    assert served["nccl-tuner"] == served["env"] == served["nccl-plugin"] == ("nccl",)
    assert served["ompi-rules"] == served["ompi-rankfile"] == ("mpi",)
    assert served["mpich-json"] == served["mpich-env"] == ("mpich",)
    # gloo feeds none: its profiles reach NCCL's and Open MPI's exports only with --from-other-backend.
    for entry in EXPORTS:
        assert entry.serves == tuple(b.name for b in BACKENDS if entry.family in b.feeds)
        assert "gloo" not in entry.serves


def test_each_export_is_its_builder_behind_the_one_signature() -> None:
    profile = Profile.load(PROFILE)
    request = ExportRequest(from_other_backend=True)
    tuner = export_named("nccl-tuner").function(profile, request)
    assert tuner == build_nccl_tuner(profile, from_other_backend=True)
    assert export_named("env").function(profile, request) == build_nccl_env(profile, from_other_backend=True)
    rules = export_named("ompi-rules").function(profile, request)
    built = build_ompi_rules(profile, from_other_backend=True)
    assert isinstance(rules, Exported) and rules.text == built.text and rules.notes == ()
    # Said after the file is written, as the command always has: each note Open MPI cannot follow, then
    # each range where its fixed decision was already fastest.
    assert rules.after == (
        *(("no equivalent", n) for n in built.notes),
        *(("", line) for line in built.unneeded),
    )
    assert rules.files == ()


def test_the_plugin_export_names_the_files_it_built_and_what_a_job_needs(tmp_path: Path) -> None:
    from collbench.errors import UserError
    from collbench.exporters.nccl_plugin import c_compiler

    profile = Profile.load(PROFILE)
    with pytest.raises(UserError, match="--output DIR"):
        export_named("nccl-plugin").function(profile, ExportRequest(from_other_backend=True))
    try:
        c_compiler()
    except UserError:
        pytest.skip("no C compiler here to build the plugin")
    built = export_named("nccl-plugin").function(profile, ExportRequest(from_other_backend=True, directory=tmp_path))
    plugin, config = built.files
    assert plugin == tmp_path / "libnccl-tuner-collbench.so" and plugin.is_file()
    assert config.read_text(encoding="utf-8") == build_nccl_tuner(profile, from_other_backend=True).text
    assert built.text == f"NCCL_TUNER_PLUGIN={plugin.resolve()}\nNCCL_TUNER_CONFIG_FILE={config.resolve()}\n"
