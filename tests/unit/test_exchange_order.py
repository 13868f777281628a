"""The all-to-all's exchange order (layouts/exchange.py) and ``topo-pairwise``, which follows it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.errors import ConfigError
from collbench.layouts.exchange import (
    exchange_order,
    exchange_rounds,
    rank_order_shifts,
    round_robin_partner,
    round_robin_rounds,
    round_time,
    slow_rounds,
    spread_time,
)
from collbench.layouts.model import Layout
from collbench.layouts.plan import plan_layout
from collbench.schedules.ops import Op
from collbench.schedules.registry import get_algorithm
from collbench.schedules.verifier import verify
from collbench.topology.host import host_topology


def _pairs(rounds: tuple[tuple[int, ...], ...]) -> list[tuple[int, int]]:
    return [(a, b) for rnd in rounds for a, b in enumerate(rnd) if a < b]


def _two_slow_pairs(n: int, slow: list[tuple[int, int]]) -> list[list[float]]:
    bw = [[0.0 if i == j else 10.0 for j in range(n)] for i in range(n)]
    for a, b in slow:
        bw[a][b] = bw[b][a] = 1.0
    return bw


def test_round_robin_is_a_tournament() -> None:
    for n in range(1, 18):
        rounds = round_robin_rounds(n)
        assert len(rounds) == (0 if n == 1 else n - 1 if n % 2 == 0 else n)
        assert sorted(_pairs(rounds)) == [(a, b) for a in range(n) for b in range(a + 1, n)]
        for rnd in rounds:
            assert all(rnd[rnd[r]] == r for r in range(n)), "a round pairs ranks"
            assert sum(1 for r in range(n) if rnd[r] == r) == n % 2, "an odd count idles one rank"


def test_a_ranks_round_robin_partner_is_the_tables_without_the_table() -> None:
    # topo-pairwise's one-rank build reads a partner per round; the table is O(n^2) on every rank.
    for n in [*range(1, 34), 64, 101]:
        rounds = round_robin_rounds(n)
        assert [[round_robin_partner(n, k, r) for r in range(n)] for k in range(len(rounds))] == [
            list(rnd) for rnd in rounds
        ]


def test_an_even_fabric_gets_the_round_robin_order() -> None:
    for n in range(1, 18):
        assert exchange_rounds([[0.0 if i == j else 5.0 for j in range(n)] for i in range(n)]) == round_robin_rounds(n)


def test_two_slow_pairs_share_one_round_where_rank_order_needs_two() -> None:
    bw = _two_slow_pairs(4, [(0, 1), (2, 3)])
    rounds = exchange_rounds(bw)
    assert slow_rounds(rounds, bw, 5.0) == 1
    assert len(rounds) == 3
    # Rank order's shifts r -> r+k (send to r+k, receive from r-k), as pairwise runs them: two slow steps.
    shifts = [tuple((r + k) % 4 for r in range(4)) for k in range(1, 4)]
    slow_steps = sum(1 for s in shifts if any(min(bw[r][p], bw[p][r]) < 5.0 for r, p in enumerate(s)))
    assert slow_steps == 2
    assert round_time(rank_order_shifts(4), bw, both_ways=False) / round_time(rounds, bw) == 2.1 / 1.2


def test_many_speed_classes_keep_the_round_robin_order_where_grouping_does_not_pay() -> None:
    # Three speed classes on 8 ranks (PCIe switches under a root): the order kept is never estimated
    # slower than the round-robin one.
    for n in (5, 6, 8, 9):
        bw = [
            [0.0 if i == j else float(1 + (i // 2 == j // 2) * 9 + (i // 4 == j // 4) * 5) for j in range(n)]
            for i in range(n)
        ]
        assert round_time(exchange_rounds(bw), bw) <= round_time(round_robin_rounds(n), bw)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 17), st.data())
def test_every_pair_once_and_rounds_are_matchings(n: int, data: st.DataObject) -> None:
    speeds = st.sampled_from([0.0, 1.0, 10.0, 100.0])
    bw = [[data.draw(speeds) for _ in range(n)] for _ in range(n)]
    rounds = exchange_rounds(bw)
    assert sorted(_pairs(rounds)) == [(a, b) for a in range(n) for b in range(a + 1, n)]
    for rnd in rounds:
        assert all(rnd[rnd[r]] == r for r in range(n))
    schedule = get_algorithm("topo-pairwise").build(
        Op.ALL_TO_ALL, n, data.draw(st.integers(0, 3 * n + 2)), layout=Layout(exchange_rounds=rounds, name="topology")
    )
    verify(schedule)
    assert schedule.layout == ("topology" if rounds else "rank-order")  # one rank: nothing to pair


def test_topo_pairwise_without_a_layout_is_round_robin_and_says_so() -> None:
    for n in range(1, 18):
        schedule = get_algorithm("topo-pairwise").build(Op.ALL_TO_ALL, n, 4 * n + 1)
        verify(schedule)
        assert schedule.layout == "rank-order"
        assert schedule.num_steps == max(1, len(round_robin_rounds(n)))


def test_a_layout_of_another_size_is_refused_in_one_line() -> None:
    layout = Layout(exchange_rounds=round_robin_rounds(4), name="topology")
    with pytest.raises(ConfigError, match="pairs 4 ranks for all-to-all but the schedule has 6"):
        get_algorithm("topo-pairwise").build(Op.ALL_TO_ALL, 6, 12, layout=layout)


def test_the_planned_layout_carries_the_order() -> None:
    layout = plan_layout(host_topology(4), 4)
    assert sorted(_pairs(layout.exchange_rounds)) == [(a, b) for a in range(4) for b in range(a + 1, 4)]


def test_a_thousand_ranks_of_128_nodes_pair_every_pair_once() -> None:
    n = 1024
    bw = [[0.0 if i == j else (1.0 if (i // 8) != (j // 8) else 10.0) for j in range(n)] for i in range(n)]
    rounds = exchange_rounds(bw)
    assert sorted(_pairs(rounds)) == [(a, b) for a in range(n) for b in range(a + 1, n)]
    # The slow (between-node) pairs come first and fill whole rounds: all of them in the first rounds.
    first_fast = next(k for k, rnd in enumerate(rounds) if any(p != r and p // 8 == r // 8 for r, p in enumerate(rnd)))
    assert all(p == r or p // 8 != r // 8 for rnd in rounds[:first_fast] for r, p in enumerate(rnd))


def test_clearly_slow_pairs_are_spread_beside_the_fast_rounds_and_stay_correct() -> None:
    bw = _two_slow_pairs(4, [(0, 1), (2, 3)])
    rounds, spread = exchange_order(bw)
    assert spread == 1 and slow_rounds(rounds[:1], bw, 5.0) == 1 and slow_rounds(rounds[1:], bw, 5.0) == 0
    assert spread_time(rounds, spread, bw) < round_time(rounds, bw)
    layout = Layout(exchange_rounds=rounds, exchange_spread=spread, name="topology")
    for count in (0, 3, 4, 8, 4 * 7 + 2, 400):
        schedule = get_algorithm("topo-pairwise").build(Op.ALL_TO_ALL, 4, count, layout=layout)
        verify(schedule)
        assert schedule.num_steps == (2 if count >= 4 else 0)  # the fast rounds; below one element a block, none
    # An even fabric is never spread: the estimate's free ports would be a fiction there.
    for n in range(1, 12):
        assert exchange_order([[0.0 if i == j else 3.0 for j in range(n)] for i in range(n)])[1] == 0
