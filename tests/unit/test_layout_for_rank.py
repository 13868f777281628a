"""Under a launcher with ``tune --topology``, rank 0 alone reads the topology and plans the layout; each
other rank receives the layout's rings, trees and nodes, and its own all-to-all partners, never the
O(ranks^2) exchange table (tuning/placement.py). These check that a rank's part builds exactly the
steps the whole layout gives that rank, and that a rank other than 0 never opens the topology file.

The job's hand-over is faked by its documented contract (``session.agree``: rank 0's ``decide()`` value
on every rank, through JSON; ``handout.hand_out``: row r of rank 0's table on rank r); tests/dist runs
it for real over gloo.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from collbench.errors import ConfigError
from collbench.layouts.model import Layout
from collbench.layouts.plan import plan_layout
from collbench.runtime.launch import handout, ranks, session
from collbench.runtime.probe import PairMeasure, measured_topology
from collbench.schedules.ops import Op
from collbench.schedules.registry import get_algorithm
from collbench.topology import io as topology_io
from collbench.topology.io import save_topology
from collbench.topology.model import Topology
from collbench.tuning import placement as placement_module
from collbench.tuning.config import TuneConfig
from collbench.tuning.placement import plan_placement

SLOW = {(0, 1), (2, 3), (4, 5)}
"""Slow pairs: the exchange order groups them (not the round-robin table), so partners must travel."""


def _topology(n: int) -> Topology:
    measures = [
        PairMeasure(a, b, 50.0, 0.05 if tuple(sorted((a, b))) in SLOW else 0.3)
        for a in range(n)
        for b in range(n)
        if a != b
    ]
    return measured_topology(["host"] * n, measures, gpus=False)


def _steps(algo: str, op: Op, n: int, layout: Layout, rank: int) -> Any:
    return get_algorithm(algo).build(op, n, 6 * n + 1, layout=layout, segments=2, rank=rank).steps[rank]


def test_a_ranks_part_of_the_layout_builds_the_steps_the_whole_layout_gives_it() -> None:
    n = 6
    whole = plan_layout(_topology(n), n)
    assert whole.exchange_rounds and whole.exchange_spread == 1  # the slow round goes beside the others
    for rank in range(n):
        mine = whole.for_rank(rank)
        assert not mine.exchange_rounds and len(mine.exchange_partners) == len(whole.exchange_rounds)
        for algo, op in (("topo-pairwise", Op.ALL_TO_ALL), ("ring", Op.ALL_REDUCE), ("two-tree", Op.ALL_REDUCE)):
            assert _steps(algo, op, n, mine, rank) == _steps(algo, op, n, whole, rank), (algo, rank)


def test_a_spread_exchange_order_builds_alike_from_a_ranks_partners() -> None:
    bw = [[0.0 if i == j else 10.0 for j in range(4)] for i in range(4)]
    bw[0][1] = bw[1][0] = bw[2][3] = bw[3][2] = 1.0
    from collbench.layouts.exchange import exchange_order

    rounds, spread = exchange_order(bw)
    whole = Layout(rings=((0, 1, 2, 3),), exchange_rounds=rounds, exchange_spread=spread, name="topology")
    assert spread == 1
    for rank in range(4):
        assert _steps("topo-pairwise", Op.ALL_TO_ALL, 4, whole.for_rank(rank), rank) == _steps(
            "topo-pairwise", Op.ALL_TO_ALL, 4, whole, rank
        )


def test_a_ranks_part_builds_that_ranks_steps_alone() -> None:
    mine = plan_layout(_topology(6), 6).for_rank(2)
    builder = get_algorithm("topo-pairwise")
    with pytest.raises(ConfigError, match="holds rank 2's all-to-all partners of 6 ranks alone: it cannot build"):
        builder.build(Op.ALL_TO_ALL, 6, 12, layout=mine)
    with pytest.raises(ConfigError, match="cannot build rank 3's steps"):
        builder.build(Op.ALL_TO_ALL, 6, 12, layout=mine, rank=3)


def _as_rank(monkeypatch: pytest.MonkeyPatch, rank: int, world: int, rank_0: dict[str, Any]) -> list[str]:
    """This process is ``rank`` of a launcher's job of ``world``; decisions and hand-outs are rank 0's
    (``rank_0``: what its calls made), as the job's broadcast and scatter deliver them. Returns the
    names of the decisions taken, in order."""
    taken: list[str] = []
    monkeypatch.setattr(ranks, "joined_job", lambda: SimpleNamespace(rank=rank, world_size=world))

    def agree(name: str, decide: Any, *, timeout_s: float, types_allowed: Any = ()) -> Any:
        taken.append(name)
        return json.loads(json.dumps(rank_0["decisions"].pop(0)))  # through JSON, as the others read it

    def hand_out(name: str, table: Any, width: int, *, timeout_s: float) -> list[int]:
        row = rank_0["table"][rank]
        assert len(row) == width
        return list(row)

    monkeypatch.setattr(session, "agree", agree)
    monkeypatch.setattr(handout, "hand_out", hand_out)
    return taken


def test_ranks_other_than_0_never_open_the_topology_and_get_rank_0s_layout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    n = 6
    path = tmp_path / "probe.yaml"
    save_topology(_topology(n), path)
    config = TuneConfig(ranks=None, topology_path=path, output=tmp_path / "p.yaml")
    # Rank 0's side: it loads and plans, and says what the others receive.
    whole = plan_layout(_topology(n), n)
    shape = placement_module._shape(whole)
    assert shape["exchange_round_count"] == len(whole.exchange_rounds) and shape["derived"] is False
    table = [[rnd[r] for rnd in whole.exchange_rounds] for r in range(n)]

    opened: list[Path] = []

    def spy(p: Path) -> Topology:
        opened.append(p)
        raise AssertionError("a rank other than 0 opened the topology")

    monkeypatch.setattr(topology_io, "load_topology", spy)
    for rank in range(1, n):
        taken = _as_rank(monkeypatch, rank, n, {"decisions": [shape], "table": table})
        got = plan_placement(config, [])
        assert taken == [placement_module.SHARED]
        assert got.topology is None and got.layout is not None
        assert got.layout == whole.for_rank(rank)
        assert got.nodes == len(whole.nodes)
    assert opened == []


def test_rank_0s_refusal_of_the_topology_stops_the_others_with_its_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = TuneConfig(ranks=None, topology_path=tmp_path / "missing.yaml", output=tmp_path / "p.yaml")
    _as_rank(monkeypatch, 1, 3, {"decisions": [{"refused": "missing.yaml: no such file"}], "table": []})
    with pytest.raises(ConfigError, match=r"^rank 0: missing.yaml: no such file$"):
        plan_placement(config, [])


def test_round_robin_partners_are_derived_on_each_rank_not_sent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from collbench.topology.host import host_topology

    n = 5
    whole = plan_layout(host_topology(n), n)
    shape = placement_module._shape(whole)
    assert shape["derived"] is True
    config = TuneConfig(ranks=None, topology_path=tmp_path / "t.yaml", output=tmp_path / "p.yaml")
    for rank in range(1, n):
        _as_rank(monkeypatch, rank, n, {"decisions": [shape], "table": None})  # a hand-out would fail
        got = plan_placement(config, [])
        assert got.layout == whole.for_rank(rank)


def _by_nodes_layout() -> Layout:
    """A layout planned over nodes (layouts/nodes.py, what plan_layout gives past 2,048 ranks): 3 hosts
    of 2 ranks, its all-to-all the rule by nodes."""
    from collbench.layouts.nodes import plan_over_nodes

    measures = [PairMeasure(a, b, 5.0, 20.0 if a // 2 == b // 2 else 5.0) for a in range(6) for b in range(6) if a != b]
    hosts = [f"node{r // 2}" for r in range(6)]
    layout = plan_over_nodes(measured_topology(hosts, measures, gpus=True, per_node=True)).layout
    assert layout.exchange_by_nodes and not layout.exchange_rounds
    return layout


def test_partners_by_nodes_are_derived_on_each_rank_not_sent(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    whole = _by_nodes_layout()
    shape = placement_module._shape(whole)
    assert shape["derived"] is True and shape["exchange_by_nodes"] is True
    config = TuneConfig(ranks=None, topology_path=tmp_path / "t.yaml", output=tmp_path / "p.yaml")
    for rank in range(1, 6):
        _as_rank(monkeypatch, rank, 6, {"decisions": [shape], "table": None})  # a hand-out would fail
        got = plan_placement(config, [])
        assert got.layout == whole.for_rank(rank)
        assert got.layout is not None and len(got.layout.exchange_partners) == whole.exchange_round_count


def test_a_sweeps_ranks_derive_their_partners_by_nodes_from_the_shared_part() -> None:
    # runtime/sweep/worker.py: rank 0 sends the shared part and -1 (derived); no scatter is made.
    from collbench.runtime.sweep.worker import _own_layout

    whole = _by_nodes_layout()
    shared = whole.shared_part()
    for rank in range(1, 6):
        ctx = SimpleNamespace(rank=rank, world_size=6)
        assert _own_layout(ctx, shared, -1, None) == whole.for_rank(rank)  # type: ignore[arg-type]
