"""Tune of the new ops: each measured in the mode it runs in, barrier's one point at 0 bytes, ``--op all``
includes them, and the rules pick the fastest with its evidence.

The ranks are stood in for by a fake ``run_sweep`` that answers each point with a fixed time, so what is
checked is what tune asks of the sweep and what it selects from the answers, not a measurement.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from synthetic_rows import point_row

from collbench.results.row import ResultRow
from collbench.runtime.sweep import run as sweep_mod
from collbench.schedules.ops import Op, op_count
from collbench.schedules.registry import algorithms_for
from collbench.tuning.config import TuneConfig
from collbench.tuning.pipeline import decide
from collbench.tuning.placement import Placement
from collbench.tuning.sweeps import algorithm_order, algos_for, by_mode, extra_rounds, fixed_rounds

WORLD = 2


def test_op_all_is_every_op_and_each_runs_in_its_own_mode() -> None:
    groups = by_mode(("all",))
    ops = [op for names, _ in groups for op in names]
    assert sorted(ops) == sorted(op.value for op in Op)
    modes = {op: mode for names, mode in groups for op in names}
    # torch.distributed's all_to_all_single and send/recv take two buffers: out of place only.
    assert modes["all-to-all"] == modes["sendrecv"] == (False,)
    assert all(modes[op.value] == (True,) for op in Op if not op.spec.out_of_place)
    # One sweep where every op runs in place.
    assert by_mode(("all-reduce", "barrier")) == [(("all-reduce", "barrier"), (True,))]
    names = algorithm_order(("all",))
    for op in Op:
        assert {s.name for s in algorithms_for(op)} <= set(names)


def test_each_sweep_runs_only_the_algorithms_of_its_ops() -> None:
    names = (*algorithm_order(("all",)), "native:ring/ll")
    for op in Op:
        kept = algos_for(names, (op.value,))
        assert "native" in kept
        assert set(kept) - {"native", "native:ring/ll"} == {s.name for s in algorithms_for(op)} - {"native"}
        # NCCL's forced variants are of the ops it tunes only (the others are point-to-point).
        assert ("native:ring/ll" in kept) == op.spec.nccl_tuned


def _time_us(op: str, algo: str, size: int) -> float:
    """A fixed answer per point: barrier's tree fastest; all-to-all's native fastest below 64 KiB,
    collbench's first algorithm for it from there."""
    if op == "barrier":
        return {"tree": 30.0}.get(algo, 60.0)
    first = algorithms_for(Op.ALL_TO_ALL)[0].name
    if size >= 65536:
        return size / 1e3 * (0.5 if algo == first else 1.0) + 50
    return 50.0 if algo == "native" else 80.0


def _fake_sweep(calls: list[Any]) -> Any:
    def run_sweep(config: Any, progress: Any = None) -> list[ResultRow]:
        calls.append(config)
        rows = []
        sizes = [config.min_bytes]
        while sizes[-1] * config.step_factor <= config.max_bytes:
            sizes.append(int(sizes[-1] * config.step_factor))
        for name in config.ops:
            op = Op.parse(name)
            for algo in config.algos:
                if algo != "native" and not any(s.name == algo for s in algorithms_for(op)):
                    continue
                for size in sizes if op.spec.payload else [0]:
                    count = op_count(op, size // 4, WORLD)
                    for in_place in config.in_place:
                        t = _time_us(name, algo, count * 4)
                        rows.append(point_row(algo, count * 4, t, iters=50, spread=0.01, op=name, in_place=in_place))
        return rows

    return run_sweep


def test_tune_of_all_to_all_and_barrier(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(sweep_mod, "run_sweep", _fake_sweep(calls))
    config = TuneConfig(ranks=WORLD, quick=True, ops=("all-to-all", "barrier"), output=tmp_path / "p.yaml")
    rows = fixed_rounds(config, Placement(), None)
    # Per round, one sweep in place (barrier) and one out of place (all-to-all), into the same stream:
    # the first starts it, the second continues it.
    assert [(c.ops, c.in_place) for c in calls[:2]] == [(("barrier",), (True,)), (("all-to-all",), (False,))]
    assert calls[0].stream == calls[1].stream and not calls[0].resume and calls[1].resume
    assert {r.in_place for r in rows if r.op == "all-to-all"} == {False}
    notes: list[str] = []
    extra, points = extra_rounds(config, Placement(), None, rows, notes)
    # A tie re-measured at barrier's 0 bytes never asks the sweep for a size below 1 byte.
    assert all(c.min_bytes >= 1 for c in calls)
    decided = decide(config, rows + extra, topology=None, layout=None, notes=notes, points=points)
    (barrier,) = decided.profile.rules_for("barrier")
    # Barrier has one size, 0 bytes: one rule, the fastest, with its evidence there.
    assert (barrier.min_bytes, barrier.max_bytes, barrier.algo, barrier.at_bytes) == (0, None, "tree", 0)
    assert barrier.measured_us == pytest.approx(30.0, rel=0.02)
    assert barrier.gain_vs_native == pytest.approx(2.0, rel=0.05)
    a2a = decided.profile.rules_for("all-to-all")
    assert a2a[0].algo == "native" and a2a[0].min_bytes == 0
    assert a2a[-1].algo == algorithms_for(Op.ALL_TO_ALL)[0].name and a2a[-1].max_bytes is None
    assert a2a[-1].gain_vs_native is not None and a2a[-1].gain_vs_native > 1.5


def test_check_measures_barrier_at_0_bytes_and_block_ops_at_whole_blocks() -> None:
    from collbench.profile.document import Profile, RuleSet
    from collbench.profile.rules import Rule
    from collbench.tuning.check import check_sizes

    p = {"segment_bytes": None, "layout": "rank-order"}
    rules = (
        Rule("barrier", 0, None, "tree", p),
        Rule("all-to-all", 0, 999, "native", p),
        Rule("all-to-all", 1000, None, "pairwise", p),
    )
    profile = Profile(fingerprint="f", host="h", backend="gloo", rule_sets=(RuleSet(3, 1, rules),))
    sizes = {(rule.op, rule.algo): size for rule, size in check_sizes(profile)}
    assert sizes[("barrier", "tree")] == 0
    # No evidence recorded: the middle of the range, rounded down to whole blocks of 3 float32 elements.
    assert sizes[("all-to-all", "native")] % 12 == 0 and 0 < sizes[("all-to-all", "native")] <= 999
    assert sizes[("all-to-all", "pairwise")] == 996  # from its lower end, 1000 B: 83 blocks of 12 B


def test_a_predicted_barrier_rule_has_its_evidence_at_0_bytes() -> None:
    from new_op_rows import barrier_rows

    from collbench.models.fit import fit_results
    from collbench.tuning.predicted_shapes import predicted_rule_set

    rows = barrier_rows("dissemination", 4, 40.0) + barrier_rows("tree", 4, 70.0)
    fits = fit_results(rows, crossovers=False).fits
    (rule,) = predicted_rule_set(fits, ["barrier"], 16, 1, {4: 1}).rules
    assert (rule.op, rule.min_bytes, rule.max_bytes, rule.at_bytes) == ("barrier", 0, None, 0)
    assert rule.algo == "dissemination" and rule.predicted_us is not None and rule.predicted_us > 40.0


def test_resume_keeps_barrier_and_whole_block_rows_and_refuses_other_sizes(tmp_path: Path) -> None:
    import dataclasses

    from collbench.errors import ConfigError
    from collbench.results.io import write_rows
    from collbench.tuning.config import check_config, partial_paths

    # 3 ranks: all-to-all at 1 KiB asked moves 1020 B (whole blocks of 85 float32), barrier 0 B.
    config = TuneConfig(ranks=3, quick=True, ops=("all-to-all", "barrier"), output=tmp_path / "p.yaml", resume=True)
    part = partial_paths(config)[0]
    kept = [
        point_row("native", 1020, 50.0, world_size=3, op="all-to-all", in_place=False),
        point_row("tree", 0, 30.0, world_size=3, op="barrier"),
    ]
    write_rows(part, kept)
    check_config(config)  # every kept row is at a size this tune measures
    write_rows(part, [*kept, point_row("native", 1000, 50.0, world_size=3, op="all-to-all", in_place=False)])
    with pytest.raises(ConfigError, match="rows at 1 size"):
        check_config(dataclasses.replace(config))
