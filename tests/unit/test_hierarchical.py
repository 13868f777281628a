"""``hierarchical``: rings inside each node and across nodes, from the layout's nodes.

Verified for 1..17 ranks on 1..4 nodes (nodes of different sizes and one node refused with the
reason), with nodes as blocks of ranks and interleaved; its two-class cost equals the simulated
schedule on links that differ inside and across nodes; it crosses the network in 2(m-1) steps where
the flat ring takes 2(mk-1).
"""

from __future__ import annotations

import pytest

from collbench.errors import NotApplicableError
from collbench.layouts.model import Layout
from collbench.models.costs import cost_terms
from collbench.models.simulator import UniformLinks, simulate
from collbench.schedules.algorithms.hierarchical import hierarchical_terms
from collbench.schedules.ops import Op, chunk_bounds
from collbench.schedules.registry import get_algorithm
from collbench.schedules.verifier import verify

OPS = (Op.ALL_REDUCE, Op.REDUCE_SCATTER, Op.ALL_GATHER)
HIER = get_algorithm("hierarchical")


def _blocks(n: int, m: int) -> tuple[tuple[int, ...], ...]:
    # Contiguous ranks per node, the first n % m nodes one larger.
    return tuple(tuple(range(a, z)) for a, z in chunk_bounds(n, m))


def _interleaved(n: int, m: int) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(range(i, n, m)) for i in range(m))


def test_it_does_the_three_and_needs_nodes() -> None:
    assert HIER.ops == frozenset(OPS) and HIER.needs_nodes


@pytest.mark.parametrize("op", OPS)
def test_every_world_size_on_one_to_four_nodes(op: Op) -> None:
    for n in range(1, 18):
        for m in range(1, 5):
            if m > n:
                continue
            for nodes in {_blocks(n, m), _interleaved(n, m)}:
                layout = Layout(nodes=nodes, name="topology")
                even = n % m == 0
                for count in (0, 1, n - 1, n, 2 * n + 3, 101):
                    if m == 1:
                        with pytest.raises(NotApplicableError, match="two or more nodes"):
                            HIER.build(op, n, count, layout=layout)
                    elif not even:
                        with pytest.raises(NotApplicableError, match="same number of ranks on every node"):
                            HIER.build(op, n, count, layout=layout)
                    else:
                        schedule = HIER.build(op, n, count, layout=layout)
                        verify(schedule)
                        assert ("nodes", m) in schedule.params


def test_without_a_layout_it_says_why() -> None:
    with pytest.raises(NotApplicableError, match="no layout"):
        HIER.build(Op.ALL_REDUCE, 4, 8)
    with pytest.raises(NotApplicableError, match="one node"):
        HIER.build(Op.ALL_REDUCE, 4, 8, layout=Layout(nodes=((0, 1, 2, 3),)))
    with pytest.raises(NotApplicableError, match="hold 1, 3"):
        HIER.build(Op.ALL_REDUCE, 4, 8, layout=Layout(nodes=((0,), (1, 2, 3))))


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(("m", "k"), [(2, 2), (2, 3), (3, 2), (4, 4), (3, 5)])
def test_two_class_cost_is_the_simulated_schedule(op: Op, m: int, k: int) -> None:
    n = m * k
    count = 4 * n * k * m  # every shard, chunk and piece whole
    schedule = HIER.build(op, n, count, layout=Layout(nodes=_blocks(n, m)))
    intra_a, intra_b, inter_a, inter_b = 1.5, 0.001, 9.0, 0.02
    links = UniformLinks(intra_a, intra_b, n, nodes=m, inter_latency_us=inter_a, inter_us_per_byte=inter_b)
    simulated = simulate(schedule, links, elem_bytes=4).time_us
    inside, across = hierarchical_terms(op, m, k, count * 4.0)
    closed = inside.alpha * intra_a + inside.beta * intra_b + across.alpha * inter_a + across.beta * inter_b
    assert simulated == pytest.approx(closed)


def test_inter_node_steps_are_divided_by_the_ranks_per_node() -> None:
    # 4 nodes of 6: the flat ring crosses 2(24-1) = 46 steps, each as slow as a network hop;
    # hierarchical's network part is 2(4-1) = 6 steps carrying 1/6 of the buffer each.
    _, across = hierarchical_terms(Op.ALL_REDUCE, 4, 6, 1.0)
    assert across.alpha == 6 and across.beta == pytest.approx(2 * 3 / 4 / 6)
    assert cost_terms(Op.ALL_REDUCE, "ring", 24, 1.0).alpha == 46


def test_one_class_models_refuse_it() -> None:
    with pytest.raises(NotApplicableError, match="two link classes"):
        cost_terms(Op.ALL_REDUCE, "hierarchical", 8, 1024.0)
