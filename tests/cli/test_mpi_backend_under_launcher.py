"""``--backend mpi`` and ``--backend mpich`` start their own launcher (mpirun, mpiexec.mpich), so under
another one they are refused in one line that names the way to run them: for a tune too (the line
said 'run `collbench sweep --backend mpi --ranks N`' to a user who had typed `tune`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app

# A torchrun job of one rank (torch/distributed/run.py sets these): one rank, so no peer is waited for.
TORCHRUN = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"}


@pytest.mark.parametrize(("backend", "launcher"), [("mpi", "mpirun"), ("mpich", "mpiexec.mpich")])
@pytest.mark.parametrize("command", ["sweep", "tune"])
def test_refused_under_a_launcher_naming_how_to_run_it(
    backend: str, launcher: str, command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which(launcher) is None:
        pytest.skip(f"{launcher} is not installed (.ci/run installs it)")
    monkeypatch.chdir(tmp_path)
    args = [command, "--backend", backend, "-b", "1K", "-e", "8K"] + (["--quick"] if command == "tune" else [])
    result = CliRunner().invoke(app, args, env=TORCHRUN)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert f"starts {launcher} itself: run the command (sweep, tune) with --backend {backend}" in lines[0]
    assert "outside any launcher" in lines[0]
    assert not list(tmp_path.iterdir())  # nothing written
