"""The probe's clock on GPUs and its physical bound (collbench.runtime.probe), without a GPU.

Contracts faked here: with NCCL, ``dist.send``/``dist.recv`` return once the work is queued and
``Work.wait()`` only makes the current stream wait on NCCL's (torch's ProcessGroupNCCL,
``WorkNCCL::wait`` / ``synchronizeStream``); ``torch.cuda.Event(enable_timing=True).record()`` marks
the current stream and ``elapsed_time`` gives milliseconds between two completed events
(torch/cuda/streams.py). The fake device below runs queued transfers on its own clock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from collbench.errors import HardwareError
from collbench.runtime import probe
from collbench.runtime.probe import PairMeasure, check_physical, measured_topology
from collbench.topology.sources import discover_topology

RECORDINGS = Path(__file__).resolve().parents[1] / "fixtures" / "nvml"


class FakeDevice:
    """A GPU whose stream runs what was queued: a transfer of n bytes takes n / 25 GB/s of device time."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def transfer(self, nbytes: int) -> None:  # dist.send/recv: queued, the host returns at once
        self.now_s += nbytes / 25e9

    def event(self, enable_timing: bool = False) -> Any:
        device = self

        class Event:
            def record(self) -> None:
                self.at = device.now_s

            def synchronize(self) -> None:
                pass

            def elapsed_time(self, end: Any) -> float:
                return (end.at - self.at) * 1e3

        return Event()


def test_on_gpus_the_probe_times_the_device_not_the_queueing(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = FakeDevice()
    monkeypatch.setattr(torch.cuda, "Event", gpu.event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    clock = probe._Stopwatch(torch.device("cuda", 0))
    clock.start()
    gpu.transfer(64 << 20)  # the data
    gpu.transfer(4)  # the acknowledgement
    elapsed = clock.stop()
    assert elapsed == pytest.approx((64 << 20) / 25e9 + 4 / 25e9)
    # The host clock saw (almost) nothing of it: that is what the old probe divided by.
    host = probe._Stopwatch(torch.device("cpu"))
    host.start()
    gpu.transfer(64 << 20)
    assert host.stop() < elapsed / 10


def test_a_link_faster_than_any_link_is_refused_in_one_line() -> None:
    # What the queue-timed probe produced on GPUs: elapsed ~ 0, clamped to 1e-9 s.
    absurd = PairMeasure(src=0, dst=1, latency_us=0.5, bandwidth_gbps=6.7e7)
    with pytest.raises(HardwareError) as info:
        measured_topology(["h", "h"], [absurd], gpus=True)
    assert "\n" not in str(info.value)
    assert "6.7e+07 GB/s from rank 0 to rank 1, more than any link can carry (bound 1000 GB/s)" in str(info.value)


def test_a_link_faster_than_its_known_kind_is_refused() -> None:
    # Whatever NVML says GPU0-GPU2 of the recorded A6000 machine is, its nominal speed bounds the probe.
    base = discover_topology(nvml_replay=RECORDINGS / "pcie-a6000x8.json")
    link = base.rank_link(0, 2)
    assert link is not None
    fine = PairMeasure(0, 2, 5.0, link.bandwidth_gbps * 1.1)
    too_fast = PairMeasure(2, 0, 5.0, link.bandwidth_gbps * 2)
    topo = measured_topology(["h"] * 3, [fine], gpus=True, base=base)
    assert topo.rank_link(0, 2) is not None
    with pytest.raises(HardwareError, match=f"more than its link's nominal {link.bandwidth_gbps:g} GB/s"):
        measured_topology(["h"] * 3, [fine, too_fast], gpus=True, base=base)
    check_physical(PairMeasure(0, 1, 1.0, 900.0), None)  # NVLink 5 class: possible
