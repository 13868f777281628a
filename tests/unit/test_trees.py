"""The standard trees: NCCL's double binary tree exactly, and the shape properties every tree must have."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collbench.layouts.trees import (
    bfs_order,
    binary_tree,
    binomial_tree,
    double_binary_tree,
    tree_children,
    tree_depth,
    tree_root,
)


def _depth_bound(n: int) -> int:
    return math.ceil(math.log2(n)) + 1 if n > 1 else 0


def _assert_tree(parent: tuple[int, ...], n: int) -> None:
    assert len(parent) == n
    assert sum(1 for p in parent if p == -1) == 1
    # tree_depth raises unless every rank is reachable from the root without a cycle.
    assert tree_depth(parent) <= _depth_bound(n)
    assert sorted(bfs_order(parent)) == list(range(n))


def test_double_binary_tree_eight_ranks_matches_nccl() -> None:
    first, second = double_binary_tree(8)
    # Tree 1: 0 -> 4 -> (2, 6); 2 -> (1, 3); 6 -> (5, 7).
    assert first == (-1, 2, 4, 2, 0, 6, 4, 6)
    # Tree 2 mirrors it: rank r plays 7 - r, so 7 is the root and 3 its child.
    assert second == (1, 3, 1, 7, 5, 3, 5, -1)
    assert tree_children(first)[0] == [4]
    assert tree_children(second)[7] == [3]


def test_double_binary_tree_odd_shifts() -> None:
    first, second = double_binary_tree(7)
    # Tree 1: 0 -> 4 -> (2, 6); 2 -> (1, 3); 6 -> 5 (7 is out of range).
    assert first == (-1, 2, 4, 2, 0, 6, 4)
    # Tree 2: rank r plays (r - 1) mod 7, so 1 is the root and its child is 5.
    assert second[1] == -1
    assert tree_children(second)[1] == [5]
    for r in range(7):
        plays = (r - 1) % 7
        expect = -1 if first[plays] == -1 else (first[plays] + 1) % 7
        assert second[r] == expect


def test_double_binary_tree_non_power_of_two_parent_falls_back() -> None:
    first, _ = double_binary_tree(6)
    # Rank 5 (bit 1): (5 ^ 1) | 2 = 6 is not below 6, so it hangs off 5 ^ 1 = 4.
    assert first[5] == 4
    assert first == (-1, 2, 4, 2, 0, 4)


def test_small_worlds() -> None:
    assert double_binary_tree(1) == ((-1,), (-1,))
    assert double_binary_tree(2) == ((-1, 0), (1, -1))
    assert binary_tree(1) == (-1,)
    assert binomial_tree(1) == (-1,)
    assert tree_depth((-1,)) == 0


def test_binary_tree_heap_order_and_root() -> None:
    assert binary_tree(7) == (-1, 0, 0, 1, 1, 2, 2)
    rotated = binary_tree(5, root=3)
    assert rotated[3] == -1
    assert tree_children(rotated)[3] == [0, 4]
    assert tree_depth(binary_tree(16)) == 4


def test_binomial_tree() -> None:
    assert binomial_tree(8) == (-1, 0, 0, 2, 0, 4, 4, 6)
    assert tree_children(binomial_tree(8))[0] == [1, 2, 4]
    assert tree_depth(binomial_tree(8)) == 3
    shifted = binomial_tree(5, root=2)
    # Virtual rank 3 (rank 0) is two hops down: 3 -> 2 -> 0 in virtual ranks.
    assert shifted[2] == -1 and tree_depth(shifted) == 2
    assert tree_children(shifted)[2] == [1, 3, 4]


@pytest.mark.parametrize("bad", [0, -1])
def test_rejects_empty_world(bad: int) -> None:
    with pytest.raises(ValueError, match="at least one rank"):
        double_binary_tree(bad)
    with pytest.raises(ValueError):
        binary_tree(bad)


def test_rejects_bad_root_and_non_trees() -> None:
    with pytest.raises(ValueError, match="root 4"):
        binomial_tree(4, root=4)
    with pytest.raises(ValueError, match="exactly one root"):
        tree_root((-1, -1))
    with pytest.raises(ValueError, match="unreachable"):
        tree_depth((-1, 2, 1))
    with pytest.raises(ValueError, match="not another rank"):
        tree_children((-1, 5))


@given(st.integers(min_value=1, max_value=300))
def test_double_binary_tree_properties(n: int) -> None:
    first, second = double_binary_tree(n)
    _assert_tree(first, n)
    _assert_tree(second, n)
    for parent in (first, second):
        assert max(len(c) for c in tree_children(parent)) <= 2
    if n % 2 == 0:
        interior_first = {r for r, c in enumerate(tree_children(first)) if c}
        interior_second = {r for r, c in enumerate(tree_children(second)) if c}
        assert not interior_first & interior_second


@given(st.integers(min_value=1, max_value=300), st.data())
def test_rooted_tree_properties(n: int, data: st.DataObject) -> None:
    root = data.draw(st.integers(min_value=0, max_value=n - 1))
    for parent in (binary_tree(n, root), binomial_tree(n, root)):
        _assert_tree(parent, n)
        assert tree_root(parent) == root
    assert max(len(c) for c in tree_children(binary_tree(n, root))) <= 2
    binomial = binomial_tree(n, root)
    # The root sends to ceil(log2 n) children; the deepest virtual rank is the one with most set bits.
    assert len(tree_children(binomial)[root]) == (math.ceil(math.log2(n)) if n > 1 else 0)
    assert tree_depth(binomial) == max(bin(v).count("1") for v in range(n))


def test_ranks_a_root_cannot_reach_are_counted_in_english() -> None:
    from collbench.layouts.trees import tree_depth

    # Ranks 1 and 2 are each other's parent: a cycle beside the root (it said "2 rank(s)").
    with pytest.raises(ValueError, match=r"^not a tree: 2 ranks unreachable from root 0"):
        tree_depth((-1, 2, 1))
    with pytest.raises(ValueError, match=r"^not a tree: 3 ranks unreachable from root 0"):
        tree_depth((-1, 2, 3, 2))
