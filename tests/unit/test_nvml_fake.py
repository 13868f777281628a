"""NVML through the fake: four recorded machine types, and the wrapper's behaviour."""

from __future__ import annotations

import importlib.util
import json
import logging
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from collbench.errors import InputFileError
from collbench.topology.bus_id import normalize_bus_id
from collbench.topology.model import LinkKind, Topology
from collbench.topology.nvml import (
    FakeNvmlBackend,
    Gpu,
    Nvml,
    NvmlUnavailableError,
    Recording,
    RecordingBackend,
    call_key,
)
from collbench.topology.nvml_source import mask_to_ids, topology_from_nvml
from collbench.topology.sources import discover_topology

RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"


def _replay(name: str) -> Topology:
    return discover_topology(nvml_replay=RECORDINGS / name)


def _kind(topo: Topology, a: int, b: int) -> tuple[LinkKind, int, float]:
    link = topo.link(f"GPU{a}", f"GPU{b}")
    assert link is not None, (a, b)
    return link.kind, link.count, link.bandwidth_gbps


def test_dgx_h100_every_pair_through_nvswitch() -> None:
    topo = _replay("dgx-h100.json")
    assert topo.source == "nvml" and topo.host == "dgx-h100"
    assert len(topo.gpus) == 8
    assert {g.name for g in topo.gpus} == {"NVIDIA H100 80GB HBM3"}
    assert [g.bus_id for g in topo.gpus] == [f"0000:{b}:00.0" for b in ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")]
    for a, b in combinations(range(8), 2):
        # 18 NVLink 4 links at 25 GB/s each, to the switches: every pair gets them.
        assert _kind(topo, a, b) == (LinkKind.NVSWITCH, 18, 450.0)
    assert len(topo.links) == 28
    g0, g4 = topo.device("GPU0"), topo.device("GPU4")
    assert g0.numa_node == 0 and g4.numa_node == 1
    assert g0.cpus == (*range(0, 56), *range(112, 168))
    assert g4.cpus == (*range(56, 112), *range(168, 224))
    assert g0.get("pcie_gen") == "5" and g0.get("pcie_width") == "16"
    assert g0.get("nvlink_version") == "4.0" and g0.get("nvlink_generation") == "4"
    assert g0.get("nvlink_links") == "18" and g0.get("nvswitch_links") == "18"
    assert g0.memory_bytes == 81559 * 2**20
    assert g0.uuid is not None and g0.uuid.startswith("GPU-")
    assert topo.note == "NVML, driver 535.129.03"


DGX1_NVLINK = {
    (0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2, (1, 2): 2, (1, 3): 1, (1, 5): 2, (2, 3): 2,
    (2, 6): 1, (3, 7): 1, (4, 5): 1, (4, 6): 1, (4, 7): 2, (5, 6): 2, (5, 7): 1, (6, 7): 2,
}  # fmt: skip


def test_dgx1_v100_hybrid_cube_mesh() -> None:
    topo = _replay("dgx1-v100.json")
    assert len(topo.gpus) == 8
    for a, b in combinations(range(8), 2):
        kind, count, bw = _kind(topo, a, b)
        if (a, b) in DGX1_NVLINK:
            assert (kind, count, bw) == (LinkKind.NVLINK, DGX1_NVLINK[(a, b)], 25.0 * DGX1_NVLINK[(a, b)])
        else:
            # No NVLink: the PCIe level. Only cross-socket pairs lack NVLink on a DGX-1; gen3 x16 at half.
            assert (kind, count) == (LinkKind.SYS, 1)
            assert bw == pytest.approx(0.985 * 16 * 0.5)
    for g in topo.gpus:
        assert g.get("nvlink_links") == "6"
        assert g.get("nvlink_version") == "2.0"
        assert g.get("nvswitch_links") is None


def test_pcie_only_machine_levels_and_p2p() -> None:
    topo = _replay("pcie-a6000x8.json")
    assert len(topo.gpus) == 8
    gen4x16 = 1.97 * 16
    for a, b in combinations(range(8), 2):
        kind, count, bw = _kind(topo, a, b)
        if a // 4 != b // 4:
            # SYS, and P2P reads unsupported across sockets: priced as SYS anyway.
            assert (kind, bw) == (LinkKind.SYS, pytest.approx(gen4x16 * 0.5))
        elif a // 2 == b // 2:
            assert (kind, bw) == (LinkKind.PIX, pytest.approx(gen4x16))
        else:
            assert (kind, bw) == (LinkKind.PXB, pytest.approx(gen4x16 * 0.9))
        assert count == 1
    # Links 0-3 exist but are inactive (no bridges): no NVLink facts.
    assert all(g.get("nvlink_links") is None for g in topo.gpus)


def test_nvlink_not_supported_machine() -> None:
    topo = _replay("t4x4-vm.json")
    assert [g.name for g in topo.gpus] == ["Tesla T4"] * 4
    for a, b in combinations(range(4), 2):
        assert _kind(topo, a, b) == (LinkKind.PHB, 1, pytest.approx(0.985 * 16 * 0.8))
    for g in topo.gpus:
        assert g.numa_node is None  # memory affinity NotSupported in the VM
        assert g.cpus == tuple(range(48))


def test_ranks_keep_the_first_gpus() -> None:
    topo = discover_topology(nvml_replay=RECORDINGS / "dgx-h100.json", ranks=3)
    assert [g.id for g in topo.gpus] == ["GPU0", "GPU1", "GPU2"]


def test_recordings_match_their_generator() -> None:
    spec = importlib.util.spec_from_file_location("make_recordings", RECORDINGS / "make_recordings.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for filename, build in module.MACHINES.items():
        assert json.loads((RECORDINGS / filename).read_text()) == build(), filename


@pytest.mark.parametrize("name", ["dgx-h100.json", "dgx1-v100.json", "pcie-a6000x8.json", "t4x4-vm.json"])
def test_recording_a_replay_gives_the_same_answers(name: str) -> None:
    original = Recording.load(RECORDINGS / name)
    backend = RecordingBackend(FakeNvmlBackend(original), host=original.host)
    nvml = Nvml(backend)
    first = topology_from_nvml(nvml, original.host)
    nvml.shutdown()
    again = Recording(host=original.host, calls=json.loads(json.dumps(backend.recording.calls)))
    second = topology_from_nvml(Nvml(FakeNvmlBackend(again)), original.host)
    assert first == second
    # Every call discovery makes is in the recording (nothing answered "not found").
    assert set(backend.recording.calls) <= set(original.calls)


def _recording(calls: dict[str, Any]) -> Recording:
    return Recording(host="h", calls=calls)


def test_wrapper_initialises_lazily_decodes_bytes_and_hides_not_supported() -> None:
    seen: list[str] = []

    class Spy(FakeNvmlBackend):
        def call(self, name: str, *args: Any) -> Any:
            seen.append(name)
            return super().call(name, *args)

    nvml = Nvml(
        Spy(
            _recording(
                {
                    "nvmlDeviceGetName(gpu0)": {"value": {"__bytes__": "Tesla T4"}},
                    "nvmlDeviceGetNumaNodeId(gpu0)": {"error": "NOT_SUPPORTED"},
                }
            )
        )
    )
    assert seen == []
    assert nvml.call("nvmlDeviceGetName", Gpu(0)) == "Tesla T4"
    assert nvml.call("nvmlDeviceGetNumaNodeId", Gpu(0)) is None
    assert seen == ["nvmlInit", "nvmlDeviceGetName", "nvmlDeviceGetNumaNodeId"]


def test_missing_function_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    nvml = Nvml(FakeNvmlBackend(_recording({"nvmlDeviceGetFoo(gpu0)": {"error": "FUNCTION_NOT_FOUND"}})))
    with caplog.at_level(logging.INFO, logger="collbench.topology.nvml"):
        assert nvml.call("nvmlDeviceGetFoo", Gpu(0)) is None
        assert nvml.call("nvmlDeviceGetFoo", Gpu(0)) is None
        assert nvml.call("nvmlDeviceGetBar", Gpu(1)) is None  # not in the recording: same answer
    messages = [r.getMessage() for r in caplog.records if "is not available" in r.getMessage()]
    assert messages == [
        "NVML function nvmlDeviceGetFoo is not available here; its facts are left out",
        "NVML function nvmlDeviceGetBar is not available here; its facts are left out",
    ]


def test_other_errors_pass_through_unless_named() -> None:
    import pynvml

    nvml = Nvml(FakeNvmlBackend(_recording({"nvmlDeviceGetNvLinkState(gpu0, 4)": {"error": "INVALID_ARGUMENT"}})))
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.call("nvmlDeviceGetNvLinkState", Gpu(0), 4)
    assert nvml.call("nvmlDeviceGetNvLinkState", Gpu(0), 4, none_on=frozenset({"INVALID_ARGUMENT"})) is None


def test_library_missing_falls_back_to_the_host(tmp_path: Path) -> None:
    path = tmp_path / "nolib.json"
    Recording(host="x", calls={"nvmlInit()": {"error": "LIBRARY_NOT_FOUND"}}).save(path)
    with pytest.raises(NvmlUnavailableError, match="NVML library not found"):
        Nvml(FakeNvmlBackend(Recording.load(path))).init()
    topo = discover_topology(nvml_replay=path, ranks=3)
    assert topo.source == "host"
    assert [d.id for d in topo.devices] == ["CPU0", "CPU1", "CPU2"]
    assert topo.note == "NVML library not found (libnvidia-ml.so.1): describing the host and its CPU ranks"


def test_no_gpu_counted_falls_back_to_the_host(tmp_path: Path) -> None:
    path = tmp_path / "zero.json"
    Recording(host="x", calls={"nvmlDeviceGetCount()": {"value": 0}}).save(path)
    topo = discover_topology(nvml_replay=path)
    assert topo.source == "host" and topo.note is not None and topo.note.startswith("NVML found no GPU")
    assert len(topo.cpus) >= 2


def test_old_driver_without_remote_type_resolves_peers_by_bus_id() -> None:
    rec = Recording.load(RECORDINGS / "dgx1-v100.json")
    calls = {k: v for k, v in rec.calls.items() if not k.startswith("nvmlDeviceGetNvLinkRemoteDeviceType")}
    topo = topology_from_nvml(Nvml(FakeNvmlBackend(Recording(host="h", calls=calls))), "h")
    assert _kind(topo, 0, 3) == (LinkKind.NVLINK, 2, 50.0)
    assert _kind(topo, 0, 5)[0] == LinkKind.SYS


def test_bad_recordings(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="no such file"):
        Recording.load(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(InputFileError, match="not an NVML recording"):
        Recording.load(bad)
    bad.write_text("{")
    with pytest.raises(InputFileError, match=r"bad.json:1: not JSON"):
        Recording.load(bad)


def test_call_keys_and_masks() -> None:
    assert call_key("nvmlDeviceGetNvLinkState", (Gpu(2), 7)) == "nvmlDeviceGetNvLinkState(gpu2, 7)"
    assert mask_to_ids([0b1011, 1]) == (0, 1, 3, 64)
    assert mask_to_ids([0, 0]) is None


def test_real_pynvml_structures_and_arrays_encode() -> None:
    import ctypes

    import pynvml

    from collbench.topology.nvml import decode_value, encode_value

    pci = pynvml.nvmlPciInfo_t()
    pci.busId = b"00000000:07:00.0"
    pci.domain = 0
    encoded = encode_value(pci)
    # nvidia-ml-py decodes char arrays itself (str); older versions give bytes: both replay the same.
    assert encoded["__struct__"]["busId"] in ("00000000:07:00.0", {"__bytes__": "00000000:07:00.0"})
    assert normalize_bus_id(decode_value(json.loads(json.dumps(encoded))).busId) == "0000:07:00.0"
    mask = (ctypes.c_ulonglong * 2)(5, 1)  # what nvmlDeviceGetCpuAffinity returns
    assert encode_value(mask) == [5, 1]
    assert mask_to_ids(decode_value(encode_value(mask))) == (0, 2, 64)
