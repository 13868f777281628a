"""The layout planned over nodes (layouts/nodes.py, what plan_layout gives past 2,048 ranks) under a launcher:
``collbench sweep --topology`` on 4 torchrun-style gloo ranks, the threshold lowered to 3 ranks in each rank
(``layouts.plan.MAX_LAYOUT_RANKS``, read when rank 0 plans), so that the path a 16,384-rank job takes runs
end to end here: rank 0 alone reads the topology (by pairs of hosts) and plans over nodes; the others get the
layout's shared part and derive their all-to-all partners by nodes (``Layout.derived_partners``, no table
handed out). Each rank's layout, as the sweep ran it, builds the steps the single-process plan gives that
rank, and every point's data is right."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from launcher_env import torchrun_job
from node_link_topologies import classed

from collbench.layouts import plan as plan_module
from collbench.layouts.nodes import plan_over_nodes
from collbench.results.io import read_jsonl
from collbench.schedules.ops import Op
from collbench.schedules.registry import get_algorithm
from collbench.topology.io import save_topology

pytestmark = pytest.mark.dist

N = 4
# Each rank: the threshold lowered, and the layout this rank's sweep ran on kept beside it (its folder).
RANK = """
import pickle
import sys

from collbench.layouts import plan
from collbench.runtime.sweep import worker

plan.MAX_LAYOUT_RANKS = 3
own = worker._own_layout


def kept(*args):
    layout = own(*args)
    with open("layout.pkl", "wb") as f:
        pickle.dump(layout, f)
    return layout


worker._own_layout = kept
from collbench.cli.app import main

sys.argv[0] = "collbench"
main()
"""
ALGOS = (("ring", Op.ALL_REDUCE), ("two-tree", Op.ALL_REDUCE), ("topo-pairwise", Op.ALL_TO_ALL))


def _steps(algo: str, op: Op, layout: object, rank: int) -> object:
    return get_algorithm(algo).build(op, N, 6 * N + 1, layout=layout, segments=2, rank=rank).steps[rank]


def test_a_sweep_past_the_threshold_runs_the_plan_over_nodes_on_every_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One rank a host, hosts 0-1 and 2-3 slow: the ring over nodes is 0 2 1 3, not rank order.
    topology = classed(N, 1, {(0, 1): 0.3, (2, 3): 0.3})
    whole = plan_over_nodes(topology).layout
    assert whole.rings == ((0, 2, 1, 3),) and whole.exchange_by_nodes and not whole.exchange_rounds
    monkeypatch.setattr(plan_module, "MAX_LAYOUT_RANKS", 3)
    assert plan_module.plan_layout(topology, N) == whole  # the single-process plan, over nodes
    folders = [tmp_path / f"rank{rank}" for rank in range(N)]
    for folder in folders:
        folder.mkdir()
    save_topology(topology, folders[0] / "measured.yaml")
    sweep = [
        *("-c", RANK, "sweep", "--backend", "gloo", "--op", "all-reduce,all-to-all"),
        *("--algo", ",".join(a for a, _ in ALGOS), "-b", "1K", "-e", "4K", "-n", "2", "--timeout", "60"),
        *("-O", "rows.jsonl", "--topology", "measured.yaml"),
    ]
    done = torchrun_job(N, sweep, folders, timeout_s=240.0)
    for rank, proc in enumerate(done):
        assert proc.returncode == 0, f"rank {rank}: {proc.stdout}{proc.stderr}"
    assert all(not (folder / "measured.yaml").exists() for folder in folders[1:])  # rank 0 alone read it

    rows = list(read_jsonl(folders[0] / "rows.jsonl"))
    assert {(r.op, r.algo) for r in rows} == {(op.value, algo) for algo, op in ALGOS}
    assert all(r.wrong == 0 and r.world_size == N and r.layout == "topology" for r in rows)
    for rank, folder in enumerate(folders):
        with (folder / "layout.pkl").open("rb") as f:
            mine = pickle.load(f)
        # Rank 0 keeps the whole plan; the others its shared part and partners derived by nodes.
        assert mine == (whole if rank == 0 else whole.for_rank(rank)), rank
        assert mine.rings == whole.rings and mine.exchange_by_nodes and not mine.exchange_rounds
        for algo, op in ALGOS:
            assert _steps(algo, op, mine, rank) == _steps(algo, op, whole, rank), (algo, rank)
