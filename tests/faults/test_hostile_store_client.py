"""A hostile local client of the rank store: it finds the launcher's port, lists the keys (any
client can: ``TCPStore.list_keys``), finds the run's prefix from torch's rendezvous keys, and
writes a pickle payload where the launcher reads a rank's result, or grows the keys the launcher
reads to hundreds of megabytes. Nothing is executed, nothing that large is read; the run ends with
one line naming the rejected value."""

from __future__ import annotations

import datetime
import pickle
import resource
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch.distributed as dist

from collbench.errors import RankError
from collbench.runtime.launch.ranks import RankContext, launch

pytestmark = pytest.mark.dist


class _Payload:
    """Unpickling this creates ``marker``: the proof that a pickle from the store was executed."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (Path.touch, (self.marker,))  # type: ignore[return-value]


def _victim(ctx: RankContext, tmp: str) -> str:
    """Rank 1 waits until the attacker struck, then leaves without sending its own result."""
    if ctx.rank == 1:
        ctx.doing("waiting for the attacker")
        deadline = time.monotonic() + 60
        while not (Path(tmp) / "struck").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        import os

        os._exit(0)
    return "fine"


def _listening_loopback_ports() -> set[int]:
    """Ports this process listens on at 127.0.0.1 (from /proc/net/tcp and its own descriptors)."""
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = fd.readlink().as_posix()
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, inode = fields[1], fields[3], fields[9]
        if state == "0A" and inode in inodes and local.startswith("0100007F:"):
            ports.add(int(local.split(":")[1], 16))
    return ports


def _run_prefix(client: dist.TCPStore) -> str | None:
    """The run's key prefix (``collbench/<16 hex>/``), as torch's rendezvous keys show it."""
    for key in client.list_keys():
        parts = key.split("/")
        if len(parts) > 2 and parts[0] == "collbench" and len(parts[1]) == 16:
            return f"collbench/{parts[1]}/"
    return None


def _attack(tmp: Path, marker: Path, found: dict[str, Any], before: set[int], grow_mib: int = 0) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for port in _listening_loopback_ports() - before:
            try:
                client = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=5))
                prefix = _run_prefix(client)
            except Exception:  # not the store, or not yet: try again
                continue
            if prefix is None:
                continue
            target = prefix + "result/1"
            payload = pickle.dumps(_Payload(str(marker)))
            client.set(target, payload)
            if grow_mib:
                # append takes 8 MiB a message, and any number of them: the keys the launcher reads
                # (today's queues and the keys of the launcher that read values whole) grow past
                # anything a rank writes.
                chunk = b"A" * (8 << 20)
                for _ in range(grow_mib // 8):
                    client.append(target, chunk)
                client.queue_push(target, chunk)  # the largest item the server passes
            client.queue_push(target, payload)
            client.set("collbench/result/1", payload)  # the key of the old, pickling launcher
            found["key"] = target
            (tmp / "struck").touch()
            return
        time.sleep(0.05)


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="finds the store's port in /proc/net/tcp (Linux)")
def test_a_pickle_written_to_the_result_key_is_not_executed_and_is_reported_in_one_line(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    found: dict[str, Any] = {}
    before = _listening_loopback_ports()
    attacker = threading.Thread(target=_attack, args=(tmp_path, marker, found, before), daemon=True)
    attacker.start()
    with pytest.raises(RankError) as caught:
        launch(2, _victim, str(tmp_path), backend="gloo", timeout_s=30)
    attacker.join(timeout=10)
    assert "key" in found, "the attacker never found the store"
    assert not marker.exists(), "a pickle from the store was executed"
    message = str(caught.value)
    assert "\n" not in message
    assert caught.value.rank == 1
    assert "rejected" in message and "not signed" in message, message


@pytest.mark.slow  # ranks for 20 s or more on 2 busy cores: CI runs it in its second step
@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="finds the store's port in /proc/net/tcp (Linux)")
def test_a_result_key_grown_to_hundreds_of_megabytes_is_never_read(tmp_path: Path) -> None:
    """The store's server keeps what the attacker writes (it runs in the launcher: torch has no
    limit), but the launcher must not read it: getting, splitting and signing a 800 MB value made
    it grow by several times the value."""
    grow_mib = 192
    found: dict[str, Any] = {}
    before = _listening_loopback_ports()
    attacker = threading.Thread(
        target=_attack, args=(tmp_path, tmp_path / "executed", found, before, grow_mib), daemon=True
    )
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    attacker.start()
    with pytest.raises(RankError) as caught:
        launch(2, _victim, str(tmp_path), backend="gloo", timeout_s=30)
    attacker.join(timeout=10)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - peak_before
    assert "key" in found, "the attacker never found the store"
    assert caught.value.rank == 1 and "rejected" in str(caught.value)
    print(f"peak RSS grew by {grown / 2**20:.0f} MiB for {grow_mib} MiB written")
    # The server's copy can be twice the value while it grows (a reallocation); a launcher that
    # reads the value adds the value again for each copy it makes (it grew by 4 times).
    bound = 2 * (grow_mib << 20) + (48 << 20)
    assert grown < bound, f"the launcher grew by {grown / 2**20:.0f} MiB for {grow_mib} MiB written"
