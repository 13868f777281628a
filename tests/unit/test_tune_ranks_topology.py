"""The topology a tune measures on is the one its ranks run on: GPUs under NCCL, the host's CPUs under gloo.

Fakes of two documented contracts: torch's ``torch.cuda.is_available()``/``device_count()`` (how many
GPUs this process's CUDA sees, which decides ``--backend auto``: ``resolve_backend`` picks NCCL only
with a GPU per rank), and NVML through collbench's seam, replaying a recorded machine
(tests/fixtures/nvml/: one H100 in a VM, and a DGX H100).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from collbench.errors import ConfigError
from collbench.profile.document import machine_fingerprint
from collbench.topology import sources
from collbench.topology.host import host_topology
from collbench.topology.model import DeviceKind
from collbench.topology.nvml import FakeNvmlBackend, Recording
from collbench.tuning.config import TuneConfig
from collbench.tuning.placement import plan_placement, topology_for_ranks

RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"


def _machine(monkeypatch: pytest.MonkeyPatch, recording: str, cuda_gpus: int) -> None:
    """NVML replays ``recording``; torch's CUDA sees ``cuda_gpus`` GPUs."""
    replay = Recording.load(RECORDINGS / recording)
    monkeypatch.setattr(sources, "PynvmlBackend", lambda: FakeNvmlBackend(replay))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda_gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: cuda_gpus)


def test_one_gpu_and_four_ranks_measure_on_the_host_cpus(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Before: "--ranks 4: asked for 4 ranks, the topology has 1" (the GPU topology of NVML).
    _machine(monkeypatch, "h100-single.json", cuda_gpus=1)
    notes: list[str] = []
    placement = plan_placement(TuneConfig(ranks=4, output=tmp_path / "p.yaml"), notes)
    topology = placement.topology
    assert topology is not None and topology.source == "host" and not topology.gpus
    assert [d.kind for d in topology.rank_devices] == [DeviceKind.CPU] * 4
    # The same machine the gloo ranks fingerprint their rows with (points.row_fingerprint: host_topology).
    assert machine_fingerprint(topology) == machine_fingerprint(host_topology(4))
    why = "1 GPU for 4 ranks and NCCL runs one rank per GPU: 4 CPU ranks over gloo, on this host's CPUs"
    assert notes == [why] and topology.note == why
    assert placement.layout is not None and placement.layout.world_size == 4


def test_gloo_asked_on_a_gpu_machine_uses_the_cpus_without_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    _machine(monkeypatch, "dgx-h100.json", cuda_gpus=8)
    notes: list[str] = []
    topology = topology_for_ranks(TuneConfig(ranks=2, backend="gloo"), notes)
    assert not topology.gpus and len(topology.rank_devices) == 2
    assert notes == [] and topology.note == "--backend gloo: the ranks run on this host's CPUs"


def test_a_gpu_per_rank_measures_on_the_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    _machine(monkeypatch, "dgx-h100.json", cuda_gpus=8)
    notes: list[str] = []
    topology = topology_for_ranks(TuneConfig(ranks=4, backend="auto"), notes)
    assert [g.id for g in topology.gpus] == ["GPU0", "GPU1", "GPU2", "GPU3"] and notes == []
    # NCCL asked for more ranks than GPUs is still refused in one line, as before.
    with pytest.raises(ConfigError, match="asked for 9 ranks, the topology has 8"):
        topology_for_ranks(TuneConfig(ranks=9, backend="nccl"), notes)


def test_gpus_that_torch_cannot_see_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # A CPU-only torch on a GPU machine (pip replaced the CUDA build): NVML shows 8, torch 0.
    _machine(monkeypatch, "dgx-h100.json", cuda_gpus=0)
    notes: list[str] = []
    topology = topology_for_ranks(TuneConfig(ranks=2), notes)
    assert not topology.gpus and len(topology.rank_devices) == 2
    assert len(notes) == 1
    assert notes[0].startswith("NVML shows 8 GPUs but torch ") and "sees none (a CPU-only build?)" in notes[0]


def test_no_gpu_anywhere_keeps_nvml_reason_and_says_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_library() -> FakeNvmlBackend:
        raise ImportError("no pynvml")

    monkeypatch.setattr(sources, "PynvmlBackend", no_library)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    notes: list[str] = []
    topology = topology_for_ranks(TuneConfig(ranks=3), notes)
    assert len(topology.rank_devices) == 3 and notes == []
    assert topology.note == "pynvml (nvidia-ml-py) is not installed: describing the host and its CPU ranks"
