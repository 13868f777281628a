"""Task 0 of an srun step publishes its store's address in a file; the other tasks read it there, or
stop in one line saying where they looked and what to set."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from collbench.errors import ConfigError
from collbench.runtime.launch.rendezvous import (
    interface_address,
    publish,
    published_address,
    read_published,
    withdraw,
)


def test_published_address_is_read_back_and_withdrawn(tmp_path: Path) -> None:
    path = tmp_path / ".collbench-store-c-7-0-0.json"
    publish(path, "gpu12", 41234)
    assert read_published(path, 1.0, rank=3) == ("gpu12", 41234)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left beside it
    withdraw(path)
    assert not path.exists()


def test_a_file_that_never_comes_is_one_line_naming_the_directory_to_share(tmp_path: Path) -> None:
    path = tmp_path / "absent.json"
    with pytest.raises(ConfigError) as caught:
        read_published(path, 0.2, rank=1)
    text = str(caught.value)
    assert "\n" not in text and str(path) in text and "COLLBENCH_RENDEZVOUS_DIR" in text


@pytest.mark.parametrize("content", ["", "{", '{"addr": "h"}', '{"addr": "", "port": 5}', '{"addr": "h", "port": 0}'])
def test_a_file_task_0_did_not_write_is_refused(tmp_path: Path, content: str) -> None:
    path = tmp_path / "store.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=r"store\.json"):
        read_published(path, 1.0, rank=1)


def test_a_directory_task_0_cannot_write_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot publish .*COLLBENCH_RENDEZVOUS_DIR"):
        publish(tmp_path / "missing-dir" / "store.json", "h", 5)


def test_task_0_publishes_the_address_of_the_interface_named_for_the_jobs_traffic() -> None:
    # netdevice(7) SIOCGIFADDR: the loopback holds 127.0.0.1 on every Linux host.
    assert interface_address("lo") == "127.0.0.1"
    assert interface_address("no-such-if0") is None
    assert published_address({"GLOO_SOCKET_IFNAME": "lo"}) == "127.0.0.1"
    assert published_address({"NCCL_SOCKET_IFNAME": "=lo"}) == "127.0.0.1"
    # NCCL's prefix and exclusion forms name no one interface; nothing named: the host name.
    for env in ({"NCCL_SOCKET_IFNAME": "lo"}, {"NCCL_SOCKET_IFNAME": "^docker"}, {}, {"GLOO_SOCKET_IFNAME": "nope0"}):
        assert published_address(env) == socket.gethostname()
