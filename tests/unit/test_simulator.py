"""The simulator against the closed forms on H2's real schedules, and on topologies."""

from __future__ import annotations

import pytest

from collbench.errors import ConfigError
from collbench.models.costs import cost_terms
from collbench.models.simulator import TopologyLinks, UniformLinks, simulate, simulate_terms
from collbench.schedules.analysis import schedule_stats
from collbench.schedules.ops import Op
from collbench.schedules.registry import get_algorithm
from collbench.schedules.spec import sorted_ops
from collbench.topology.host import host_topology

# (algorithm, op, world sizes) where the closed form is exact on the builder's schedule.
EXACT = (
    [("ring", op, (1, 2, 3, 4, 5, 8)) for op in sorted_ops(get_algorithm("ring").ops)]
    + [
        (algo, op, (1, 2, 3, 5, 8))
        for algo in ("one-shot", "direct", "linear", "pairwise", "bruck", "binomial", "dissemination")
        for op in sorted_ops(get_algorithm(algo).ops)
    ]
    + [
        ("recursive-doubling", Op.ALL_REDUCE, (2, 3, 4, 5, 6, 8)),
        ("rabenseifner", Op.ALL_REDUCE, (2, 4, 8)),
        ("tree", Op.BARRIER, (1, 2, 3, 4, 5, 8, 13)),
    ]
)


@pytest.mark.parametrize(("algo", "op", "sizes"), EXACT, ids=lambda v: str(v))
def test_simulator_agrees_with_closed_form(algo: str, op: Op, sizes: tuple[int, ...]) -> None:
    spec = get_algorithm(algo)
    for p in sizes:
        count = p * 96  # divisible by p, so chunks are equal
        schedule = spec.build(op, p, count)
        steps, nbytes, reduced = simulate_terms(schedule)
        closed = cost_terms(op, algo, p, count * 4)
        assert steps == closed.alpha, (p, "steps")
        assert nbytes == pytest.approx(closed.beta), (p, "bytes")
        assert reduced == pytest.approx(closed.gamma), (p, "reduced bytes")


@pytest.mark.parametrize("algo", ["tree", "two-tree", "rabenseifner"])
def test_step_count_agrees_for_the_approximate_forms(algo: str) -> None:
    spec = get_algorithm(algo)
    for p in (2, 4, 8, 16):
        schedule = spec.build(Op.ALL_REDUCE, p, p * 96)
        steps, _, _ = simulate_terms(schedule)
        assert steps == cost_terms(Op.ALL_REDUCE, algo, p, p * 384).alpha


def test_busiest_link_matches_the_schedule_analysis() -> None:
    schedule = get_algorithm("ring").build(Op.ALL_REDUCE, 6, 600)
    result = simulate(schedule, UniformLinks(1.0, 1e-3, 6))
    stats = schedule_stats(schedule, 4)
    assert result.busiest_link_bytes == stats.busiest_link_bytes
    closed = cost_terms(Op.ALL_REDUCE, "ring", 6, 2400)
    assert result.busiest_link_bytes == pytest.approx(closed.beta)
    assert result.time_us == pytest.approx(closed.time_us(1.0, 1e-3, 0.0))


def test_a_slow_link_slows_the_ring() -> None:
    topo = host_topology(4)
    schedule = get_algorithm("ring").build(Op.ALL_REDUCE, 4, 1 << 16)
    fast = simulate(schedule, TopologyLinks(topo))
    uniform = simulate(schedule, UniformLinks(2.0, 1e-3, 4, nodes=2, inter_us_per_byte=1e-2))
    base = simulate(schedule, UniformLinks(2.0, 1e-3, 4))
    assert uniform.time_us > base.time_us
    assert fast.time_us > 0
    assert len(fast.rank_end_us) == 4


def test_bad_inputs() -> None:
    with pytest.raises(ConfigError):
        UniformLinks(1.0, 1.0, world_size=6, nodes=4)
