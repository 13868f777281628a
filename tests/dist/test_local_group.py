"""Local ranks run every step of a command on one set of processes and one process group
(``runtime/launch/pool.py``): started by the first step inside ``local_group``, reused by the steps
after, stopped once on leaving; a step that fails is still one error naming the rank and what it was
doing, and the step after it starts new ranks. ``tune --ranks N`` and ``tune --check`` start their
ranks once."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import RankError
from collbench.runtime.launch import pool
from collbench.runtime.launch.pool import local_group
from collbench.runtime.launch.ranks import RankContext, launch

pytestmark = pytest.mark.dist

TIMEOUT_S = 30.0


def _step(ctx: RankContext, fail_on: int | None) -> list[Any]:
    """A collective on the group the step was given, and which process and group ran it."""
    if ctx.rank == fail_on:
        ctx.doing("failing on purpose")
        raise RuntimeError("injected")
    total = torch.ones(1)
    dist.all_reduce(total)
    # The default group's own object: one group for every step means the same object every step.
    return [os.getpid(), int(total.item()), id(dist.group.WORLD)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone too (reaped by its parent only when it joins): read its state.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def test_steps_inside_a_local_group_share_its_ranks_and_their_group_then_the_ranks_stop() -> None:
    steps = []
    with local_group(3, "gloo", TIMEOUT_S):
        for _ in range(3):
            steps.append(launch(3, _step, None, backend="gloo", timeout_s=TIMEOUT_S))
    for results in steps:
        assert [total for _, total, _ in results] == [3, 3, 3]
    # The same three processes, each on the same default group, ran all three steps.
    assert [[pid for pid, _, _ in r] for r in steps[1:]] == [[pid for pid, _, _ in steps[0]]] * 2
    assert [[group for _, _, group in r] for r in steps[1:]] == [[group for _, _, group in steps[0]]] * 2
    assert len({pid for pid, _, _ in steps[0]}) == 3
    assert not any(_alive(pid) for pid, _, _ in steps[0])


def test_steps_outside_a_local_group_start_ranks_of_their_own() -> None:
    first = launch(2, _step, None, backend="gloo", timeout_s=TIMEOUT_S)
    second = launch(2, _step, None, backend="gloo", timeout_s=TIMEOUT_S)
    assert not {pid for pid, _, _ in first} & {pid for pid, _, _ in second}
    assert not any(_alive(pid) for pid, _, _ in first + second)


def test_a_step_of_another_shape_runs_on_ranks_of_its_own_and_the_kept_ones_stay() -> None:
    with local_group(2, "gloo", TIMEOUT_S):
        kept = launch(2, _step, None, backend="gloo", timeout_s=TIMEOUT_S)
        other = launch(3, _step, None, backend="gloo", timeout_s=TIMEOUT_S)
        again = launch(2, _step, None, backend="gloo", timeout_s=TIMEOUT_S)
    assert [total for _, total, _ in other] == [3, 3, 3]
    assert [pid for pid, _, _ in again] == [pid for pid, _, _ in kept]
    assert not {pid for pid, _, _ in other} & {pid for pid, _, _ in kept}


def test_a_failed_step_names_the_rank_and_the_next_step_starts_new_ranks() -> None:
    with local_group(2, "gloo", TIMEOUT_S):
        first = launch(2, _step, None, backend="gloo", timeout_s=TIMEOUT_S)
        with pytest.raises(RankError) as info:
            launch(2, _step, 1, backend="gloo", timeout_s=TIMEOUT_S)
        after = launch(2, _step, None, backend="gloo", timeout_s=TIMEOUT_S)
    assert info.value.rank == 1
    assert info.value.doing == "failing on purpose"
    assert "injected" in info.value.problem and "\n" not in str(info.value)
    # The failed step's ranks were stopped; new ones ran the step after it.
    assert not any(_alive(pid) for pid, _, _ in first)
    assert [total for _, total, _ in after] == [2, 2]
    assert not {pid for pid, _, _ in after} & {pid for pid, _, _ in first}


def test_a_quick_tune_and_its_check_each_start_their_ranks_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[int] = []
    real = pool.LocalRanks.__init__

    def counted(self: pool.LocalRanks, *args: Any, **kwargs: Any) -> None:
        started.append(args[0])
        real(self, *args, **kwargs)

    monkeypatch.setattr(pool.LocalRanks, "__init__", counted)
    output = tmp_path / "p.yaml"
    args = ["tune", "--quick", "--ranks", "2", "--backend", "gloo", "-b", "1K", "-e", "4K", "-O", str(output)]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    # Every round (two fixed ones, and any tie round) ran on the ranks the first one started.
    rounds = {row["tune_round"] for row in map(_json, (tmp_path / "p-results.jsonl").read_text().splitlines())}
    assert len(rounds) >= 2
    assert started == [2]
    # tune --check measures each rule's size in a sweep of its own, round after round: one set of ranks too.
    started.clear()
    checked = CliRunner().invoke(app, ["tune", "--check", str(output), "--ranks", "2"])
    assert checked.exit_code == 0, checked.output
    assert "geometric-mean regret" in checked.output
    assert started == [2]


def _json(line: str) -> dict[str, Any]:
    import json

    value: dict[str, Any] = json.loads(line)
    return value
