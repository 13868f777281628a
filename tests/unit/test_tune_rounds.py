"""Extra tune rounds re-measure exactly the tied (size, algorithm) pairs, until separated or out of rounds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _launched_tune import SIZES, quick_tune_under_a_launcher
from synthetic_rows import point_row

from collbench.layouts.model import Layout
from collbench.results.row import ResultRow
from collbench.runtime.sweep import run as sweep_mod
from collbench.tuning.config import QUICK, TuneConfig
from collbench.tuning.placement import Placement
from collbench.tuning.rounds import settled_fraction, unsettled
from collbench.tuning.selection import measured_points
from collbench.tuning.sweeps import extra_rounds, fixed_rounds


def _row(algo: str, size: int, t: float) -> ResultRow:
    return point_row(algo, size, t, iters=100, spread=0.01)


def _first_rounds() -> list[ResultRow]:
    # 1 KiB: tree clearly fastest. 4 KiB: ring and tree 1% apart (tied), native far behind.
    rows = []
    for _ in range(2):
        rows += [_row("tree", 1024, 50.0), _row("ring", 1024, 90.0), _row("native", 1024, 100.0)]
        rows += [_row("tree", 4096, 60.0), _row("ring", 4096, 60.6), _row("native", 4096, 100.0)]
    return rows


def _planned(config: Any) -> list[tuple[str, int, str]]:
    """What the ranks would measure of ``config``: its ``only`` points, in the plan's order (every
    algorithm at a size before the next size), as ``sweep.points.plan_points`` filters them."""
    assert config.only is not None, "a tie round names the points it measures"
    order = {a: i for i, a in enumerate(config.algos)}
    return sorted(config.only, key=lambda p: (p[0], p[1], order[p[2]]))


def test_unsettled_names_the_tied_sizes_and_algorithms_only() -> None:
    (item,) = unsettled(measured_points(_first_rounds()))
    assert item.op == "all-reduce"
    assert item.sizes == (4096,)
    assert set(item.algos) == {"tree", "ring"}
    assert settled_fraction(measured_points(_first_rounds())) == (1, 2)


def _two_ties() -> list[ResultRow]:
    # 1 KiB: tree and ring tied, native far behind. 4 KiB: tree clearly fastest. 16 KiB: ring and
    # native tied, tree far behind.
    rows = []
    for _ in range(2):
        rows += [_row("tree", 1024, 50.0), _row("ring", 1024, 50.4), _row("native", 1024, 100.0)]
        rows += [_row("tree", 4096, 60.0), _row("ring", 4096, 90.0), _row("native", 4096, 100.0)]
        rows += [_row("tree", 16384, 300.0), _row("ring", 16384, 150.0), _row("native", 16384, 151.0)]
    return rows


def test_unsettled_names_each_tied_pair_and_no_other() -> None:
    (item,) = unsettled(measured_points(_two_ties()))
    # The tie at 16 KiB goes to native (the simpler choice): named first, with ring tied to it.
    assert item.pairs == ((1024, "tree"), (1024, "ring"), (16384, "native"), (16384, "ring"))
    assert item.sizes == (1024, 16384) and item.algos == ("tree", "ring", "native")


def test_a_tie_round_measures_the_tied_pairs_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the 4 KiB between the ties (separated), not native at 1 KiB nor tree at 16 KiB (behind)."""
    calls: list[Any] = []

    def fake_run_sweep(config: Any, progress: Any = None) -> list[ResultRow]:
        calls.append(config)
        times = {("tree", 1024): 50.0, ("ring", 1024): 50.2, ("ring", 16384): 150.0, ("native", 16384): 150.5}
        return [_row(a, s, times[a, s]) for _, s, a in _planned(config)]

    monkeypatch.setattr(sweep_mod, "run_sweep", fake_run_sweep)
    config = TuneConfig(ranks=2, quick=True, output=tmp_path / "p.yaml")
    extra, _ = extra_rounds(config, Placement(), None, _two_ties(), [])
    assert calls, "the ties were measured again"
    for sweep in calls:
        assert sweep.only == {
            ("all-reduce", 1024, "tree"),
            ("all-reduce", 1024, "ring"),
            ("all-reduce", 16384, "ring"),
            ("all-reduce", 16384, "native"),
        }
    measured = {(r.size_bytes, r.algo) for r in extra}
    assert measured == {(1024, "tree"), (1024, "ring"), (16384, "ring"), (16384, "native")}


def test_a_sweep_of_named_points_plans_those_alone(tmp_path: Path) -> None:
    import torch

    from collbench.runtime.sweep.plan import SweepConfig, validate
    from collbench.runtime.sweep.points import plan_points

    only = frozenset({("all-reduce", 2048, "ring"), ("all-reduce", 4096, "native"), ("all-gather", 2048, "ring")})
    job = validate(
        SweepConfig(
            world_size=2, backend="gloo", algos=("ring", "native"), min_bytes=1024, max_bytes=4096,
            step_factor=2.0, in_place=(True,), interleave=True, only=only, stream=tmp_path / "s.jsonl",
        )
    )  # fmt: skip
    points, _ = plan_points(job, 2, torch.device("cpu"), "rank-order")
    assert [(p.algo, p.size_bytes) for p in points] == [("ring", 2048), ("native", 4096)]


def test_extra_rounds_measure_ties_until_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []

    def fake_run_sweep(config: Any, progress: Any = None) -> list[ResultRow]:
        # Stands in for the ranks: the two tied algorithms stay 1% apart at every round.
        calls.append(config)
        times = {"tree": 60.0, "ring": 60.6}
        return [_row(a, s, times[a]) for _, s, a in _planned(config)]

    monkeypatch.setattr(sweep_mod, "run_sweep", fake_run_sweep)
    config = TuneConfig(ranks=2, quick=True, output=tmp_path / "p.yaml")
    notes: list[str] = []
    extra, _ = extra_rounds(config, Placement(), None, _first_rounds(), notes)
    depth = config.depth
    assert len(calls) == depth.max_rounds - depth.rounds
    assert all(c.only == {("all-reduce", 4096, "tree"), ("all-reduce", 4096, "ring")} for c in calls)
    assert all(set(c.algos) == {"tree", "ring"} for c in calls)
    assert len(extra) == 2 * len(calls)
    assert "separated from the runner-up beyond the measured noise at 1 of 2 sizes" in notes[0]


def test_extra_rounds_stop_once_separated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []

    def fake_run_sweep(config: Any, progress: Any = None) -> list[ResultRow]:
        # Re-measured, tree turns out 20% faster than ring's best: one round separates the winner.
        calls.append(config)
        times = {"tree": 50.0, "ring": 72.0}
        return [_row(a, s, times[a]) for _, s, a in _planned(config)] * 4

    monkeypatch.setattr(sweep_mod, "run_sweep", fake_run_sweep)
    config = TuneConfig(ranks=2, quick=True, output=tmp_path / "p.yaml")
    notes: list[str] = []
    extra_rounds(config, Placement(), None, _first_rounds(), notes)
    assert len(calls) == 1
    assert "at 2 of 2 sizes" in notes[0]


@pytest.mark.parametrize(("native_us", "tie_rounds"), [(126.5e3, 1), (200e3, 0)])
def test_a_quick_tune_under_a_launcher_separates_a_consistent_gap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native_us: float, tie_rounds: int
) -> None:
    """Native behind rabenseifner by the same factor in every round, within reach, so measured in both
    fixed rounds: 1.15x (beyond the noise, but within the 25% a lead in two rounds alone must pass,
    selection.apart_round_by_round: a tie, settled by a third round), or 1.8x (apart after two). The
    rounds that settle ties must run under a launcher too, or native wins every size as the simpler
    choice."""
    outcome, calls = quick_tune_under_a_launcher(tmp_path, monkeypatch, native_us=native_us)
    tied = {("all-reduce", s, a) for s in SIZES for a in ("native", "rabenseifner")}
    # Round 1, then the rounds that settle the tie.
    assert [c.only for c in calls[QUICK.rounds - 1 :]] == [tied] * (1 + tie_rounds)
    for size in SIZES:
        rule = outcome.profile.select("all-reduce", size)
        assert rule.algo == "rabenseifner" and not rule.tie_with, rule


@pytest.mark.parametrize(("nodes", "measured"), [((), False), (((0,), (1,)), True)])
def test_fixed_rounds_measure_hierarchical_only_on_two_nodes_or_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nodes: tuple[tuple[int, ...], ...], measured: bool
) -> None:
    # On one node hierarchical is a ring: each round's sweep would skip it with a note of its own.
    algos: list[str] = []

    def fake_run_sweep(sweep: Any, progress: Any = None) -> list[ResultRow]:
        algos.extend(sweep.algos)
        return [_row(a, sweep.min_bytes, 50.0) for a in sweep.algos]

    monkeypatch.setattr(sweep_mod, "run_sweep", fake_run_sweep)
    config = TuneConfig(ranks=2, backend="gloo", output=tmp_path / "p.yaml")
    fixed_rounds(config, Placement(layout=Layout(nodes=nodes) if nodes else None), None)
    assert "ring" in algos and ("hierarchical" in algos) is measured
