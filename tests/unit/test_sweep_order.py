"""The order a sweep measures its points in: each algorithm's sizes in turn, or (tune's rounds) every
algorithm at a size before the next size."""

from __future__ import annotations

import torch

from collbench.runtime.sweep.plan import SweepConfig, validate
from collbench.runtime.sweep.points import plan_points

SIZES = (1024, 2048, 4096)
ALGOS = ("ring", "native")
MODES = (False, True)


def _order(interleave: bool) -> list[tuple[str, int, bool]]:
    job = validate(
        SweepConfig(
            world_size=2,
            backend="gloo",
            algos=("ring", "native"),
            min_bytes=1024,
            max_bytes=4096,
            step_factor=2.0,
            in_place=(False, True),
            interleave=interleave,
        )
    )
    points, notes = plan_points(job, 2, torch.device("cpu"), "rank-order")
    assert notes == []
    return [(p.algo, p.size_bytes, p.in_place) for p in points]


def test_a_sweep_measures_each_algorithm_over_its_sizes_in_turn() -> None:
    assert _order(False) == [
        (algo, size, in_place)
        for algo in ("ring", "native")
        for size in (1024, 2048, 4096)
        for in_place in (False, True)
    ]


def test_interleaved_every_algorithm_is_measured_at_a_size_before_the_next_size() -> None:
    order = _order(True)
    assert order == [
        (algo, size, in_place)
        for size in (1024, 2048, 4096)
        for algo in ("ring", "native")
        for in_place in (False, True)
    ]
    assert sorted(order) == sorted(_order(False))  # the same points, only their order differs
