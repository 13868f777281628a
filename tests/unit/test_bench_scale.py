"""benchmarks/bench_scale.py's functions at a few ranks: what they measure is the build they name,
and the run's table and JSON line hold every algorithm and size (its figures are the benchmark's,
never checked here)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from collbench.schedules.registry import get_algorithm

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_scale.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("collbench_bench_scale", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_build_cost_measures_the_ranks_own_build_and_the_whole(bench: ModuleType) -> None:
    n = 9
    for algo, op in bench.ALGORITHMS.items():
        whole = get_algorithm(algo).build(op, n, 40)
        one = bench.build_cost(algo, n, count=40)
        assert one.steps == max(len(whole.steps[r]) for r in {0, n // 2})
        assert one.cpu_s >= 0 and one.wall_s >= 0 and one.peak_mib >= 0
        ref = bench.build_cost(algo, n, whole=True, count=40)
        assert ref.steps == sum(len(s) for s in whole.steps)
        if n > 1 and op.spec.payload:
            assert one.peak_mib > 0 and ref.peak_mib > one.peak_mib


def test_every_registered_schedule_can_be_measured_and_its_cost_is_its_ranks_build(bench: ModuleType) -> None:
    from collbench.schedules.registry import SPECS

    assert {s.name for s in SPECS if s.builder is not None} == set(bench.ALGORITHMS) | set(bench.MORE)
    n = 16
    for algo, op in bench.MORE.items():
        spec = get_algorithm(algo)
        layout = bench.nodes_layout(n) if spec.needs_nodes else None
        whole = spec.build(op, n, 40, layout=layout)
        assert bench.build_cost(algo, n, count=40).steps == max(len(whole.steps[r]) for r in {0, n // 2})
    assert bench.nodes_layout(16).nodes == (tuple(range(8)), tuple(range(8, 16)))


def test_all_algos_print_every_row_and_a_refusal_in_80_columns(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--sizes", "1,8", "--whole-at", "8", "--store-ranks", "4", "--algos", "all", "--placement-at", "8"]
    bench.main([*args, "--topology-at", "", "--every-pair-at", ""])
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 80 for line in lines[:-1])
    figures = json.loads(lines[-1])
    every = [*bench.ALGORITHMS, *bench.MORE]
    assert list(figures["build_s"]) == every
    # One rank is one node: hierarchical says so in its row and has no figure there; on two of 4 it has.
    assert set(figures["build_s"]["hierarchical"]) == {"8"}
    assert any(line.startswith("hierarchical") and "two or more nodes" in line for line in lines)


def test_an_unknown_algorithm_is_refused(bench: ModuleType) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--algos", "ring,bogus"])


def test_run_prints_80_columns_and_one_json_line_of_every_size(
    bench: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--sizes", "1,8", "--whole-at", "1", "--store-ranks", "16", "--placement-at", "8,16"]
    bench.main([*args, "--topology-at", "16,24", "--every-pair-at", "16"])
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 80 for line in lines[:-1])
    figures = json.loads(lines[-1])
    assert set(figures["build_s"]) == set(bench.ALGORITHMS) == set(figures["build_mib"])
    assert all(set(per) == {"1", "8"} for per in figures["build_s"].values())
    assert all(set(per) == {"1"} for per in figures["whole_build_s"].values())
    assert figures["store_ops_per_rank_per_decision"] > 0
    assert set(figures["api_call_us"]) == {"1", "8"} and all(us > 0 for us in figures["api_call_us"].values())
    assert set(figures["placement"]) == {"8", "16"}
    # The probe's file: by nodes at 16 and 24 ranks, every pair measured at 16 and estimated at 24.
    files = figures["topology_file"]
    assert set(files) == {"16", "24"} and all(set(f) == {"every_pair", "by_nodes"} for f in files.values())
    assert files["16"]["every_pair"]["load_s"] is not None and files["24"]["every_pair"]["load_s"] is None
    rows = [line.split() for line in lines if line.split()[:1] and line.split()[0] in bench.ALGORITHMS]
    assert [(r[0], r[1]) for r in rows] == [(a, str(n)) for a in bench.ALGORITHMS for n in (1, 8)]


def test_store_traffic_counts_every_ranks_operations_on_the_one_store(bench: ModuleType) -> None:
    # The decisions reach every rank (store_traffic checks each rank's value against rank 0's), and
    # what the store serves grows with the ranks, not faster: the same per rank at 4 and at 32.
    assert bench.store_traffic(4, decisions=2) == bench.store_traffic(32, decisions=2) > 0
    store = bench.CountingStore()
    store.queue_push("k", b"v")
    assert store.queue_len("k") == 1 and store.queue_pop("k", False) == b"v" and store.ops == 3


def test_api_call_us_times_calls_that_find_their_plan_kept(bench: ModuleType) -> None:
    from collbench.runtime.executor.plan_cache import PLANS

    before = PLANS.stats()
    assert bench.api_call_us(64, calls=5) > 0
    after = PLANS.stats()
    # The first call builds the plan (or finds it kept by an earlier test); the 5 timed ones find it.
    assert after.hits - before.hits >= 5 and after.misses - before.misses <= 1


def test_placement_cost_is_a_ranks_part_of_the_whole_layout(bench: ModuleType) -> None:
    # placement_cost checks the layout the rank made is the whole one's part for it (Layout.for_rank);
    # a rank's part grows as the ranks (rings, trees, its partners), the whole layout as their square.
    small, large = bench.placement_cost(16), bench.placement_cost(64)
    assert 0 < small.rank_kib < small.whole_kib and large.rank_kib < 8 * small.rank_kib
    assert large.whole_kib > 8 * small.whole_kib


def test_the_probes_file_is_what_rank_0_writes_from_the_made_up_probe(bench: ModuleType) -> None:
    import scale_topology_file as files

    from collbench.runtime.probe import measured_topology

    # 3 nodes of 8: every pair within them (3 x 28) and, by nodes, the 3 pairs of nodes once each.
    hosts, measures = files._probe_measures(24, every_pair=False)
    topo = measured_topology(hosts, measures, gpus=True, per_node=True)
    assert len(topo.links) == 3 * 28 and len(topo.node_links) == 3 and topo.default_node_link is None
    hosts, measures = files._probe_measures(24, every_pair=True)
    assert len(measured_topology(hosts, measures, gpus=True).links) == 24 * 23 // 2
    # Past 17 nodes (16 rounds between them) pairs of nodes are inferred.
    hosts, measures = files._probe_measures(8 * 40, every_pair=False)
    topo = measured_topology(hosts, measures, gpus=True, per_node=True)
    assert topo.default_node_link is not None and topo.default_node_link.source == "inferred"
    assert len(topo.node_links) - 1 == 40 * 16 // 2
    cost = files.topology_file_cost(24, every_pair=False)
    assert cost.planned and cost.mib > 0 and cost.load_s is not None
    assert cost.plan_mib is not None and cost.plan_mib > 0  # the plan's peak memory, a second plan
