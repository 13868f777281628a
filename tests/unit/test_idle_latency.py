"""collbench keeps idle CPUs polling while it measures, through Linux's CPU latency QoS file.

The contract (the kernel's admin guide, pm/cpuidle.rst, "Power Management Quality of Service for
CPUs"): a process writes a 32-bit latency to /dev/cpu_dma_latency and holds the file open; the request
lasts until it is closed. A regular file stands in for the device here; what is checked is what
collbench writes, that it keeps the file open for the block only, and what it says.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from collbench.runtime.host.idle_latency import ENV, idle_cpus_poll


def _open_fds_to(path: Path) -> int:
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if os.path.realpath(fd) == str(path.resolve()))


def test_writes_a_zero_latency_and_holds_it_for_the_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    device = tmp_path / "cpu_dma_latency"
    device.write_bytes(b"")
    with idle_cpus_poll(device) as said:
        assert struct.unpack("=i", device.read_bytes()) == (0,)
        assert _open_fds_to(device) == 1
        assert "poll" in said and str(device) in said
    assert _open_fds_to(device) == 0


def test_switched_off_it_touches_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "0")
    device = tmp_path / "cpu_dma_latency"
    device.write_bytes(b"")
    with idle_cpus_poll(device) as said:
        assert said == "" and device.read_bytes() == b""


def test_without_the_file_it_is_silent_and_without_permission_it_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with idle_cpus_poll(tmp_path / "absent") as said:
        assert said == ""
    # A directory cannot be opened for writing: the same OSError path as a permission refusal.
    with idle_cpus_poll(tmp_path) as said:
        assert said.startswith("idle CPUs may sleep during the run") and ENV in said
        assert "\n" not in said


def test_a_symlink_planted_in_its_place_is_not_followed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    link = tmp_path / "cpu_dma_latency"
    link.symlink_to(victim)
    with idle_cpus_poll(link) as said:
        assert said.startswith("idle CPUs may sleep")
    assert victim.read_bytes() == b"keep"


def test_the_stall_summary_says_when_idle_cpus_could_sleep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from collbench.runtime.host.idle_latency import unheld_hint

    monkeypatch.delenv(ENV, raising=False)
    device = tmp_path / "cpu_dma_latency"
    device.write_bytes(b"")
    device.chmod(0o444)
    if os.access(device, os.W_OK):  # root writes through file modes: a directory stands in instead
        device = tmp_path
        monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert "no write permission" in unheld_hint(device) and "\n" not in unheld_hint(device)
    assert unheld_hint(tmp_path / "absent") == ""
    monkeypatch.setenv(ENV, "0")
    assert unheld_hint(device) == ""
