"""The note on hierarchical skipped for want of nodes says which is short: under a launcher whose ranks
run on 2 nodes (the membership says so), with no --topology, it said 'needs ranks on two or more nodes,
and the layout has 1', as if the job were on one node; the layout was made from one host's description."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from collbench.runtime.sweep import worker
from collbench.runtime.sweep.plan import SweepConfig, SweepJob, validate
from collbench.runtime.sweep.points import plan_points

CPU = torch.device("cpu")


def _job(tmp_path: Path) -> SweepJob:
    return validate(
        SweepConfig(
            world_size=4,
            backend="gloo",
            algos=("hierarchical", "ring"),
            min_bytes=1024,
            max_bytes=1024,
            in_place=(False,),
            stream=tmp_path / "s.jsonl",
        )
    )


def _skipped(notes: list[str]) -> list[str]:
    return [n for n in notes if n.startswith("hierarchical all-reduce")]


def test_ranks_on_several_nodes_and_a_one_node_layout_says_so(tmp_path: Path) -> None:
    points, notes = plan_points(_job(tmp_path), 4, CPU, "rank-order", nodes=1, job_nodes=2)
    assert {p.algo for p in points} == {"ring"}
    (note,) = _skipped(notes)
    assert "the job's ranks run on 2 nodes" in note
    assert "layout (rank-order) was made from one host's description" in note
    assert "--topology from `collbench discover --probe`" in note
    assert "the layout has 1" not in note


def test_ranks_on_one_node_keep_the_one_node_wording(tmp_path: Path) -> None:
    for job_nodes in (None, 1):
        _, notes = plan_points(_job(tmp_path), 4, CPU, "rank-order", nodes=1, job_nodes=job_nodes)
        (note,) = _skipped(notes)
        assert "needs ranks on two or more nodes, and the layout has 1" in note


def test_rank_0s_plan_counts_the_job_nodes_the_membership_found(tmp_path: Path) -> None:
    # RankContext.nodes: set under a launcher from the job's membership (launch/ranks.py), once.
    ctx: Any = SimpleNamespace(rank=0, world_size=4, device=CPU, nodes=2)
    points, _, notes, _, _ = worker._plan(ctx, _job(tmp_path))
    assert {p.algo for p in points} == {"ring"}
    (note,) = _skipped(notes)
    assert "the job's ranks run on 2 nodes" in note
