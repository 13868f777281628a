"""``collbench tune`` under a launcher: each rank started as torchrun starts it (RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT: torch/distributed/run.py), every rank its own
process running the CLI. The full tune (not ``--quick``) takes every step on every rank: its second
segment-size sweeps and its extra rounds are decided alike everywhere, the layout planned on
``--topology`` is used and recorded, and ranks that part are named in one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from launcher_env import torchrun_job

from collbench.profile.document import Profile
from collbench.results.io import read_jsonl
from collbench.runtime.probe import PairMeasure, measured_topology
from collbench.topology.io import save_topology

pytestmark = pytest.mark.dist

JOB_S = 240.0
SLOW_PAIRS = {(1, 2), (0, 3)}
"""Pairs the saved topology says are slow: the layout's ring avoids them (rank order uses them)."""


def _job(
    n: int, argv_of: list[list[str]] | list[str], cwd: Path | list[Path]
) -> list[subprocess.CompletedProcess[str]]:
    """Run the CLI as ranks 0..n-1 of one torchrun-style job (``argv_of``: one argv, or one per rank;
    ``cwd``: one folder, or one per rank)."""
    per_rank = argv_of if argv_of and isinstance(argv_of[0], list) else [argv_of] * n
    cli = [["-m", "collbench.cli.app", *argv] for argv in per_rank]
    return torchrun_job(n, cli, cwd, timeout_s=JOB_S)


def _topology(n: int, path: Path) -> None:
    """A measured topology of ``n`` CPU ranks on one host whose pairs in SLOW_PAIRS are 6x slower."""
    measures = [
        PairMeasure(a, b, 50.0, 0.05 if tuple(sorted((a, b))) in SLOW_PAIRS else 0.3)
        for a in range(n)
        for b in range(n)
        if a != b
    ]
    save_topology(measured_topology(["host"] * n, measures, gpus=False), path)


@pytest.mark.parametrize("n", [3, 4])
def test_a_full_tune_under_a_launcher_takes_every_step_on_every_rank(tmp_path: Path, n: int) -> None:
    _topology(n, tmp_path / "measured.yaml")
    tune = ["tune", "--backend", "gloo", "-b", "512K", "-e", "1M", "--timeout", "60", "-O", "p.yaml"]
    done = _job(n, [*tune, "--topology", "measured.yaml"], tmp_path)
    for rank, proc in enumerate(done):
        assert proc.returncode == 0, f"rank {rank}: {proc.stdout}{proc.stderr}"
    assert "profile:" in done[0].stdout
    assert all(proc.stdout == "" for proc in done[1:])  # rank 0 alone reports

    rows = list(read_jsonl(tmp_path / "p-results.jsonl"))
    assert rows and all(r.wrong == 0 and r.world_size == n for r in rows)
    assert {r.size_bytes for r in rows} == {512 << 10, 1 << 20}
    # Every fixed round ran on every rank, and so did each round's second segment-size sweep (rank 0
    # alone decided it, from its rows, before): a sweep some rank skipped would never have finished.
    assert {r.tune_round for r in rows} >= {0, 1, 2}
    second = {r.tune_round for r in rows if r.segment_bytes == 256 << 10}
    assert second == {0, 1, 2}
    # The layout planned on --topology for the launcher's world: the rows and the profile name it.
    own = [r for r in rows if r.algo != "native"]
    layouts = {r.layout for r in own}
    assert len(layouts) == 1 and layouts != {"rank-order"}
    profile = Profile.load(tmp_path / "p.yaml")
    assert profile.world_size == n and profile.rules
    assert profile.layout is not None and profile.layout.name in layouts
    if n == 4:  # the layout's rings avoid the pairs the topology says are slow; rank order uses both
        for ring in profile.layout.rings:
            pairs = {tuple(sorted((ring[i], ring[(i + 1) % n]))) for i in range(n)}
            assert not pairs & SLOW_PAIRS, ring
    assert profile.nodes == 1  # LOCAL_WORLD_SIZE says every rank is on this node


def test_ranks_that_take_different_steps_are_named_in_one_line(tmp_path: Path) -> None:
    # Given different sizes, rank 0 reaches the second segment size's threshold (1 MiB) and ranks 1 and
    # 2 do not: rank 0's second step is that sweep, theirs round 1. They meet there and see they differ.
    tune = ["tune", "--backend", "gloo", "-b", "256K", "--timeout", "60", "-O", "p.yaml"]
    done = _job(3, [[*tune, "-e", "1M"], [*tune, "-e", "512K"], [*tune, "-e", "512K"]], tmp_path)
    assert all(proc.returncode == 3 for proc in done), [p.stderr for p in done]
    for proc in done:
        (line,) = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
        assert line.startswith("error: rank 1 on ") and "failed while starting step 2 (round 1): " in line
        # What was measured before is kept, as after any failure (tune --resume).
        assert (
            "rank 0 is starting step 2 (round 0 at the second segment size): the ranks took different steps; " in line
        )
        assert "Traceback" not in proc.stderr and "Timed out" not in proc.stderr


def test_rank_0s_files_decide_for_every_rank_and_its_refusal_reaches_them_at_once(tmp_path: Path) -> None:
    # Ranks on hosts of their own (a folder each): only rank 0 writes, so only its files are checked,
    # and the others hear its verdict instead of waiting in a rendezvous it never joins.
    folders = [tmp_path / f"rank{rank}" for rank in range(2)]
    for folder in folders:
        folder.mkdir()
    (folders[0] / "p.yaml").mkdir()  # rank 0 cannot write its profile there
    tune = ["tune", "--quick", "--backend", "gloo", "--timeout", "60", "-O", "p.yaml"]
    done = _job(2, tune, folders)
    assert [proc.returncode for proc in done] == [2, 2], [p.stderr for p in done]
    assert "error: -O/--output p.yaml is a directory; give a file name" in done[0].stderr
    assert "error: rank 0: -O/--output p.yaml is a directory; give a file name" in done[1].stderr
