"""Ranks mapped to the GPUs CUDA shows them (collbench.topology.device_order), with NVML's fakes.

The contract is CUDA's (CUDA C Programming Guide, "CUDA Environment Variables"): CUDA_DEVICE_ORDER
FASTEST_FIRST (default) or PCI_BUS_ID (ascending PCI bus id); CUDA_VISIBLE_DEVICES lists indices
into that order or GPU UUIDs (unique prefixes accepted), shows them in the listed order, and stops
at the first entry it cannot resolve. NVML's index order promises nothing (nvmlDeviceGetHandleByIndex).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.errors import ConfigError
from collbench.topology.device_order import cuda_view, in_cuda_order
from collbench.topology.model import Device, DeviceKind
from collbench.topology.sources import discover_topology

RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"
# dgx-h100.json: NVML gpu3 is bus 5D, UUID GPU-dc11538d-...; gpu6 is bus BA, UUID GPU-27613b14-...
GPU3_UUID = "GPU-dc11538d-fbed-91ef-42be-1508c18a34b7"
GPU6_UUID_PREFIX = "GPU-27613b14"


def _gpu(nvml_index: int, bus: str, name: str = "NVIDIA H100", uuid: str | None = None) -> Device:
    return Device(id=f"GPU{nvml_index}", kind=DeviceKind.GPU, index=nvml_index, name=name, bus_id=bus, uuid=uuid)


def test_nvml_order_is_not_cudas_pci_order() -> None:
    # NVML numbered these out of bus order; CUDA (either order, identical GPUs) goes by bus id.
    gpus = [_gpu(0, "0000:9a:00.0"), _gpu(1, "0000:18:00.0"), _gpu(2, "0000:5d:00.0")]
    for env in ({}, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}):
        assert [d.id for d in cuda_view(gpus, env).devices] == ["GPU1", "GPU2", "GPU0"]
        assert cuda_view(gpus, env).note == ""


def test_mixed_gpus_under_fastest_first_are_said_to_be_a_guess() -> None:
    gpus = [_gpu(0, "0000:18:00.0", "NVIDIA A100"), _gpu(1, "0000:2a:00.0", "NVIDIA T4")]
    assert "set CUDA_DEVICE_ORDER=PCI_BUS_ID" in cuda_view(gpus, {}).note
    assert cuda_view(gpus, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}).note == ""
    with pytest.raises(ConfigError, match="CUDA knows FASTEST_FIRST and PCI_BUS_ID"):
        cuda_view(gpus, {"CUDA_DEVICE_ORDER": "SLOWEST_FIRST"})


def test_visible_devices_by_index_keep_their_listed_order() -> None:
    topo = discover_topology(nvml_replay=RECORDINGS / "dgx-h100.json")
    view, note = in_cuda_order(topo, {"CUDA_VISIBLE_DEVICES": "3,1"})
    # cuda:0 is NVML's GPU3 (bus 5D), cuda:1 NVML's GPU1 (bus 2A): renumbered as CUDA (and NCCL) count.
    assert [(d.id, d.bus_id, d.get("nvml_index")) for d in view.gpus] == [
        ("GPU0", topo.device("GPU3").bus_id, "3"),
        ("GPU1", topo.device("GPU1").bus_id, None),
    ]
    assert note == ""
    link = view.rank_link(0, 1)
    original = topo.link("GPU3", "GPU1")
    assert (
        link is not None
        and original is not None
        and (link.kind, link.bandwidth_gbps)
        == (
            original.kind,
            original.bandwidth_gbps,
        )
    )
    assert len(view.links) == 1


def test_visible_devices_by_uuid_and_uuid_prefix() -> None:
    topo = discover_topology(nvml_replay=RECORDINGS / "dgx-h100.json")
    view, _ = in_cuda_order(topo, {"CUDA_VISIBLE_DEVICES": f"{GPU6_UUID_PREFIX},{GPU3_UUID.upper()}"})
    assert [d.uuid for d in view.gpus] == [topo.device("GPU6").uuid, GPU3_UUID]
    with pytest.raises(ConfigError, match="start of 8 GPUs' UUIDs"):
        in_cuda_order(topo, {"CUDA_VISIBLE_DEVICES": "GPU-"})
    with pytest.raises(ConfigError, match="MIG instance"):
        in_cuda_order(topo, {"CUDA_VISIBLE_DEVICES": "MIG-4b4d1e6a-91f5-5a0b-9d1e-1f0a7b3c2d11"})


def test_an_unresolvable_entry_hides_it_and_what_follows() -> None:
    topo = discover_topology(nvml_replay=RECORDINGS / "dgx-h100.json")
    view, note = in_cuda_order(topo, {"CUDA_VISIBLE_DEVICES": "2,9,4"})
    assert [d.get("nvml_index") for d in view.gpus] == ["2"]
    assert "'9' is no GPU here; CUDA ignores it and what follows" in note
    with pytest.raises(ConfigError, match="lists GPU2 twice"):  # NVML's name: both entries are it
        in_cuda_order(topo, {"CUDA_VISIBLE_DEVICES": "2,2"})
    with pytest.raises(ConfigError, match="hides every GPU"):
        in_cuda_order(topo, {"CUDA_VISIBLE_DEVICES": ""})


def test_discover_keeps_the_gpus_the_ranks_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,4,7")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    topo = discover_topology(nvml_replay=RECORDINGS / "pcie-a6000x8.json", ranks=2)
    assert [(d.id, d.get("nvml_index")) for d in topo.gpus] == [("GPU0", "5"), ("GPU1", "4")]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert [d.id for d in discover_topology(nvml_replay=RECORDINGS / "pcie-a6000x8.json", ranks=2).gpus] == [
        "GPU0",
        "GPU1",
    ]
