"""One rank's build (``spec.build(..., rank=r)``) is rank r's part of the whole build, step for step,
for every registered algorithm, op, world size 1..17 (and 31, 64, 100), root, count and layout; and
the builders that enumerate only the kept rank's transfers (the contract in algorithms/_common.py)
call ``RoundBuilder.transfer`` for nothing else."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

import pytest

from collbench.errors import CollbenchError
from collbench.layouts.exchange import round_robin_rounds
from collbench.layouts.model import Layout
from collbench.layouts.trees import binary_tree, double_binary_tree
from collbench.schedules.algorithms import _common
from collbench.schedules.ops import Op
from collbench.schedules.registry import algorithm_names, get_algorithm
from collbench.schedules.spec import AlgorithmSpec
from collbench.schedules.verifier import simulate

CASES = [
    (name, op)
    for name in algorithm_names()
    if get_algorithm(name).builder is not None
    for op in sorted(get_algorithm(name).ops, key=list(Op).index)
]

ENUMERATES_OWN = CASES
"""(algorithm, op) whose one-rank build enumerates only the kept rank's transfers (O(its steps)): every
registered algorithm's every op."""

WORLD_SIZES = [*range(1, 18), 31, 64, 100]


def _layouts(n: int) -> list[Layout | None]:
    """No layout, and one with everything a builder may read: two rings (the second shuffled), two
    trees, nodes (two, where they can be even), an exchange order."""
    shuffled = list(range(n))
    random.Random(n).shuffle(shuffled)
    nodes: tuple[tuple[int, ...], ...] = ()
    if n >= 4 and n % 2 == 0:
        nodes = (tuple(range(0, n, 2)), tuple(range(1, n, 2)))
    full = Layout(
        rings=(tuple(range(n)), tuple(shuffled)),
        trees=(binary_tree(n, n - 1), double_binary_tree(n)[1]),
        nodes=nodes,
        exchange_rounds=round_robin_rounds(n),
        name="topology",
    )
    return [None, full]


def _ranks(n: int, root: int) -> list[int]:
    return list(range(n)) if n <= 17 else sorted({0, 1, root, n // 2, n - 1})


def _builds(spec: AlgorithmSpec, op: Op, n: int) -> Iterator[tuple[int, int, int, Layout | None]]:
    """(count, root, segments, layout) for one algorithm, op and world size."""
    roots = sorted({0, n // 2, n - 1}) if op.spec.rooted or spec.name == "direct" else [0]
    for layout in _layouts(n):
        for count in sorted({0, 3, 2 * n + 3}):
            for root in roots:
                for segments in (1, 3) if spec.segmented else (1,):
                    yield count, root, segments, layout


@pytest.mark.parametrize(("name", "op"), CASES, ids=[f"{a}-{o.value}" for a, o in CASES])
def test_one_rank_build_is_that_ranks_part_of_the_whole(name: str, op: Op) -> None:
    spec = get_algorithm(name)
    for n in WORLD_SIZES:
        for count, root, segments, layout in _builds(spec, op, n):
            try:
                whole = spec.build(op, n, count, root=root, layout=layout, segments=segments)
            except CollbenchError as e:
                # What the whole build refuses (hierarchical without nodes), a rank's build refuses alike.
                with pytest.raises(type(e), match=re.escape(str(e))):
                    spec.build(op, n, count, root=root, layout=layout, segments=segments, rank=0)
                continue
            for rank in _ranks(n, root):
                one = spec.build(op, n, count, root=root, layout=layout, segments=segments, rank=rank)
                assert one.rank == rank
                assert one == whole.for_rank(rank), (n, count, root, segments, layout and layout.name, rank)


@pytest.mark.parametrize(("name", "op"), ENUMERATES_OWN, ids=[f"{a}-{o.value}" for a, o in ENUMERATES_OWN])
def test_converted_builders_touch_only_the_kept_ranks_transfers(
    name: str, op: Op, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = get_algorithm(name)
    wasted: list[tuple[int, int]] = []
    real = _common.RoundBuilder.transfer

    def counting(self: _common.RoundBuilder, rnd: int, src: int, dst: int, *args: object, **kw: object) -> None:
        if not (self.keeps(src) or self.keeps(dst)):
            wasted.append((src, dst))
        real(self, rnd, src, dst, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(_common.RoundBuilder, "transfer", counting)
    for n in (1, 2, 5, 16, 31, 64):
        for count, root, segments, layout in _builds(spec, op, n):
            for rank in _ranks(n, root):
                wasted.clear()
                try:
                    spec.build(op, n, count, root=root, layout=layout, segments=segments, rank=rank)
                except CollbenchError:
                    # Refused alike whole (hierarchical on one node): the test above holds it to that.
                    continue
                assert not wasted, f"n={n} rank {rank}: {len(wasted)} transfers of other ranks, {wasted[:3]}"


def test_the_verifier_and_simulator_refuse_a_one_rank_schedule() -> None:
    from collbench.models.simulator import UniformLinks
    from collbench.models.simulator import simulate as simulate_time

    one = get_algorithm("ring").build(Op.ALL_REDUCE, 4, 8, rank=1)
    with pytest.raises(ValueError, match="the verifier needs every rank's steps; this ring schedule holds rank 1's"):
        simulate(one)
    with pytest.raises(ValueError, match="the simulator needs every rank's steps"):
        simulate_time(one, UniformLinks(1.0, 0.001, 4), elem_bytes=4)


def test_a_rank_outside_the_world_is_refused() -> None:
    with pytest.raises(CollbenchError, match="rank 4 is not a rank of a world of 4"):
        get_algorithm("ring").build(Op.ALL_REDUCE, 4, 8, rank=4)
