"""The process's compiled plans (runtime/executor/plan_cache.py): a call shape builds once, keys that
differ in anything the plan depends on never share a plan, and the cache stays within its bound.
Builds are counted with spies, never timed."""

from __future__ import annotations

import dataclasses
import inspect
import os
import pickle
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import torch.distributed as dist

import collbench.torch as ctorch
import collbench.torch.rules as torch_rules
from collbench.layouts.model import Layout
from collbench.profile.document import Profile, ProfileLayout, RuleSet
from collbench.profile.rules import Rule
from collbench.runtime.executor import plan_cache
from collbench.runtime.executor.buffers import make_buffers
from collbench.runtime.executor.plan_cache import PlanCache, PlanKey
from collbench.runtime.executor.schedule_runner import compile_plan, plan_bytes
from collbench.runtime.sweep import points, worker
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op
from collbench.schedules.registry import get_algorithm
from collbench.schedules.spec import AlgorithmSpec

KEY = PlanKey(
    algo="ring",
    op=Op.ALL_REDUCE,
    world_size=4,
    count=1000,
    rank=1,
    root=0,
    segments=1,
    layout=None,
    elem_bytes=4,
    segment_bytes=1024,
)


def _building(key: PlanKey, calls: list[PlanKey]) -> Callable[[], Schedule]:
    """A spy builder: ``key``'s schedule, counted in ``calls``."""

    def build() -> Schedule:
        calls.append(key)
        return get_algorithm(key.algo).build(
            key.op, key.world_size, key.count, root=key.root, layout=key.layout, segments=key.segments
        )

    return build


def test_a_key_met_twice_builds_and_compiles_once() -> None:
    cache = PlanCache()
    calls: list[PlanKey] = []
    first = cache.plan(KEY, _building(KEY, calls))
    again = cache.plan(KEY, _building(KEY, calls))
    assert calls == [KEY]
    assert again is first
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.plans) == (1, 1, 1)
    assert stats.held_bytes == plan_bytes(first) > 0


# One change per field of the key, each one that gives another plan.
VARIANTS: dict[str, Any] = {
    "algo": "recursive-doubling",
    "op": Op.REDUCE_SCATTER,
    "world_size": 5,
    "count": 1001,
    "rank": 2,
    "root": 3,
    "segments": 3,
    "layout": Layout(rings=((0, 2, 1, 3),), name="topology"),
    "elem_bytes": 8,
    "segment_bytes": 512,
}


def test_every_field_of_the_key_is_varied_here() -> None:
    assert set(VARIANTS) == {f.name for f in dataclasses.fields(PlanKey)}


@pytest.mark.parametrize("field", sorted(VARIANTS))
def test_keys_that_differ_in_one_field_get_plans_of_their_own(field: str) -> None:
    key = dataclasses.replace(KEY, **{field: VARIANTS[field]})
    if field in ("root", "segments"):
        # A root shapes rooted ops and direct; segments shape the pipelined trees.
        key = dataclasses.replace(key, algo="tree" if field == "segments" else "direct")
        base = dataclasses.replace(KEY, algo=key.algo)
    else:
        base = KEY
    cache = PlanCache()
    calls: list[PlanKey] = []
    one = cache.plan(base, _building(base, calls))
    other = cache.plan(key, _building(key, calls))
    assert calls == [base, key]
    assert other is not one
    # Each is exactly what compiling its own schedule gives: nothing of the other's leaked in.
    for k, plan in ((base, one), (key, other)):
        assert plan == compile_plan(
            _building(k, [])(), rank=k.rank, segment_bytes=k.segment_bytes, elem_bytes=k.elem_bytes
        )
    assert one != other
    assert cache.plan(base, _building(base, calls)) is one and cache.plan(key, _building(key, calls)) is other
    assert len(calls) == 2


def test_the_key_holds_every_input_of_a_build_and_a_compile() -> None:
    """A builder or compile parameter added later must reach the key, or two shapes would share a plan.
    ``device`` reaches it as the segment size it resolves to; ``schedule`` is what the key builds."""
    build = set(inspect.signature(AlgorithmSpec.build).parameters) - {"self"}
    compiled = set(inspect.signature(compile_plan).parameters) - {"schedule", "device"}
    fields = {f.name for f in dataclasses.fields(PlanKey)}
    assert build | compiled <= fields | {"world_size"}
    assert not (build | compiled) - fields


def test_least_recently_used_plans_go_first_beyond_the_bound() -> None:
    keys = [dataclasses.replace(KEY, count=1000 + i) for i in range(4)]
    size = plan_bytes(PlanCache().plan(keys[0], _building(keys[0], [])))
    cache = PlanCache(max_bytes=3 * size + size // 2)  # three plans of this shape fit, not four
    calls: list[PlanKey] = []
    for key in keys[:3]:
        cache.plan(key, _building(key, calls))
    cache.plan(keys[0], _building(keys[0], calls))  # keys[0] used again: keys[1] is now the oldest
    cache.plan(keys[3], _building(keys[3], calls))
    assert cache.stats().plans == 3 and cache.stats().held_bytes <= cache.max_bytes
    calls.clear()
    for key in (keys[0], keys[2], keys[3]):
        cache.plan(key, _building(key, calls))
    assert calls == []
    cache.plan(keys[1], _building(keys[1], calls))
    assert calls == [keys[1]]


def test_a_plan_larger_than_the_bound_is_handed_out_but_not_kept() -> None:
    cache = PlanCache(max_bytes=100)
    calls: list[PlanKey] = []
    plan = cache.plan(KEY, _building(KEY, calls))
    assert plan.rank == KEY.rank and plan.steps
    assert cache.stats().plans == 0 and cache.stats().held_bytes == 0
    cache.plan(KEY, _building(KEY, calls))
    assert calls == [KEY, KEY]


def test_a_build_that_fails_keeps_nothing() -> None:
    cache = PlanCache()

    def failing() -> Schedule:
        raise ValueError("no such schedule")

    with pytest.raises(ValueError, match="no such schedule"):
        cache.plan(KEY, failing)
    calls: list[PlanKey] = []
    cache.plan(KEY, _building(KEY, calls))
    assert calls == [KEY]


def test_plan_bytes_grows_with_the_plans_entries() -> None:
    small = compile_plan(get_algorithm("ring").build(Op.ALL_REDUCE, 4, 100), rank=0, elem_bytes=4)
    large = compile_plan(get_algorithm("ring").build(Op.ALL_REDUCE, 64, 100), rank=0, elem_bytes=4)
    assert len(large.steps) > len(small.steps)
    assert plan_bytes(large) > plan_bytes(small) > 0


# --- the callers: collbench.torch's runners and the sweep worker's points -------------------------------


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> PlanCache:
    """The process's cache replaced by an empty one, as every caller reaches it."""
    cache = PlanCache()
    monkeypatch.setattr(plan_cache, "PLANS", cache)
    monkeypatch.setattr(torch_rules, "PLANS", cache)
    monkeypatch.setattr(worker, "PLANS", cache)
    return cache


def _profile(algo: str, params: dict[str, Any]) -> Profile:
    rules = (Rule("all-reduce", 0, None, algo, params),)
    return Profile(fingerprint="test", host="test", backend="gloo", rule_sets=(RuleSet(4, 1, rules),))


def _counting_builds(monkeypatch: pytest.MonkeyPatch) -> list[PlanKey]:
    """Every schedule the cache builds by default, as a list of keys (a spy on build_schedule)."""
    built: list[PlanKey] = []
    real = plan_cache.build_schedule

    def counting(key: PlanKey) -> Schedule:
        built.append(key)
        return real(key)

    monkeypatch.setattr(plan_cache, "build_schedule", counting)
    return built


def test_every_hook_and_call_of_a_process_builds_a_shape_once(
    fresh: PlanCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two hooks (two _Runners, as two ddp_comm_hook calls or per-call all_reduce make), ranks 1 and 2
    # of two groups of 4: each (shape, rank) builds once, whatever asks for it, and only that rank's steps.
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 4)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: group)
    built = _counting_builds(monkeypatch)
    profile = _profile("ring", {"layout": "rank-order", "segment_bytes": 4096})
    rule_set = profile.rule_set(4)
    rule = rule_set.rules[0]
    runners = []
    for hook in range(2):
        made = torch_rules.Runners(profile)
        for group in (1, 2):
            for count in (1000, 1000, 2000):
                runners.append(made.runner(rule_set, rule, count, torch.zeros(count), group))
        # (1000, 2000) x ranks (1, 2), by the first hook; the second builds nothing.
        assert sorted((k.count, k.rank) for k in built) == [(1000, 1), (1000, 2), (2000, 1), (2000, 2)], hook
    assert fresh.stats().misses == 4 and fresh.stats().hits == 4  # the second hook: every shape found
    assert {r.plan.rank for r in runners} == {1, 2}
    # A float64 tensor has other elements: its own plan.
    torch_rules.Runners(profile).runner(rule_set, rule, 1000, torch.zeros(1000, dtype=torch.float64), 1)
    assert len(built) == 5 and built[-1].elem_bytes == 8


def test_a_rules_segment_size_is_in_its_plans_key(fresh: PlanCache, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 4)
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 0)
    plans = []
    for seg in (4096, 400):
        profile = _profile("ring", {"layout": "rank-order", "segment_bytes": seg})
        rule_set = profile.rule_set(4)
        plans.append(
            torch_rules.Runners(profile).runner(rule_set, rule_set.rules[0], 4000, torch.zeros(4000), None).plan
        )
    assert fresh.stats().misses == 2
    assert max(len(s.rounds) for s in plans[1].steps) > max(len(s.rounds) for s in plans[0].steps) == 1


def test_a_rules_key_names_each_of_its_inputs() -> None:
    profile = _profile("tree", {"layout": "rank-order", "segment_bytes": 400})
    rule_set = profile.rule_set(4)
    key = torch_rules.plan_key(rule_set, profile.rule_set(4).rules[0], 4, 1000, 4, Op.REDUCE, 3, 2, "cpu")
    assert key == PlanKey(
        algo="tree",
        op=Op.REDUCE,
        world_size=4,
        count=1000,
        rank=2,
        root=3,
        segments=10,  # 4,000 bytes in segments of 400, as the sweep measured it
        layout=None,
        elem_bytes=4,
        segment_bytes=400,
    )


def test_a_sweep_point_met_again_reuses_its_plan(fresh: PlanCache, monkeypatch: pytest.MonkeyPatch) -> None:
    built = _counting_builds(monkeypatch)
    ctx = SimpleNamespace(world_size=4, rank=2, device=torch.device("cpu"))
    job = SimpleNamespace(redop="sum")
    for count, in_place in ((256, True), (256, False), (512, True), (256, True)):  # rounds, tie rounds
        point = points.SweepPoint(Op.ALL_REDUCE, "ring", count * 4, count, in_place, None, "rank-order")
        bufs = make_buffers(Op.ALL_REDUCE, count, dtype=torch.float32, rank=2, world_size=4, in_place=in_place)
        worker._make_call(ctx, job, point, bufs, None, 0, None)  # type: ignore[arg-type]
    assert [(k.count, k.rank) for k in built] == [(256, 2), (512, 2)]
    assert fresh.stats().hits == 2
    # Built for rank 2 alone (ir.py's one-rank schedule): what the cache keeps is rank 2's plan.
    assert all(fresh.plan(k).rank == 2 for k in built)


def test_the_default_build_is_the_keys_rank_alone() -> None:
    one = plan_cache.build_schedule(KEY)
    assert one.rank == KEY.rank
    assert one == get_algorithm("ring").build(Op.ALL_REDUCE, 4, 1000, rank=KEY.rank)


def test_a_rule_whose_layout_the_rule_set_does_not_hold_says_it_runs_in_rank_order() -> None:
    # Profiles of earlier tunes name the layout their rows ran ('topology') without holding it: the rule's
    # schedule is built in rank order, and the user is told so (it was built so without a word).
    profile = _profile("ring", {"layout": "topology", "segment_bytes": None})
    rule_set = profile.rule_set(4)
    with pytest.warns(ctorch.LayoutNotHeld, match="measured on layout 'topology', and its rule set holds no layout"):
        key = torch_rules.plan_key(rule_set, rule_set.rules[0], 4, 1000, 4, Op.ALL_REDUCE, 0, 1, "cpu")
    assert key.layout is None
    # A rule in rank order is built so without a word.
    plain = _profile("ring", {"layout": "rank-order", "segment_bytes": None}).rule_set(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch_rules.plan_key(plain, plain.rules[0], 4, 1000, 4, Op.ALL_REDUCE, 0, 1, "cpu")


def _on_layout(world: int) -> RuleSet:
    ring = tuple(range(world))
    layout = ProfileLayout("topology", rings=(ring, ring[::-1]), trees=((-1, *range(world - 1)),))
    rules = (Rule("all-reduce", 0, None, "ring", {"layout": "topology", "segment_bytes": None}),)
    return RuleSet(world, 1, rules, layout=layout)


def test_a_rule_on_its_rule_sets_layout_finds_its_plan_without_building_the_layout_again() -> None:
    # Each call of collbench.torch.all_reduce makes its plan's key: it built a new Layout from the rule set's
    # rings (checking each, O(ranks log ranks)) and hashed every ring, 1.7 ms a call at 16,384 ranks
    # (benchmarks/bench_scale.py, api_call_us). The rule set's layout is made once, its hash kept.
    rule_set = _on_layout(64)
    keys = [
        torch_rules.plan_key(rule_set, rule_set.rules[0], 64, 1000, 4, Op.ALL_REDUCE, 0, 1, "cpu") for _ in range(3)
    ]
    assert keys[0].layout is keys[1].layout is keys[2].layout is not None
    held = rule_set.layout
    assert held is not None
    made = Layout(rings=held.rings, trees=held.trees, name="topology")
    assert keys[0].layout == made and hash(keys[0].layout) == hash(made) == hash(made)
    assert {keys[0]: 1}[dataclasses.replace(keys[0], layout=made)] == 1
    # Layouts that differ in anything compared differ as keys.
    assert dataclasses.replace(made, name="other") != made
    assert dataclasses.replace(made, rings=(held.rings[1], held.rings[0])) != made


def test_a_layout_hashes_alike_in_every_process_it_is_pickled_to(tmp_path: Path) -> None:
    # Sweeps hand their layout to every rank pickled; a kept hash of a str (salted per process) would
    # make an equal layout of another rank's a different key there.
    layout = Layout(rings=((0, 2, 1, 3),), trees=((-1, 0, 0, 1),), name="topology", ring_bandwidths_gbps=(12.5,))
    hash(layout)  # its orders' hash kept here, then pickled with it
    path = tmp_path / "layout.pickle"
    path.write_bytes(pickle.dumps(layout))
    probe = (
        "import pickle, sys; from collbench.layouts.model import Layout; "
        f"got = pickle.loads(open({str(path)!r}, 'rb').read()); "
        "made = Layout(rings=((0, 2, 1, 3),), trees=((-1, 0, 0, 1),), name='topology', ring_bandwidths_gbps=(12.5,)); "
        "print(got == made, hash(got) == hash(made), len({got: 1, made: 2}))"
    )
    for seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": seed}
        )
        assert done.stdout.split() == ["True", "True", "1"], done.stderr
