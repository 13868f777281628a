"""The algorithms of the ops that move data without reducing it, and of barrier: their shapes (who
talks to whom in which step), their prices, and broken variants the verifier must catch.

test_verifier.py proves every (op, algorithm) pair for world sizes 1..17; test_costs.py checks every
formula against the simulated schedule for p = 1..32. Here: what those cannot see."""

from __future__ import annotations

from dataclasses import replace

import pytest

from collbench.layouts.model import Layout
from collbench.models.costs import cost_terms
from collbench.models.simulator import TopologyLinks, UniformLinks, simulate, simulate_terms
from collbench.schedules.algorithms.alltoall import bits_set_below
from collbench.schedules.analysis import schedule_stats
from collbench.schedules.cost import ceil_log2
from collbench.schedules.ir import Schedule, Step
from collbench.schedules.ops import Op, block_bounds
from collbench.schedules.registry import algorithms_for, get_algorithm
from collbench.schedules.verifier import ScheduleError, verify
from collbench.schedules.whiteboard import build_whiteboard, move_text, piece_ranges
from collbench.topology.host import host_topology


def _build(algo: str, op: Op, n: int, count: int, root: int = 0) -> Schedule:
    schedule = get_algorithm(algo).build(op, n, count, root=root)
    verify(schedule)
    return schedule


def _peers(step: Step) -> tuple[set[int], set[int]]:
    return {s.peer for s in step.sends}, {r.peer for r in step.recvs}


def _with_steps(schedule: Schedule, rank: int, steps: list[Step]) -> Schedule:
    all_steps = list(schedule.steps)
    all_steps[rank] = tuple(steps)
    return replace(schedule, steps=tuple(all_steps))


def test_every_new_op_runs_linear_binomial_and_native_or_its_own() -> None:
    """``--op scatter --algo all`` gets linear, binomial and native; each new op has its algorithms."""
    names = {op: [s.name for s in algorithms_for(op)] for op in Op}
    a2a = names[Op.ALL_TO_ALL]
    assert {"pairwise", "bruck", "linear"} <= set(a2a) and a2a[-1] == "native"
    assert names[Op.SCATTER] == ["binomial", "linear", "native"]
    assert names[Op.GATHER] == ["binomial", "linear", "native"]
    assert names[Op.BARRIER] == ["tree", "dissemination", "native"]
    assert names[Op.SENDRECV] == ["ring", "native"]


# -- all-to-all ------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_linear_all_to_all_is_one_step_of_every_pair(n: int) -> None:
    count = 6 * n
    schedule = _build("linear", Op.ALL_TO_ALL, n, count)
    blocks = block_bounds(count, n)
    for r in range(n):
        (step,) = schedule.steps[r]
        sends, recvs = _peers(step)
        assert sends == recvs == set(range(n))
        own = [s for s in step.sends if s.peer == r]
        assert [(s.start, s.stop) for s in own] == [blocks[r]]
    stats = schedule_stats(schedule, 4)
    # The local copy is no traffic: n-1 blocks of 6 elements out of each rank.
    assert stats.bytes_sent_per_rank == tuple([(n - 1) * 6 * 4] * n)
    assert stats.steps == (1 if n > 1 else 0)
    assert cost_terms(Op.ALL_TO_ALL, "linear", n, count * 4).message_count == (n - 1 if n > 1 else 0)


@pytest.mark.parametrize("n", [2, 3, 4, 7])
def test_pairwise_step_k_sends_to_r_plus_k_and_receives_from_r_minus_k(n: int) -> None:
    schedule = _build("pairwise", Op.ALL_TO_ALL, n, 4 * n)
    for r in range(n):
        assert len(schedule.steps[r]) == n - 1
        for k, step in enumerate(schedule.steps[r], start=1):
            sends, recvs = _peers(step)
            extra = {r} if k == 1 else set()  # the own block's copy rides in the first step
            assert sends == {(r + k) % n} | extra
            assert recvs == {(r - k) % n} | extra


@pytest.mark.parametrize("n", [2, 3, 5, 8, 13, 16, 17])
def test_bruck_takes_ceil_log2_steps_and_one_block_per_set_bit(n: int) -> None:
    count = 10 * n
    schedule = _build("bruck", Op.ALL_TO_ALL, n, count)
    stats = schedule_stats(schedule, 1)
    assert stats.steps == ceil_log2(n)
    # Every rank sends, in all, one block per set bit of the distances 1..n-1.
    assert stats.bytes_sent_per_rank == tuple([bits_set_below(n) * 10] * n)
    assert bits_set_below(n) == sum(bin(i).count("1") for i in range(n))
    for r in range(n):
        for k, step in enumerate(schedule.steps[r]):
            sends, _ = _peers(step)
            assert sends - {r} == {(r + (1 << k)) % n}


def test_bruck_beats_pairwise_on_latency_and_loses_on_bytes_at_64_ranks() -> None:
    bruck = cost_terms(Op.ALL_TO_ALL, "bruck", 64, 1 << 20)
    pairwise = cost_terms(Op.ALL_TO_ALL, "pairwise", 64, 1 << 20)
    linear = cost_terms(Op.ALL_TO_ALL, "linear", 64, 1 << 20)
    assert (bruck.alpha, bruck.message_count) == (6, 6)
    assert (pairwise.alpha, pairwise.message_count) == (63, 63)
    assert (linear.alpha, linear.message_count) == (1, 63)
    assert bruck.beta == pytest.approx(6 * 32 / 64 * (1 << 20))  # 64 * 6 / 2 set bits in 0..63
    assert pairwise.beta == linear.beta == pytest.approx(63 / 64 * (1 << 20))


def test_a_block_sent_to_the_wrong_rank_is_caught() -> None:
    schedule = get_algorithm("linear").build(Op.ALL_TO_ALL, 3, 6)
    (step,) = schedule.steps[0]
    # Rank 0 sends its block for rank 2 to rank 1 and the one for rank 1 to rank 2 (same sizes).
    swapped = tuple(replace(s, peer={1: 2, 2: 1}.get(s.peer, s.peer)) for s in step.sends)
    with pytest.raises(
        ScheduleError,
        match=r"rank 1 element 6 holds the contribution of rank 0 to element 4, "
        r"but all-to-all needs the contribution of rank 0 to element 2",
    ):
        verify(_with_steps(schedule, 0, [replace(step, sends=swapped)]))


@pytest.mark.parametrize("algo", ["linear", "pairwise", "bruck"])
def test_a_missing_self_copy_is_caught(algo: str) -> None:
    schedule = get_algorithm(algo).build(Op.ALL_TO_ALL, 4, 8)
    steps = list(schedule.steps[2])
    first = steps[0]
    steps[0] = replace(
        first,
        sends=tuple(s for s in first.sends if s.peer != 2),
        recvs=tuple(r for r in first.recvs if r.peer != 2),
    )
    with pytest.raises(ScheduleError, match="rank 2 element 12 holds no defined data"):
        verify(_with_steps(schedule, 2, steps))


def test_all_to_all_out_of_place_keeps_the_tail_out() -> None:
    # 11 elements over 4 ranks: blocks of 2, the last 3 are not part of the op (nccl-tests rounds down).
    schedule = _build("bruck", Op.ALL_TO_ALL, 4, 11)
    touched = {x for steps in schedule.steps for st in steps for s in st.sends for x in range(s.start, s.stop)}
    assert touched <= set(range(8))


# -- scatter and gather ----------------------------------------------------------------------------


@pytest.mark.parametrize("root", [0, 2, 4])
def test_binomial_scatter_halves_the_biggest_subtree_first(root: int) -> None:
    n = 5
    schedule = _build("binomial", Op.SCATTER, n, 10, root=root)
    first = schedule.steps[root][0]
    # Relative rank 4 (the upper half of 8 relative slots, cut to 5 ranks) gets its one block first.
    assert [(s.peer, s.start, s.stop) for s in first.sends] == [
        ((root + 4) % n, (root + 4) % n * 2, (root + 4) % n * 2 + 2)
    ]
    assert len(schedule.steps[root]) == 3
    stats = schedule_stats(schedule, 1)
    assert stats.steps == 3 and stats.bytes_sent_per_rank[root] == (n - 1) * 2


def test_binomial_blocks_stay_in_place_and_wrap_past_the_last_rank_as_two_ranges() -> None:
    # Gather to root 2 of 4: relative ranks 2, 3 are real ranks 0, 1, whose blocks rank 0 brings last.
    schedule = _build("binomial", Op.GATHER, 4, 8, root=2)
    assert [(r.peer, r.start, r.stop) for r in schedule.steps[2][-1].recvs] == [(0, 0, 4)]
    # Scatter from root 3 of 6: relative ranks 2, 3 are real ranks 5 and 0, one block each side of the end.
    wrapped = _build("binomial", Op.SCATTER, 6, 12, root=3)
    assert [(s.peer, s.start, s.stop) for s in wrapped.steps[3][1].sends] == [(5, 10, 12), (5, 0, 2)]


@pytest.mark.parametrize(("algo", "steps"), [("linear", 1), ("binomial", 3)])
def test_scatter_and_gather_price_the_roots_port(algo: str, steps: int) -> None:
    for op in (Op.SCATTER, Op.GATHER):
        terms = cost_terms(op, algo, 7, 7000)
        assert terms.alpha == steps and terms.beta == pytest.approx(6000)
        # Linear's root posts its 6 messages at once; binomial's one a step.
        assert terms.message_count == (6 if algo == "linear" else steps)
        simulated = simulate_terms(get_algorithm(algo).build(op, 7, 1750, root=3))
        assert simulated == (steps, pytest.approx(6000.0), 0.0)


@pytest.mark.parametrize("algo", ["linear", "binomial"])
def test_a_gather_that_drops_a_block_is_caught(algo: str) -> None:
    n, root = 5, 1
    schedule = get_algorithm(algo).build(Op.GATHER, n, 10, root=root)
    # Rank 1 (the root) takes in nothing in its last step, and whoever sent there sends nothing.
    steps = list(schedule.steps[root])
    dropped = steps[-1].recvs[-1]
    steps[-1] = replace(steps[-1], recvs=steps[-1].recvs[:-1])
    broken = _with_steps(schedule, root, steps)
    sender = list(broken.steps[dropped.peer])
    sender[-1] = replace(sender[-1], sends=tuple(s for s in sender[-1].sends if s.peer != root))
    with pytest.raises(ScheduleError, match=rf"rank {root} element {dropped.start} holds no defined data"):
        verify(_with_steps(broken, dropped.peer, sender))


def test_a_scatter_from_the_wrong_root_is_caught() -> None:
    schedule = get_algorithm("linear").build(Op.SCATTER, 4, 8, root=1)
    with pytest.raises(ScheduleError, match="holds no defined data"):
        verify(replace(schedule, root=2))


# -- send/recv and barrier -------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 6])
def test_sendrecv_is_one_shift_in_rank_order_whatever_the_layout(n: int) -> None:
    layout = Layout(rings=(tuple(reversed(range(n))),), name="topology")
    schedule = get_algorithm("ring").build(Op.SENDRECV, n, 5, layout=layout)
    verify(schedule)
    for r in range(n):
        (step,) = schedule.steps[r]
        assert [(s.peer, s.start, s.stop) for s in step.sends] == [((r + 1) % n, 0, 5)]
        assert [(v.peer, v.start, v.stop) for v in step.recvs] == [((r - 1) % n, 5, 10)]
    assert cost_terms(Op.SENDRECV, "ring", n, 20) == cost_terms(Op.SENDRECV, "native", n, 20)


def test_a_shift_the_wrong_way_is_caught() -> None:
    schedule = get_algorithm("ring").build(Op.SENDRECV, 3, 4)
    steps = tuple(
        (Step(sends=(replace(s.sends[0], peer=(r - 1) % 3),), recvs=(replace(s.recvs[0], peer=(r + 1) % 3),)),)
        for r, (s,) in enumerate(schedule.steps)
    )
    with pytest.raises(
        ScheduleError,
        match=r"rank 0 element 4 holds the contribution of rank 1 to element 0, "
        r"but sendrecv needs the contribution of rank 2",
    ):
        verify(replace(schedule, steps=steps))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 9, 17])
def test_dissemination_takes_ceil_log2_rounds_of_one_token(n: int) -> None:
    schedule = _build("dissemination", Op.BARRIER, n, 1 << 20)
    assert schedule.count == 0 and schedule.buffer_elems == 1
    assert all(len(steps) == ceil_log2(n) for steps in schedule.steps)
    for r in range(n):
        for k, step in enumerate(schedule.steps[r]):
            assert _peers(step) == ({(r + (1 << k)) % n}, {(r - (1 << k)) % n})
    stats = schedule_stats(schedule, 4)
    assert stats.steps == ceil_log2(n) and stats.total_bytes == 0
    assert simulate_terms(schedule) == (ceil_log2(n), 0.0, 0.0)


def test_tree_barrier_goes_up_and_back_down() -> None:
    schedule = _build("tree", Op.BARRIER, 7, 0)
    # The heap tree over 7 ranks has depth 2: two rounds up, two down.
    assert schedule_stats(schedule, 4).steps == 4 == cost_terms(Op.BARRIER, "tree", 7, 0).alpha
    assert schedule.params == ()


def test_a_barrier_missing_its_last_round_is_caught() -> None:
    schedule = get_algorithm("dissemination").build(Op.BARRIER, 5, 0)
    broken = replace(schedule, steps=tuple(steps[:-1] for steps in schedule.steps))
    with pytest.raises(ScheduleError, match="needs the contributions of ranks"):
        verify(broken)


# -- the simulator on real links -------------------------------------------------------------------


def test_local_copies_need_no_link_and_cost_nothing() -> None:
    # A host topology has no link from a rank to itself: the own block must never ask for one.
    schedule = get_algorithm("pairwise").build(Op.ALL_TO_ALL, 4, 1 << 12)
    assert simulate(schedule, TopologyLinks(host_topology(4))).time_us > 0
    alone = get_algorithm("linear").build(Op.ALL_TO_ALL, 1, 1 << 12)
    assert simulate(alone, UniformLinks(5.0, 1.0, 1)).time_us == 0.0
    shift = get_algorithm("ring").build(Op.SENDRECV, 1, 100)
    assert simulate_terms(shift) == (0.0, 0.0, 0.0)


# -- the whiteboard --------------------------------------------------------------------------------


def test_whiteboard_cuts_every_block_and_says_where_moved_blocks_were_read() -> None:
    schedule = get_algorithm("pairwise").build(Op.ALL_TO_ALL, 3, 7)
    # Blocks of 2 in the input and the output; the tail (element 6) is outside the op but on the board.
    assert piece_ranges(schedule) == [(0, 2), (2, 4), (4, 6), (6, 7), (7, 9), (9, 11), (11, 13), (13, 14)]
    board = build_whiteboard(schedule)
    first = {(m.src, m.dst): m for m in board.steps[0].moves}
    assert first[(0, 0)].is_local_copy and move_text(first[(0, 0)]) == "0→4"
    assert move_text(first[(0, 1)]) == "1→4"
    gather = build_whiteboard(get_algorithm("binomial").build(Op.GATHER, 3, 6, root=0))
    assert all(not m.from_pieces for step in gather.steps for m in step.moves)
    assert [move_text(m) for m in gather.steps[-1].moves] == ["2"]
