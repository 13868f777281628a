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

from collbench.errors import ConfigError, RankZeroEndedError
from collbench.runtime.launch.rendezvous import (
    interface_address,
    publish,
    publish_ended,
    published_address,
    read_published,
    store_answers,
    under_hydra,
    withdraw,
)


def test_published_address_is_read_back_and_withdrawn(tmp_path: Path) -> None:
    path = tmp_path / ".collbench-store-c-7-0-0.json"
    publish(path, "gpu12", 41234)
    assert read_published(path, 1.0, rank=3) == ("gpu12", 41234)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left beside it
    withdraw(path)
    assert not path.exists()


def test_a_task_0_that_ended_before_its_store_ends_the_waiting_tasks_at_once(tmp_path: Path) -> None:
    # srun leaves the other tasks running when task 0 fails (a stream it refused): they waited out the
    # whole timeout, then blamed a directory not shared between the nodes.
    path = tmp_path / ".collbench-store-c-7-0-0.json"
    publish_ended(path)
    with pytest.raises(RankZeroEndedError) as caught:
        read_published(path, 3600.0, rank=1)
    assert str(caught.value) == "srun task 1: task 0 ended before the job's store started (its own error says why)"
    assert caught.value.same_on_every_rank  # task 0 said its own error: the others end silent
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left beside it


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


def _listening() -> socket.socket:
    """A socket listening on the loopback, as rank 0's store does once it has published."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    return listener


def _gone_port() -> int:
    """A loopback port whose listener has closed, as a killed rank 0's store has: connections are refused."""
    with _listening() as listener:
        return int(listener.getsockname()[1])


def test_a_file_whose_store_is_gone_is_waited_past_until_rank_0_replaces_it(tmp_path: Path) -> None:
    # Hydra names a job by mpiexec's --control-port and --pgid: a rank 0 killed with SIGKILL (no exit
    # handler withdraws its file) leaves one a later job on the same port finds before its rank 0
    # publishes. Its store died with it: that file is not taken, however recently it was written (a
    # job killed 2 s before the next started was taken by a 10 s margin on the proxies' start times).
    path = tmp_path / ".collbench-store-mpirun-x.json"
    path.write_text(json.dumps({"addr": "127.0.0.1", "port": _gone_port(), "pid": 1}))
    with pytest.raises(ConfigError) as caught:
        read_published(path, 0.3, rank=2, launcher="mpirun", check_live=True)
    text = str(caught.value)
    assert "\n" not in text and "names a store no one listens on (127.0.0.1:" in text
    assert text.endswith("an earlier job's (remove it)")
    # Without the check (srun, Open MPI: file names no later job shares) it is read as it stands.
    assert read_published(path, 0.3, rank=2, launcher="mpirun")[0] == "127.0.0.1"
    # Rank 0 publishes over it (replacing it whole) once its store listens: the reader takes that.
    with _listening() as store:
        port = int(store.getsockname()[1])
        later = threading.Timer(0.3, publish, (path, "127.0.0.1", port, "mpirun"))
        later.start()
        try:
            assert read_published(path, 30.0, rank=2, launcher="mpirun", check_live=True) == ("127.0.0.1", port)
        finally:
            later.join()
            withdraw(path)


def test_a_live_stores_file_is_taken_whenever_it_was_written(tmp_path: Path) -> None:
    # No clock is compared: a file an hour old whose store answers is this job's (its rank 0 is up).
    path = tmp_path / "store.json"
    with _listening() as store:
        port = int(store.getsockname()[1])
        path.write_text(json.dumps({"addr": "127.0.0.1", "port": port, "pid": 1}))
        old = time.time() - 3600
        os.utime(path, (old, old))
        assert read_published(path, 0.3, rank=1, check_live=True) == ("127.0.0.1", port)


def test_a_store_that_does_not_answer_is_named_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "store.json"
    path.write_text(json.dumps({"addr": "127.0.0.1", "port": _gone_port(), "pid": 1}))
    assert store_answers("127.0.0.1", _gone_port(), 0.5) is False
    with _listening() as store:
        assert store_answers("127.0.0.1", int(store.getsockname()[1]), 0.5) is True
    # A name that resolves nowhere (RFC 6761 reserves .invalid) gets no answer, not an exception.
    assert store_answers("rank0.invalid", 1, 0.5) is None


def test_a_rank_under_a_hydra_proxy_is_told_apart(tmp_path: Path) -> None:
    assert not under_hydra()  # pytest runs under no Hydra proxy
    # A stand-in proxy (argv[0] hydra_pmi_proxy, as in test_launchers) starts a shell that starts the
    # rank: the rank finds the proxy above it and checks that the store it reads of is live.
    code = "from collbench.runtime.launch.rendezvous import under_hydra; print(under_hydra())"
    rank = '"$PYTHON" -c "$CODE"; true'
    env = {**os.environ, "PYTHON": sys.executable, "CODE": code}
    done = subprocess.run(
        ["bash", "-c", 'exec -a hydra_pmi_proxy sh -c "$0" "$@"', f"sh -c '{rank}'; true", "--control-port", "vm:1"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"]


def test_under_hydra_only_an_end_under_the_readers_own_proxy_is_its_jobs(tmp_path: Path) -> None:
    """Hydra, as srun, leaves the other ranks running when rank 0 exits with an error ('mpiexec.mpich -n
    2 collbench sweep' where collbench-sweep.jsonl held rows: rank 1 waited 60 s, then blamed the
    directory). Rank 0 records its proxy with its end, since a later job of the same control port
    reads the same file name: a record of another proxy is an earlier job's, waited past."""
    path = tmp_path / ".collbench-store-mpirun-x.json"
    code = (
        "import json, os, sys\n"
        "from collbench.errors import ConfigError, RankZeroEndedError\n"
        "from collbench.runtime.launch.rendezvous import hydra_proxy_pid, publish_ended, read_published\n"
        "path = sys.argv[1]\n"
        "for proxy, said in ((hydra_proxy_pid(), 'ended'), (1, 'waited')):\n"
        "    publish_ended(__import__('pathlib').Path(path), proxy)\n"
        "    try:\n"
        "        read_published(__import__('pathlib').Path(path), 1.0, rank=1, launcher='mpirun', check_live=True)\n"
        "    except RankZeroEndedError:\n"
        "        print('ended' == said)\n"
        "    except ConfigError as exc:\n"
        "        print('waited' == said and 'published no store address' in str(exc))\n"
    )
    rank = '"$PYTHON" -c "$CODE" "$FILE"; true'
    env = {**os.environ, "PYTHON": sys.executable, "CODE": code, "FILE": str(path)}
    done = subprocess.run(
        ["bash", "-c", 'exec -a hydra_pmi_proxy sh -c "$0" "$@"', f"sh -c '{rank}'; true", "--control-port", "vm:1"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"], done.stdout + done.stderr
    assert json.loads(path.read_text())["proxy"] == 1
