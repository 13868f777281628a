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


def test_every_export_refuses_another_backends_profile_in_the_one_checks_words() -> None:
    """Each exporter refuses through serving.check_serves: the same sentence for every export of a family,
    naming what the profile's rules chose among and how to measure the consumer itself."""
    from collbench.errors import UserError
    from collbench.exporters.mpich_env import build_mpich_env
    from collbench.exporters.mpich_json import build_mpich_json
    from collbench.exporters.serving import check_serves

    gloo = Profile.load(PROFILE)
    refusals = {
        "nccl-tuner": lambda: build_nccl_tuner(gloo),
        "env": lambda: build_nccl_env(gloo),
        "ompi-rules": lambda: build_ompi_rules(gloo),
        "mpich-json": lambda: build_mpich_json(gloo, {}, "base.json"),
        "mpich-env": lambda: build_mpich_env(gloo),
    }
    for name, build in refusals.items():
        family = export_named(name).family
        with pytest.raises(UserError) as info:
            build()
        with pytest.raises(UserError) as same:
            check_serves(family, "gloo", None if family == "mpich" else False)
        assert str(info.value) == str(same.value), name
        assert "\n" not in str(info.value)
    with pytest.raises(UserError) as nccl:
        check_serves("nccl", "gloo", False)
    assert str(nccl.value) == (
        "this profile was measured over gloo, not NCCL: its rules say which of collbench's algorithms won over "
        "gloo, not which of NCCL's own algorithms, protocols and channel counts runs fastest; measure NCCL itself "
        "with `collbench tune --backend nccl` on the GPUs, or pass --from-other-backend to export it anyway"
    )
    # A library's profile says what it chose among (an MPICH profile chose MPICH's own algorithms), and an
    # export with no --from-other-backend (MPICH's file holds only MPICH's algorithms) offers none.
    with pytest.raises(UserError, match="its rules say which of MPICH's own algorithms won, not which of NCCL's"):
        check_serves("nccl", "mpich", False)
    with pytest.raises(UserError) as mpich:
        check_serves("mpich", "mpi", None)
    assert "Open MPI's own coll/tuned algorithms won" in str(mpich.value)
    assert str(mpich.value).endswith("measure MPICH itself with `collbench tune --backend mpich`")
    check_serves("mpich", "gloo", True)  # asked for anyway: no refusal (the export decides whether it may ask)
    for entry in EXPORTS:
        for backend in entry.serves:
            check_serves(entry.family, backend, None)  # its own backend's profiles are taken
