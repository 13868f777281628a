"""A rank's failure names the stage it was at: joining, planning (rank 0) or waiting for that plan (the
others), or measuring one point; and a mistake in the user's input found inside a rank is the one
``error:`` line and exit 2 on every rank, as when it is found before the ranks start, not a rank
failure (exit 3). Faults are injected as the other fault tests inject them (runtime/sweep/faults.py).

Under a launcher the ranks run as torchrun starts them (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT:
torch/distributed/run.py), each its own ``collbench sweep`` process."""

from __future__ import annotations

from pathlib import Path

import pytest
from launcher_env import torchrun_job

from collbench.errors import ConfigError, RankError
from collbench.runtime.sweep.faults import FAULT_ENV
from collbench.runtime.sweep.plan import SweepConfig
from collbench.runtime.sweep.run import run_sweep

pytestmark = pytest.mark.dist

JOB_S = 120.0


def _config(tmp_path: Path, **changes: object) -> SweepConfig:
    fields: dict[str, object] = dict(
        world_size=2, backend="gloo", ops=("all-reduce",), algos=("ring",), min_bytes=8, max_bytes=1024,
        step_factor=8, iters=2, warmup=1, timeout_s=30, stream=tmp_path / "stream.jsonl",
    )  # fmt: skip
    fields.update(changes)
    return SweepConfig(**fields)  # type: ignore[arg-type]


def test_a_rank_that_fails_mid_sweep_names_the_point_not_joining(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FAULT_ENV, "rank=1,point=2,mode=raise")
    with pytest.raises(RankError) as info:
        run_sweep(_config(tmp_path))
    assert info.value.rank == 1
    # The third point: 8 B, 64 B, 512 B, out of place.
    assert info.value.doing == "measuring all-reduce ring 512 B out-of-place", info.value.doing
    assert "injected fault" in info.value.problem
    assert len((tmp_path / "stream.jsonl").read_text().splitlines()) == 2


def test_a_rank_that_fails_while_planning_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "rank=0,point=plan,mode=raise")
    with pytest.raises(RankError) as info:
        run_sweep(_config(tmp_path))
    assert (info.value.rank, info.value.doing) == (0, "planning the sweep")


def _job(tmp_path: Path, args: list[str], fault: str = "", n: int = 2) -> list[tuple[int, str]]:
    """Each rank's exit code and stderr, the ranks started as torchrun starts them."""
    injected = {FAULT_ENV: fault} if fault else {}
    argv = ["-m", "collbench.cli.app", "sweep", "--backend", "gloo", *args]
    done = torchrun_job(n, argv, tmp_path, timeout_s=JOB_S, drop=(FAULT_ENV, "COLUMNS"), **injected)
    return [(proc.returncode, proc.stderr) for proc in done]


def test_under_a_launcher_the_peer_of_a_rank_that_died_planning_says_it_waited_for_the_plan(tmp_path: Path) -> None:
    args = ["--op", "all-reduce", "--algo", "ring", "-b", "8", "-e", "64", "-O", "r.jsonl"]
    (code0, _), (code1, err1) = _job(tmp_path, args, fault="rank=0,point=plan,mode=exit")
    assert code0 == 17
    assert code1 == 3, err1
    # It was "rank 1 ... failed while joining step 0": it had joined, and waited for rank 0's plan.
    assert "rank 1 on " in err1 and " failed while waiting for rank 0's plan of the sweep: " in err1, err1
    assert "joining" not in err1


def test_under_a_launcher_a_mistake_rank_0_finds_is_each_rank_s_one_line_and_exit_2(tmp_path: Path) -> None:
    # All-gather of one float32 on 2 ranks: less than one element a rank, every point skipped.
    args = ["--op", "all-gather", "--algo", "native", "-b", "4", "-e", "4", "-O", "r.jsonl"]
    ranks = _job(tmp_path, args)
    for rank, (code, err) in enumerate(ranks):
        # Rank 1 was "rank 1 on HOST failed while joining step 0: ... Connection closed by peer", exit 3.
        assert code == 2, (rank, err)
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, (rank, err)
        assert lines[0].startswith("error: nothing to measure: every point was skipped (all-gather native 4 B"), err


def test_locally_a_mistake_rank_0_finds_is_one_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^nothing to measure: every point was skipped"):
        run_sweep(_config(tmp_path, ops=("all-gather",), algos=("native",), min_bytes=4, max_bytes=4))


def test_under_a_launcher_the_peer_of_a_rank_that_died_measuring_says_a_peer_is_gone(tmp_path: Path) -> None:
    args = ["--op", "all-reduce", "--algo", "ring", "-b", "8", "-e", "1024", "-n", "2", "-w", "1", "-O", "r.jsonl"]
    (code0, err0), (code1, _) = _job(tmp_path, args, fault="rank=1,point=2,mode=exit")
    assert code1 == 17
    assert code0 == 3, err0
    lines = [line for line in err0.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, err0
    # It was "... failed while measuring ...: RuntimeError: [/__w/pytorch/.../pair.cc:553] Connection closed by
    # peer [127.0.0.1]:19377. This is typically caused by a remote worker crashing. ... GLHF!" (torch 2.13).
    assert lines[0].startswith("error: rank 0 on "), err0
    assert " failed while measuring all-reduce ring " in lines[0], err0
    assert ": a peer rank is gone (gloo: " in lines[0] and "pair.cc" not in lines[0], err0
    assert "the 2 rows measured so far are in" in lines[0], err0
