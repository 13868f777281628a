"""collbench's NVML calls against nvidia-ml-py's own API, and MIG as NVML reports it.

The recordings in tests/fixtures/nvml are synthesised from documented answers (make_recordings.py and
make_h100_single.py say what each follows); none was captured on a machine. So what a replay checks is
collbench against its own idea of NVML. This file checks that idea against the real library, the
installed nvidia-ml-py (``pynvml``, no driver needed):

- every call discovery makes exists there under that name and takes the arguments collbench passes
  (``inspect.signature(...).bind``), e.g. ``nvmlDeviceGetNvLinkRemotePciInfo(device, link)``, which
  nvidia-ml-py sends to the C function ``nvmlDeviceGetNvLinkRemotePciInfo_v2``;
- an error a recording names is raised as the class nvidia-ml-py raises for it: ``NVMLError(code)``
  returns the subclass of that code (``NVMLError_NotSupported`` for NVLink queries on a GPU without
  NVLink, ``NVMLError_FunctionNotFound`` where the driver lacks the function,
  ``_nvmlGetFunctionPointer``);
- ``nvmlDeviceGetMigMode(device)`` returns ``[current, pending]`` with ``NVML_DEVICE_MIG_ENABLE`` (1)
  for on, and raises NotSupported on GPUs without MIG.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from collbench.cli.render.topology import topology_summary
from collbench.topology.nvml import FakeNvmlBackend, Nvml, Recording, RecordingBackend, make_error
from collbench.topology.nvml_source import MIG_MODE_ENABLED, topology_from_nvml

pynvml = pytest.importorskip("pynvml")

RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"
NAMES = ["dgx-h100.json", "dgx1-v100.json", "pcie-a6000x8.json", "t4x4-vm.json", "h100-single.json"]


class _Calls:
    """Passes calls to a backend and keeps each name with the arguments pynvml would receive."""

    def __init__(self, inner: FakeNvmlBackend) -> None:
        self.inner = inner
        self.seen: list[tuple[str, tuple[Any, ...]]] = []

    def call(self, name: str, *args: Any) -> Any:
        self.seen.append((name, args))
        return self.inner.call(name, *args)


@pytest.mark.parametrize("name", NAMES)
def test_every_call_discovery_makes_is_nvidia_ml_pys_with_its_arguments(name: str) -> None:
    calls = _Calls(FakeNvmlBackend(Recording.load(RECORDINGS / name)))
    nvml = Nvml(calls)
    topology_from_nvml(nvml, "h")
    nvml.shutdown()
    assert calls.seen
    for fn_name, args in calls.seen:
        fn = getattr(pynvml, fn_name, None)
        assert callable(fn), f"nvidia-ml-py has no {fn_name}"
        # A Gpu stands for the handle PynvmlBackend passes in its place: one positional argument.
        inspect.signature(fn).bind(*args)


def test_errors_are_nvidia_ml_pys_classes() -> None:
    assert isinstance(make_error("NOT_SUPPORTED"), pynvml.NVMLError_NotSupported)
    assert isinstance(make_error("INVALID_ARGUMENT"), pynvml.NVMLError_InvalidArgument)
    assert isinstance(make_error("FUNCTION_NOT_FOUND"), pynvml.NVMLError_FunctionNotFound)
    assert isinstance(make_error("LIBRARY_NOT_FOUND"), pynvml.NVMLError_LibraryNotFound)
    assert MIG_MODE_ENABLED == pynvml.NVML_DEVICE_MIG_ENABLE


def test_the_recordings_hold_every_call_discovery_makes() -> None:
    # What a replay asks and the recording lacks answers FUNCTION_NOT_FOUND, which reads as "the driver
    # has no such function": a call added to discovery must be added to the recordings' generator.
    for name in NAMES:
        original = Recording.load(RECORDINGS / name)
        backend = RecordingBackend(FakeNvmlBackend(original), host=original.host)
        topology_from_nvml(Nvml(backend), original.host)
        assert set(backend.recording.calls) <= set(original.calls), name


def _with_mig(modes: dict[int, Any]) -> Recording:
    data = json.loads((RECORDINGS / "dgx-h100.json").read_text())
    for gpu, answer in modes.items():
        data["calls"][f"nvmlDeviceGetMigMode(gpu{gpu})"] = answer
    return Recording(host="dgx-h100", calls=data["calls"])


def test_mig_on_is_said_under_the_gpus() -> None:
    on, off = {"value": [1, 1]}, {"value": [0, 1]}  # current mode decides; pending waits for a reset
    topo = topology_from_nvml(Nvml(FakeNvmlBackend(_with_mig({0: on, 1: on, 2: off}))), "h")
    assert [d.id for d in topo.gpus if d.get("mig") == "on"] == ["GPU0", "GPU1"]
    lines = topology_summary(topo)
    at = next(i for i, line in enumerate(lines) if line.startswith("MIG:"))
    assert lines[at : at + 2] == [
        "MIG: on for GPU0, GPU1: CUDA and NCCL see MIG instances there,",
        "  with no peer-to-peer between them: the links above are the whole GPUs'",
    ]
    assert all(len(line) <= 80 for line in lines[at : at + 2])
    every = topology_from_nvml(Nvml(FakeNvmlBackend(_with_mig(dict.fromkeys(range(8), on)))), "h")
    assert "MIG: on for 8 GPUs: CUDA and NCCL see MIG instances there," in topology_summary(every)


def test_mig_off_not_supported_or_unknown_says_nothing() -> None:
    for modes in ({0: {"value": [0, 0]}}, {0: {"error": "NOT_SUPPORTED"}}, {0: {"error": "FUNCTION_NOT_FOUND"}}):
        topo = topology_from_nvml(Nvml(FakeNvmlBackend(_with_mig(modes))), "h")
        assert not [d for d in topo.gpus if d.get("mig")]
        assert not [line for line in topology_summary(topo) if line.startswith("MIG")]
    # The fingerprint (profiles and rows are keyed by it) does not move with MIG's answer.
    plain = topology_from_nvml(Nvml(FakeNvmlBackend(_with_mig({}))), "h")
    mig = topology_from_nvml(Nvml(FakeNvmlBackend(_with_mig({0: {"value": [1, 1]}}))), "h")
    assert plain.fingerprint == mig.fingerprint


def test_no_gpu_counted_gives_no_devices() -> None:
    empty = Recording(host="h", calls={"nvmlDeviceGetCount()": {"value": 0}})
    topo = topology_from_nvml(Nvml(FakeNvmlBackend(empty)), "h")
    assert topo.gpus == () and topo.links == ()
