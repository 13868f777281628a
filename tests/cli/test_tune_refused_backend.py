"""A tune refused for its backend (``--backend nccl`` with no GPU) says so in one line and leaves nothing
behind: no partial topology beside the results, no other file, no blank line before the error."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from collbench.cli.app import app


def test_nccl_tune_without_a_gpu_is_one_line_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # torch's contract: torch.cuda.is_available() is False where no GPU is visible.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["tune", "--backend", "nccl", "--quick"])
    assert result.exit_code == 2, result.output
    assert result.stderr == "error: --backend nccl needs CUDA GPUs and none is visible here; use --backend gloo\n"
    assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_refused_tune_under_the_library_leaves_no_partial_topology(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from collbench.errors import BackendUnavailableError
    from collbench.tuning.config import TuneConfig
    from collbench.tuning.pipeline import run_tune

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    config = TuneConfig(
        backend="nccl", ranks=2, quick=True, output=tmp_path / "p.yaml", results_path=tmp_path / "p-results.jsonl"
    )
    with pytest.raises(BackendUnavailableError, match="--backend nccl needs CUDA GPUs"):
        run_tune(config)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_mpi_tune_without_open_mpi_is_one_line_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-such-bin"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["tune", "--backend", "mpi", "--quick", "--ranks", "2"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: --backend mpi needs Open MPI's mpirun, mpicc, ompi_info on PATH")
    assert result.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == []
