"""Stopping `collbench sweep` (SIGTERM, SIGINT) stops its ranks too, and keeps what was streamed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collbench.results.io import read_jsonl
from collbench.runtime.sweep.faults import FAULT_ENV

pytestmark = pytest.mark.dist

DEADLINE_S = 60.0
"""Generous bounds on a loaded machine: the assertions are about what happens, not how fast."""
GONE_S = 10.0


def _children(pid: int) -> set[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the command name, which is in parentheses and may hold spaces: state, ppid, ...
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


def _wait_for(condition: object, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if callable(condition) and condition():
            return True
        time.sleep(0.05)
    return False


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc (Linux)")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_killing_the_sweep_stops_its_ranks_and_keeps_the_rows(tmp_path: Path, signum: int) -> None:
    stream = tmp_path / "stream.jsonl"
    args = [sys.executable, "-m", "collbench.cli.app", "sweep", "--ranks", "2", "--backend", "gloo"]
    args += ["--op", "all-reduce", "--algo", "ring", "-b", "4", "-e", "4K", "-f", "4", "-n", "3"]
    args += ["-w", "0", "--out-of-place", "--timeout", "120", "--stream", str(stream), "--format", "json"]
    # Rank 1 stops at the third point (sleeping, off the store) and rank 0 waits for it in a collective:
    # neither would notice its launcher's death for a long time, unless the launcher takes them along.
    env = dict(os.environ, OMP_NUM_THREADS="1", **{FAULT_ENV: "rank=1,point=2,mode=hang"})
    parent = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        assert _wait_for(lambda: len(_lines(stream)) >= 2 or parent.poll() is not None, DEADLINE_S)
        time.sleep(0.5)  # both ranks are now in the third point
        assert parent.poll() is None, f"the sweep ended before it was stopped: {parent.communicate()}"
        ranks = _children(parent.pid)
        assert len(ranks) >= 2, ranks  # two ranks (and multiprocessing's resource tracker)
        parent.send_signal(signum)
        _, err = parent.communicate(timeout=DEADLINE_S)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    assert parent.returncode == 128 + signum, err  # 143 for SIGTERM, 130 for SIGINT
    assert "interrupted" in err
    assert _wait_for(lambda: not any(_alive(pid) for pid in ranks), GONE_S), [p for p in ranks if _alive(p)]
    # Every line streamed is a whole row, in plan order, and the rows seen before the signal are there.
    lines = _lines(stream)
    assert len(lines) == 2
    for line in lines:
        json.loads(line)
    rows = list(read_jsonl(stream))
    assert len(rows) == len(lines)
    assert all(r.wrong == 0 and r.world_size == 2 for r in rows)
    assert [r.size_bytes for r in rows] == [4, 16]


def _ranks_sigint(pid: int) -> dict[int, bool]:
    """For each of ``pid``'s rank processes (multiprocessing's spawned children, not its tracker):
    whether SIGINT is blocked or ignored in it now (proc(5): the SigBlk and SigIgn masks, bit signum-1)."""
    bit = 1 << (int(signal.SIGINT) - 1)
    found: dict[int, bool] = {}
    for child in _children(pid):
        try:
            cmdline = (Path("/proc") / str(child) / "cmdline").read_bytes()
            status = (Path("/proc") / str(child) / "status").read_text()
        except OSError:
            continue
        if b"spawn_main" not in cmdline:
            continue
        masks = dict(line.split(":\t", 1) for line in status.splitlines() if line.startswith(("SigBlk", "SigIgn")))
        found[child] = bool((int(masks["SigBlk"], 16) | int(masks["SigIgn"], 16)) & bit)
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc (Linux)")
def test_ctrl_c_at_a_terminal_says_one_line(tmp_path: Path) -> None:
    """Ctrl-C at a terminal signals the whole foreground process group, the ranks too. One that came
    while a rank imported torch (seconds at load 10, before any of collbench's code ran in it) printed
    multiprocessing's traceback above the sweep's line, where the rank printed before its launcher
    stopped it. The ranks never take SIGINT now, from their first instruction (blocked by the launcher
    as it starts them, then ignored), so the launcher alone answers: one line, 130, ranks gone, rows kept.
    """
    stream = tmp_path / "stream.jsonl"
    args = [sys.executable, "-m", "collbench.cli.app", "sweep", "--ranks", "2", "--backend", "gloo"]
    args += ["--op", "all-reduce", "--algo", "ring", "-b", "4", "-e", "4K", "-f", "4", "-n", "3"]
    args += ["-w", "0", "--out-of-place", "--timeout", "120", "--stream", str(stream), "--format", "json"]
    # Rank 1 stops at the third point, so that the signal finds two rows streamed and a third under way.
    env = dict(os.environ, OMP_NUM_THREADS="1", **{FAULT_ENV: "rank=1,point=2,mode=hang"})
    env.pop("COLUMNS", None)  # a pipe with no width said: one line (with one, wrapped at words as a note is)
    parent = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True, start_new_session=True
    )
    samples: list[dict[int, bool]] = []
    try:
        # From the ranks' start (torch's import among it) to the rows: SIGINT is never theirs to take.
        def sampled() -> bool:
            samples.append(_ranks_sigint(parent.pid))
            return len(_lines(stream)) >= 2 or parent.poll() is not None

        assert _wait_for(sampled, DEADLINE_S)
        assert parent.poll() is None, f"the sweep ended before it was stopped: {parent.communicate()}"
        ranks = _children(parent.pid)
        os.killpg(parent.pid, signal.SIGINT)
        _, err = parent.communicate(timeout=DEADLINE_S)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    seen = {pid for sample in samples for pid in sample}
    assert len(seen) == 2, samples
    assert all(all(sample.values()) for sample in samples), [s for s in samples if not all(s.values())]
    assert parent.returncode == 130, err
    # One line, however long its path (a log's 80 columns cut it in two).
    said = (
        f"interrupted: the 2 rows measured so far are in {stream}; the same command with --resume continues from them"
    )
    assert err.splitlines() == [said], err
    assert len(_lines(stream)) == 2
    assert _wait_for(lambda: not any(_alive(pid) for pid in ranks), GONE_S), [p for p in ranks if _alive(p)]
