"""An NCCL export of an Open MPI profile (``tune --backend mpi``) is refused with what its rules really
are: Open MPI's own coll/tuned algorithms, not collbench's."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule


@pytest.mark.parametrize("exporter", ["nccl-tuner", "env"])
def test_nccl_export_of_an_mpi_profile_names_open_mpis_algorithms(tmp_path: Path, exporter: str) -> None:
    rules = (Rule("all-reduce", 0, None, "native:recursive_doubling", at_bytes=1024),)
    path = tmp_path / "m.yaml"
    Profile(fingerprint="f", host="h", backend="mpi", rule_sets=(RuleSet(2, 1, rules),)).save(path)
    result = CliRunner().invoke(app, ["export", exporter, str(path)])
    assert result.exit_code != 0
    assert result.stderr.count("\n") == 1, result.stderr
    assert "its rules say which of Open MPI's own coll/tuned algorithms won" in result.stderr
    assert "collbench's algorithms" not in result.stderr
