"""The builders: which ops each implements, their shapes (steps, bytes), layouts and bad parameters."""

from __future__ import annotations

import importlib
import math
import pkgutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collbench.schedules.algorithms
from collbench.errors import ConfigError, NotApplicableError, UnknownNameError
from collbench.layouts.model import Layout
from collbench.schedules.analysis import schedule_stats
from collbench.schedules.ops import CLASSIC_OPS, Op, chunk_bounds
from collbench.schedules.registry import SPECS, algorithm_names, get_algorithm
from collbench.schedules.spec import MAX_SEGMENTS
from collbench.schedules.verifier import verify

EXPECTED_OPS = {
    "ring": {*CLASSIC_OPS, Op.SENDRECV},
    "hierarchical": {Op.ALL_REDUCE, Op.REDUCE_SCATTER, Op.ALL_GATHER},
    "tree": {Op.ALL_REDUCE, Op.BROADCAST, Op.REDUCE, Op.BARRIER},
    "two-tree": {Op.ALL_REDUCE, Op.BROADCAST, Op.REDUCE},
    "recursive-doubling": {Op.ALL_REDUCE, Op.ALL_GATHER, Op.SCAN, Op.EXSCAN},
    "rabenseifner": {Op.ALL_REDUCE, Op.REDUCE_SCATTER, Op.REDUCE},
    "pairwise": {Op.ALL_TO_ALL},
    "bruck": {Op.ALL_TO_ALL},
    "topo-pairwise": {Op.ALL_TO_ALL},
    "binomial": {Op.SCATTER, Op.GATHER},
    "dissemination": {Op.BARRIER},
    "blelloch": {Op.SCAN, Op.EXSCAN},
    "direct": set(CLASSIC_OPS),
    "one-shot": set(CLASSIC_OPS),
    "linear": {Op.ALL_TO_ALL, Op.SCATTER, Op.GATHER, Op.SCAN, Op.EXSCAN},
}
# hierarchical builds only from a layout with nodes: tests/unit/test_hierarchical.py covers it.
BUILT = sorted(name for name in EXPECTED_OPS if name != "hierarchical")


def test_registry_holds_every_family_and_native() -> None:
    assert set(algorithm_names()) == {*EXPECTED_OPS, "native"}
    for name, ops in EXPECTED_OPS.items():
        assert set(get_algorithm(name).ops) == ops, name


def test_registry_order_is_how_every_listing_orders_algorithms() -> None:
    # ``--algo all`` and tune list algorithms in this order: bandwidth-optimal first, native last.
    assert algorithm_names() == [
        "ring",
        "hierarchical",
        "tree",
        "two-tree",
        "recursive-doubling",
        "rabenseifner",
        "pairwise",
        "bruck",
        "topo-pairwise",
        "binomial",
        "dissemination",
        "blelloch",
        "direct",
        "one-shot",
        "linear",
        "native",
    ]


def test_every_algorithm_module_is_in_the_registry() -> None:
    """A module's SPECS that the registry's list leaves out would never run: adding one is both."""
    registered = set(SPECS)
    for info in pkgutil.iter_modules(collbench.schedules.algorithms.__path__):
        module = importlib.import_module(f"collbench.schedules.algorithms.{info.name}")
        specs = getattr(module, "SPECS", None)
        if info.name.startswith("_"):
            assert specs is None, info.name
            continue
        assert specs, f"{info.name} exports no SPECS"
        assert set(specs) <= registered, info.name


def test_segments_for_a_size() -> None:
    tree, ring, direct = get_algorithm("tree"), get_algorithm("ring"), get_algorithm("direct")
    assert tree.segments_for(1 << 20, 1 << 18) == 4
    assert tree.segments_for((1 << 20) + 1, 1 << 18) == 5
    assert tree.segments_for(1, 1 << 18) == 1
    assert tree.segments_for(0, 1 << 18) == 1
    assert tree.segments_for(1 << 30, 1 << 10) == MAX_SEGMENTS
    assert tree.segments_for(1 << 20, None) == tree.segments_for(1 << 20, 0) == 1
    assert ring.segments_for(1 << 20, 1 << 18) == 4
    assert direct.segments_for(1 << 20, 1 << 18) == 1


def test_unsupported_op_says_so_in_one_line() -> None:
    with pytest.raises(NotApplicableError) as info:
        get_algorithm("recursive-doubling").build(Op.BROADCAST, 4, 16)
    message = str(info.value)
    assert "\n" not in message
    assert "does not implement broadcast" in message and "all-reduce, all-gather" in message


def test_unknown_algorithm_lists_known_ones() -> None:
    with pytest.raises(UnknownNameError, match="ring"):
        get_algorithm("butterfly")


@pytest.mark.parametrize("name", BUILT)
def test_bad_count_and_segments(name: str) -> None:
    spec = get_algorithm(name)
    op = next(iter(spec.ops))
    with pytest.raises(ConfigError, match="count"):
        spec.build(op, 4, -1)
    with pytest.raises(ConfigError, match="segments"):
        spec.build(op, 4, 8, segments=0)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 13])
def test_ring_all_reduce_shape(n: int) -> None:
    count = 12 * n
    schedule = get_algorithm("ring").build(Op.ALL_REDUCE, n, count)
    stats = schedule_stats(schedule, 4)
    assert stats.steps == 2 * (n - 1)
    # Each rank sends 2(n-1) chunks of count/n elements: 2(n-1)/n of the buffer.
    assert stats.bytes_sent_per_rank == tuple([2 * (n - 1) * 12 * 4] * n)
    assert stats.busiest_link_bytes == 2 * (n - 1) * 12 * 4


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 16])
def test_recursive_step_counts(n: int) -> None:
    p = 1 << (n.bit_length() - 1)
    fold = 2 if n != p else 0
    rd = get_algorithm("recursive-doubling").build(Op.ALL_REDUCE, n, 64)
    assert schedule_stats(rd, 4).steps == int(math.log2(p)) + fold
    rab = get_algorithm("rabenseifner").build(Op.ALL_REDUCE, n, 64)
    assert schedule_stats(rab, 4).steps == 2 * int(math.log2(p)) + fold
    if n == p:
        # Rabenseifner moves 2(p-1)/p of the buffer per rank, like ring, in 2 lg p steps.
        assert schedule_stats(rab, 1).max_bytes_sent_per_rank == 2 * (p - 1) * 64 // p


def test_direct_and_one_shot_traffic() -> None:
    n, count = 5, 100
    direct = schedule_stats(get_algorithm("direct").build(Op.ALL_REDUCE, n, count, root=2), 1)
    assert direct.steps == 2
    assert direct.bytes_sent_per_rank[2] == (n - 1) * count
    assert direct.busiest_port_bytes == (n - 1) * count
    one = schedule_stats(get_algorithm("one-shot").build(Op.ALL_REDUCE, n, count), 1)
    assert one.steps == 1
    assert one.total_bytes == n * (n - 1) * count


@pytest.mark.parametrize("segments", [1, 2, 5])
def test_pipelined_tree_step_count(segments: int) -> None:
    # Heap tree over 7 ranks has depth 2: reduce up (2 + S - 1) and broadcast down overlap after it.
    schedule = get_algorithm("tree").build(Op.BROADCAST, 7, 100, segments=segments)
    assert schedule_stats(schedule, 4).steps == 2 + segments - 1
    reduce = get_algorithm("tree").build(Op.REDUCE, 7, 100, segments=segments)
    assert schedule_stats(reduce, 4).steps == 2 + segments - 1
    all_reduce = get_algorithm("tree").build(Op.ALL_REDUCE, 7, 100, segments=segments)
    assert schedule_stats(all_reduce, 4).steps == 2 * 2 + segments - 1


def test_two_tree_splits_data_across_trees() -> None:
    schedule = get_algorithm("two-tree").build(Op.ALL_REDUCE, 8, 80)
    verify(schedule)
    stats = schedule_stats(schedule, 1)
    # Every rank is interior in at most one tree: up and twice down there, only up in the other tree,
    # so nobody sends more than 4 halves (a rank interior in both would send 6).
    assert stats.max_bytes_sent_per_rank == 4 * 40
    assert stats.bytes_sent_per_rank[0] == stats.bytes_sent_per_rank[7] == 2 * 40
    rooted = get_algorithm("two-tree").build(Op.BROADCAST, 8, 80, root=3)
    verify(rooted)
    first_moves = {(3, s.peer, s.start) for s in rooted.steps[3][0].sends}
    assert len(first_moves) == 2 and {start for _, _, start in first_moves} == {0, 40}


def test_ring_follows_layout_rings_as_channels() -> None:
    rings = ((0, 2, 1, 3), (0, 3, 1, 2))
    layout = Layout(rings=rings, name="topology")
    schedule = get_algorithm("ring").build(Op.ALL_REDUCE, 4, 64, layout=layout)
    verify(schedule)
    assert schedule.layout == "topology" and ("channels", 2) in schedule.params
    pairs = {(r, s.peer) for r in range(4) for step in schedule.steps[r] for s in step.sends}
    expected = {(ring[i], ring[(i + 1) % 4]) for ring in rings for i in range(4)}
    assert pairs == expected
    for op in (Op.REDUCE_SCATTER, Op.ALL_GATHER, Op.BROADCAST, Op.REDUCE):
        verify(get_algorithm("ring").build(op, 4, 37, layout=layout, root=1, segments=3))


def test_tree_uses_layout_tree() -> None:
    parent = (1, -1, 1, 2)
    schedule = get_algorithm("tree").build(Op.ALL_REDUCE, 4, 8, layout=Layout(trees=(parent,)))
    verify(schedule)
    pairs = {(r, s.peer) for r in range(4) for step in schedule.steps[r] for s in step.sends}
    assert pairs == {(0, 1), (2, 1), (3, 2), (1, 0), (1, 2), (2, 3)}


def test_layout_of_another_size_is_rejected() -> None:
    layout = Layout(rings=((0, 1, 2),))
    with pytest.raises(ConfigError, match="3 ranks but the schedule has 4"):
        get_algorithm("ring").build(Op.ALL_REDUCE, 4, 8, layout=layout)


def test_reduce_scatter_chunks_end_at_owners() -> None:
    schedule = get_algorithm("ring").build(Op.REDUCE_SCATTER, 3, 7)
    last_recv = {r: schedule.steps[r][-1].recvs[0] for r in range(3)}
    for r, (a, z) in enumerate(chunk_bounds(7, 3)):
        assert (last_recv[r].start, last_recv[r].stop) == (a, z)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(BUILT),
    st.integers(min_value=1, max_value=24),
    st.integers(min_value=0, max_value=300),
    st.integers(min_value=1, max_value=6),
    st.data(),
)
def test_any_build_verifies(name: str, n: int, count: int, segments: int, data: st.DataObject) -> None:
    spec = get_algorithm(name)
    op = data.draw(st.sampled_from(sorted(spec.ops, key=list(Op).index)))
    root = data.draw(st.integers(min_value=0, max_value=n - 1))
    verify(spec.build(op, n, count, root=root, segments=segments))


def test_a_send_and_a_receive_check_their_range_alike_and_never_compare_equal() -> None:
    from collbench.schedules.ir import Recv, Send

    assert Send(1, 2, 6).count == Recv(1, 2, 6, reduce=True).count == 4
    for made in (lambda: Send(0, 5, 4), lambda: Recv(0, 5, 4, reduce=False), lambda: Send(0, -1, 3)):
        with pytest.raises(AssertionError, match="bad range"):
            made()
    assert Send(1, 0, 4) != Recv(1, 0, 4, reduce=False)
    assert Send(1, 0, 4) == Send(1, 0, 4) and hash(Send(1, 0, 4)) == hash(Send(1, 0, 4))
