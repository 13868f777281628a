"""`collbench sweep` with NCCL asked for where it cannot run: one clear line and exit code 2 each."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from collbench.cli.app import app

BASE = ["sweep", "-b", "1K", "-e", "1K", "-n", "1", "--op", "all-reduce"]


def _fails_with_one_line(args: list[str], *needles: str) -> None:
    result = CliRunner().invoke(app, [*BASE, *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_nccl_without_a_gpu(tmp_path: Path) -> None:
    _fails_with_one_line(["--ranks", "2", "--backend", "nccl", "--stream", str(tmp_path / "s.jsonl")], "nccl", "gloo")


def test_forced_nccl_algorithm_needs_nccl(tmp_path: Path) -> None:
    stream = ["--stream", str(tmp_path / "s.jsonl")]
    _fails_with_one_line(["--ranks", "1", "--backend", "gloo", "--algo", "native:ring", *stream], "native:ring", "nccl")


def test_more_ranks_than_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A CUDA build with 2 GPUs and NCCL, as far as the checks made before launching can tell.
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: True)
    stream = ["--stream", str(tmp_path / "s.jsonl")]
    _fails_with_one_line(["--ranks", "4", "--backend", "nccl", "--algo", "native", *stream], "4 ranks", "it has 2")


def test_an_algorithm_this_nccl_lacks_is_refused_before_launching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from collbench.runtime.host import environment

    # A CUDA build with 2 GPUs whose NCCL (2.18) predates PAT (2.23).
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.distributed, "is_nccl_available", lambda: True)
    monkeypatch.setattr(environment, "nccl_version", lambda: "2.18.3")
    stream = ["--stream", str(tmp_path / "s.jsonl")]
    _fails_with_one_line(
        ["--ranks", "2", "--backend", "nccl", "--algo", "native:pat", *stream], "'pat'", "2.18.3", "2.23"
    )
    assert not (tmp_path / "s.jsonl").exists()
