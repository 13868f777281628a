"""Task 0 of an srun step publishes its store's address in a file; the other tasks read it there, or
stop in one line saying where they looked and what to set."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from collbench.errors import ConfigError
from collbench.runtime.launch.rendezvous import (
    STALE_MARGIN_S,
    interface_address,
    process_start_s,
    publish,
    published_address,
    published_since,
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


def test_a_file_an_earlier_job_left_is_waited_past_until_rank_0_replaces_it(tmp_path: Path) -> None:
    # Hydra names a job by mpiexec's --control-port and --pgid: a rank 0 killed with SIGKILL (no exit
    # handler withdraws its file) leaves one a later job on the same port finds before its rank 0
    # publishes. The later job's readers start after the earlier job's publish: they take no such file.
    path = tmp_path / ".collbench-store-mpirun-x.json"
    started_s = time.time()
    path.write_text(json.dumps({"addr": "old-host", "port": 40000, "pid": 1, "published_s": started_s - 3600}))
    with pytest.raises(ConfigError) as caught:
        read_published(path, 0.3, rank=2, launcher="mpirun", since_s=started_s)
    text = str(caught.value)
    assert "\n" not in text and "earlier job's (remove it)" in text and "old-host" not in text
    # Without a start time to compare (srun, Open MPI: file names no later job shares) it is read.
    assert read_published(path, 0.3, rank=2, launcher="mpirun") == ("old-host", 40000)
    # Rank 0 publishes over it (replacing it whole): the reader waiting past the old file gets the new.
    later = threading.Timer(0.3, publish, (path, "new-host", 41000, "mpirun"))
    later.start()
    try:
        assert read_published(path, 30.0, rank=2, launcher="mpirun", since_s=started_s) == ("new-host", 41000)
    finally:
        later.join()
        withdraw(path)


def test_a_file_without_a_recorded_time_is_judged_by_its_modification_time(tmp_path: Path) -> None:
    # Files an older collbench published record no time: their mtime says when.
    path = tmp_path / "store.json"
    path.write_text(json.dumps({"addr": "h", "port": 5, "pid": 1}))
    now = time.time()
    os.utime(path, (now - 3600, now - 3600))
    with pytest.raises(ConfigError, match="earlier job's"):
        read_published(path, 0.2, rank=1, since_s=now - 60)
    os.utime(path, (now, now))
    assert read_published(path, 0.2, rank=1, since_s=now - 60) == ("h", 5)


def test_a_rank_under_a_hydra_proxy_takes_files_from_the_proxys_start_on(tmp_path: Path) -> None:
    # proc(5): a process's starttime (ticks after boot) plus btime is when it started.
    mine = process_start_s(os.getpid())
    assert mine is not None and mine <= time.time()
    assert published_since() is None  # pytest runs under no Hydra proxy
    # A stand-in proxy (argv[0] hydra_pmi_proxy, as in test_launchers) starts a shell that starts the
    # rank; the rank's bound is the proxy's start less the margin, and the proxy is the rank's parent's
    # parent, so it started before the rank did.
    code = (
        "import os; from collbench.runtime.launch.rendezvous import published_since, process_start_s; "
        "print(published_since(), process_start_s(os.getpid()))"
    )
    rank = '"$PYTHON" -c "$CODE"; true'
    env = {**os.environ, "PYTHON": sys.executable, "CODE": code}
    done = subprocess.run(
        ["bash", "-c", 'exec -a hydra_pmi_proxy sh -c "$0" "$@"', f"sh -c '{rank}'; true", "--control-port", "vm:1"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    since_s, rank_start_s = (float(x) for x in done.stdout.split())
    assert since_s + STALE_MARGIN_S <= rank_start_s
    assert since_s + STALE_MARGIN_S >= mine  # the proxy started after this test's process
