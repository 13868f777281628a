"""Closed-form costs: the REFERENCE.md formulas, and edge cases."""

from __future__ import annotations

import pytest

from collbench.errors import ConfigError, UnknownNameError
from collbench.layouts.trees import double_binary_tree, tree_depth
from collbench.models.costs import ALGORITHMS, cost_terms, two_tree_depth
from collbench.schedules.ops import Op


def test_ring_all_reduce_matches_reference() -> None:
    p, n = 8, 1 << 20
    t = cost_terms(Op.ALL_REDUCE, "ring", p, n)
    assert t.alpha == 2 * (p - 1)
    assert t.beta == pytest.approx(2 * (p - 1) / p * n)
    assert t.gamma == pytest.approx((p - 1) / p * n)


def test_recursive_doubling_and_rabenseifner_at_powers_of_two() -> None:
    n = 4096
    rd = cost_terms("all-reduce", "recursive-doubling", 16, n)
    assert (rd.alpha, rd.beta, rd.gamma) == (4, 4 * n, 4 * n)
    rab = cost_terms("all_reduce", "rabenseifner", 16, n)
    assert rab.alpha == 8
    assert rab.beta == pytest.approx(2 * 15 / 16 * n)


def test_non_power_of_two_adds_the_fold_steps() -> None:
    n = 4096
    at8 = cost_terms("all-reduce", "recursive-doubling", 8, n)
    at12 = cost_terms("all-reduce", "recursive-doubling", 12, n)
    assert at12.alpha == at8.alpha + 2
    assert at12.beta == at8.beta + 2 * n
    assert at12.gamma == at8.gamma + n


def test_native_is_the_ring_formula() -> None:
    for op in Op:
        assert cost_terms(op, "native", 6, 1000) == cost_terms(op, "ring", 6, 1000)
    assert cost_terms("all-reduce", "native:tree/ll128", 6, 1000) == cost_terms("all-reduce", "ring", 6, 1000)


def test_every_algorithm_has_every_op_and_is_linear_in_size() -> None:
    for algo in ALGORITHMS:
        for op in Op:
            small = cost_terms(op, algo, 7, 1000)
            big = cost_terms(op, algo, 7, 2000)
            assert small.alpha == big.alpha >= 1
            assert big.beta == pytest.approx(2 * small.beta)
            if not op.spec.reduces:
                assert big.gamma == 0


def test_two_tree_depth_matches_the_tree_builder() -> None:
    for p in range(2, 70):
        assert two_tree_depth(p) == tree_depth(double_binary_tree(p)[0]), p


def test_bad_inputs() -> None:
    with pytest.raises(UnknownNameError):
        cost_terms("all-reduce", "bogus", 4, 10)
    with pytest.raises(UnknownNameError):
        cost_terms("all-to-all", "ring", 4, 10)
    with pytest.raises(ConfigError):
        cost_terms("all-reduce", "ring", 0, 10)
    with pytest.raises(ConfigError):
        cost_terms("all-reduce", "ring", 4, -1)
