"""Within each size of a tune's sweep, the algorithms fast at the size below are measured first
(runtime/sweep/order.py), on fake timings: which come first, that only the order changes, and that
the order is the same wherever the same times are held (a resumed sweep's rows included)."""

from __future__ import annotations

import torch

from collbench.runtime.sweep.order import SizeOrder, size_blocks
from collbench.runtime.sweep.plan import SweepConfig, validate
from collbench.runtime.sweep.points import SweepPoint, plan_points

# The tune's registry order (tuning.sweeps.algorithm_order for all-reduce).
ALGOS = ("ring", "hierarchical", "tree", "two-tree", "recursive-doubling", "rabenseifner", "direct", "native")
# Round 0 at 512 KiB on the namespace cluster (benchmarks/README.md, run D), medians in ms.
AT_512K_MS = {
    "ring": 23.0,
    "hierarchical": 170.0,
    "tree": 240.0,
    "two-tree": 120.0,
    "recursive-doubling": 33.0,
    "rabenseifner": 22.0,
    "direct": 300.0,
    "native": 210.0,
}


def _points(algos: tuple[str, ...] = ALGOS, modes: tuple[bool, ...] = (True,), **changes: object) -> list[SweepPoint]:
    job = validate(
        SweepConfig(
            world_size=4,
            backend="gloo",
            algos=algos,
            min_bytes=512 << 10,
            max_bytes=2 << 20,
            step_factor=2.0,
            in_place=modes,
            interleave=True,
            cut_behind=2.0,
            **changes,  # type: ignore[arg-type]
        )
    )
    points, _ = plan_points(job, 4, torch.device("cpu"), "ring-order", nodes=4)
    return points


def _measured(order: SizeOrder, block: list[tuple[int, SweepPoint]], times_ms: dict[str, float]) -> None:
    for _, point in block:
        if point.algo in times_ms:
            order.add(point, times_ms[point.algo] * 1e3, wrong=0)


def test_the_smallest_size_keeps_the_plans_order() -> None:
    blocks = size_blocks(_points())
    assert [len(b) for b in blocks] == [len(ALGOS)] * 3  # 512 KiB, 1 MiB, 2 MiB
    first = blocks[0]
    assert SizeOrder(2.0).order(first) == first  # nothing measured below it


def test_the_algorithms_fast_at_the_size_below_come_first_in_the_plans_order() -> None:
    blocks = size_blocks(_points())
    order = SizeOrder(2.0)
    _measured(order, order.order(blocks[0]), AT_512K_MS)
    got = order.order(blocks[1])
    # Within 2x of rabenseifner's 22 ms: ring, recursive doubling (33), rabenseifner, in the plan's
    # order; then the others, the fastest below first.
    assert [p.algo for _, p in got] == [
        "ring",
        "recursive-doubling",
        "rabenseifner",
        "two-tree",
        "hierarchical",
        "native",
        "tree",
        "direct",
    ]
    # The same points, each with its own index in the plan: only the order changes.
    assert sorted(got, key=lambda item: item[0]) == blocks[1]
    assert {p.size_bytes for _, p in got} == {1 << 20}


def test_a_round_in_reverse_order_keeps_its_order_within_each_group() -> None:
    # Odd rounds run the algorithms in reverse, so a load drifting during a size does not favour the
    # same one every round: the close contenders still alternate.
    blocks = size_blocks(_points(tuple(reversed(ALGOS))))
    order = SizeOrder(2.0)
    _measured(order, blocks[0], AT_512K_MS)
    assert [p.algo for _, p in order.order(blocks[1])] == [
        "rabenseifner",
        "recursive-doubling",
        "ring",
        "two-tree",
        "hierarchical",
        "native",
        "tree",
        "direct",
    ]


def test_the_nearest_size_below_decides_and_an_algorithm_not_measured_there_comes_after() -> None:
    blocks = size_blocks(_points())
    order = SizeOrder(2.0)
    _measured(order, blocks[0], AT_512K_MS)
    # At 1 MiB tree was fastest and ring was not measured at all (refused, or left out by a round).
    _measured(order, blocks[1], {**{a: t for a, t in AT_512K_MS.items() if a != "ring"}, "tree": 15.0})
    # Within 2x of tree's 15 ms: tree and rabenseifner (22; recursive doubling's 33 is not), then the
    # others, the fastest below first, and ring, with no time below, last.
    assert [p.algo for _, p in order.order(blocks[2])] == [
        "tree",
        "rabenseifner",
        "recursive-doubling",
        "two-tree",
        "hierarchical",
        "native",
        "direct",
        "ring",
    ]


def test_wrong_data_says_nothing_of_speed() -> None:
    blocks = size_blocks(_points(("ring", "direct")))
    order = SizeOrder(2.0)
    ring, direct = (point for _, point in blocks[0])
    order.add(ring, 100_000.0, wrong=0)
    order.add(direct, 1_000.0, wrong=7)  # fast, but its data was wrong
    assert [p.algo for _, p in order.order(blocks[1])] == ["ring", "direct"]


def test_each_algorithms_modes_stay_together_in_the_plans_order() -> None:
    blocks = size_blocks(_points(("tree", "ring"), modes=(False, True)))
    assert [(p.algo, p.in_place) for _, p in blocks[0]] == [
        ("tree", False),
        ("tree", True),
        ("ring", False),
        ("ring", True),
    ]
    order = SizeOrder(2.0)
    for _, point in blocks[0]:
        order.add(point, 500_000.0 if point.algo == "tree" else 90_000.0, wrong=0)
    got = order.order(blocks[1])
    assert [(p.algo, p.in_place) for _, p in got] == [
        ("ring", False),
        ("ring", True),
        ("tree", False),
        ("tree", True),
    ]
    # So an algorithm's last point in the plan stays its last run (NativeGroups closes its group there).
    assert [index for index, p in got if p.algo == "tree"] == sorted(index for index, p in got if p.algo == "tree")


def test_a_plain_sweep_keeps_the_plans_order() -> None:
    blocks = size_blocks(_points())
    order = SizeOrder(None)
    _measured(order, blocks[0], AT_512K_MS)
    assert order.order(blocks[1]) == blocks[1]


def test_points_of_one_size_rounded_apart_are_one_block() -> None:
    # Native all-gather rounds to whole equal chunks (nccl-tests' rounding): 100 bytes on 4 ranks of
    # float32 (25 elements) is 24 elements for native, 25 for ring; both are the first size's.
    job = validate(
        SweepConfig(
            world_size=4,
            backend="gloo",
            ops=("all-gather",),
            algos=("ring", "native"),
            min_bytes=100,
            max_bytes=200,
            step_factor=2.0,
            in_place=(True,),
            interleave=True,
            cut_behind=2.0,
        )
    )
    points, _ = plan_points(job, 4, torch.device("cpu"), "rank-order")
    blocks = size_blocks(points)
    assert [[p.size_index for _, p in b] for b in blocks] == [[0, 0], [1, 1]]
    assert len({p.size_bytes for _, p in blocks[0]}) == 2
