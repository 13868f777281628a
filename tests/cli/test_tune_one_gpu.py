"""The README's first command on a machine with one GPU: `collbench tune --quick`, no --ranks.

NVML is the replayed one-H100 recording (tests/fixtures/nvml/h100-single.json, through collbench's NVML
seam); torch's CUDA is faked to its documented answers on that machine (``torch.cuda.is_available()``
True, ``device_count()`` 1). One GPU cannot hold a collective of one rank per GPU, so the default
runs CPU ranks over gloo (``default_local_ranks``, ``resolve_backend``); the ranks are separate
processes, which see this machine's real torch, and run on its CPUs as they would there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from small_tune import quick_made_small
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.profile.document import Profile, machine_fingerprint
from collbench.results.io import read_rows
from collbench.runtime.host.affinity import default_cpu_ranks
from collbench.topology import sources
from collbench.topology.host import host_topology
from collbench.topology.nvml import FakeNvmlBackend, Recording

H100 = Path(__file__).resolve().parents[1] / "fixtures" / "nvml" / "h100-single.json"


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
@pytest.mark.dist
def test_tune_quick_on_one_h100_runs_cpu_ranks_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    replay = Recording.load(H100)
    monkeypatch.setattr(sources, "PynvmlBackend", lambda: FakeNvmlBackend(replay))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    # The real pipeline, made small (tests/small_tune.py): 1 KiB and 4 KiB, two rounds.
    quick_made_small(monkeypatch)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["tune", "--quick"])
    # Before: exit 2, "error: --ranks 4: asked for 4 ranks, the topology has 1" (NVML's one GPU).
    assert result.exit_code == 0, result.output
    ranks = default_cpu_ranks()
    profile = Profile.load(tmp_path / "collbench-profile.yaml")
    assert (profile.backend, profile.world_size) == ("gloo", ranks)
    assert profile.fingerprint == machine_fingerprint(host_topology(ranks))
    rows = read_rows(tmp_path / "collbench-profile-results.jsonl")
    assert rows and {r.backend for r in rows} == {"gloo"} and all(r.wrong == 0 for r in rows)
    why = [line for line in result.output.splitlines() if "NCCL runs one rank per GPU" in line]
    assert why == [
        f"note: 1 GPU for {ranks} ranks and NCCL runs one rank per GPU: {ranks} CPU ranks over gloo, "
        "on this host's CPUs"
    ]
