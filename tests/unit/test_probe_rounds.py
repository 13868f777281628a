"""The probe's rounds as each rank finds them alone: its partner per round in O(1), the same pairs as
the circle method's table, and a default timeout that grows with the rounds; which pairs it measures
(every pair of ranks up to 64, by nodes beyond)."""

from __future__ import annotations

import pytest

from collbench.runtime import probe
from collbench.runtime.probe import ProbeConfig, default_timeout_s, partner, round_robin_rounds, rounds_for
from collbench.runtime.probe_pairs import ALL_PAIRS_MAX_RANKS, NODE_ROUNDS, Pairs, by_nodes


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 16, 17, 33])
def test_each_ranks_partner_is_the_tables(n: int) -> None:
    table = round_robin_rounds(n)
    assert rounds_for(n) == len(table)
    for k, pairs in enumerate(table):
        expected: dict[int, int | None] = dict.fromkeys(range(n))
        for a, b in pairs:
            expected[a], expected[b] = b, a
        assert {r: partner(n, r, k) for r in range(n)} == expected


def test_every_pair_of_a_large_job_meets_once_without_the_table() -> None:
    n = 257  # odd: one rank sits out each round
    met = [set() for _ in range(n)]
    for k in range(rounds_for(n)):
        for r in range(n):
            p = partner(n, r, k)
            if p is not None:
                assert partner(n, p, k) == r
                assert p not in met[r]
                met[r].add(p)
    assert all(len(m) == n - 1 for m in met)


def test_the_default_timeout_grows_with_the_rounds() -> None:
    assert default_timeout_s(4) == pytest.approx(60 + 3 * 3.2)
    assert default_timeout_s(16) == pytest.approx(60 + 15 * 3.2)
    assert default_timeout_s(1024) == pytest.approx(60 + 1023 * 3.2)
    slow = ProbeConfig(repeats=5, target_s=0.5)
    assert default_timeout_s(8, slow) == pytest.approx(60 + 7 * 4 * 6 * 0.5)


def test_which_pairs_the_probe_measures() -> None:
    # auto: every pair of ranks up to 64 ranks (what small jobs want), by nodes beyond; the others as asked.
    assert [by_nodes("auto", n) for n in (2, ALL_PAIRS_MAX_RANKS, ALL_PAIRS_MAX_RANKS + 1, 16384)] == [
        False,
        False,
        True,
        True,
    ]
    assert by_nodes("nodes", 2) and not by_nodes("all", 16384)


def test_by_nodes_the_default_timeout_does_not_grow_with_the_job() -> None:
    # A node of up to 72 ranks (71 rounds) and 16 rounds between nodes, whatever the job's size.
    by_nodes_s = 60 + (71 + NODE_ROUNDS) * 3.2
    assert default_timeout_s(1024, pairs="auto") == pytest.approx(by_nodes_s)
    assert default_timeout_s(16384, pairs="auto") == pytest.approx(by_nodes_s)
    assert default_timeout_s(8, pairs="nodes") == pytest.approx(60 + (7 + NODE_ROUNDS) * 3.2)
    assert default_timeout_s(64, pairs="auto") == pytest.approx(60 + 63 * 3.2)


@pytest.mark.parametrize("pairs", ["auto", "nodes"])
def test_local_ranks_by_nodes_get_the_rounds_of_their_one_node(monkeypatch: pytest.MonkeyPatch, pairs: Pairs) -> None:
    # 128 ranks spawned here are one node of 128: 127 rounds within it, none between nodes, where the
    # default for a job of several nodes allows a node of 72 (87 rounds): the probe timed out.
    asked: list[float] = []

    def launch(*args: object, timeout_s: float, **kwargs: object) -> list[None]:
        asked.append(timeout_s)
        return [None]  # as on a rank other than 0: nothing to build

    monkeypatch.setattr(probe, "joined_job", lambda: None)
    monkeypatch.setattr(probe, "launch", launch)
    assert probe.probe_topology(128, backend="gloo", pairs=pairs) is None
    assert asked == [pytest.approx(60 + 127 * 3.2)]
