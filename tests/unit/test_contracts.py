"""One contract per op (collbench.schedules.contracts): every op has one and a native call, and the
contract says the same as the op's spec and the verifier's proof of real schedules."""

from __future__ import annotations

import pytest

from collbench.errors import NotApplicableError
from collbench.runtime.sweep.native_calls import NATIVE_CALLS
from collbench.schedules.contracts import CONTRACTS, contract
from collbench.schedules.ops import Op, block_bounds, buffer_elems, chunk_bounds
from collbench.schedules.registry import algorithm_names, get_algorithm
from collbench.schedules.verifier import verify


def test_every_op_has_a_contract_and_a_native_call() -> None:
    assert set(CONTRACTS) == set(Op)
    assert set(NATIVE_CALLS) == set(Op)
    assert all(c.op is op for op, c in CONTRACTS.items())


@pytest.mark.parametrize("op", list(Op))
@pytest.mark.parametrize("world", [1, 3, 4])
def test_spans_lie_inside_the_schedules_buffer(op: Op, world: int) -> None:
    count = 12 if op.spec.payload else 0
    extent = buffer_elems(op, count)
    for rank in range(world):
        for span in (contract(op).input_span(rank, world, count), contract(op).output_span(rank, world, count)):
            assert 0 <= span[0] <= span[1] <= extent
        for a, z, contributors, _ in contract(op).requires(rank, world, count, 0):
            assert 0 <= a < z <= extent and 0 <= contributors < 1 << world


def test_the_spans_are_nccl_tests_buffers() -> None:
    # reduce-scatter's output and all-gather's input are the rank's chunk; scatter's output and gather's
    # input its block; all-to-all's and send/recv's output follows the input in one allocation.
    assert contract(Op.REDUCE_SCATTER).output_span(1, 4, 10) == chunk_bounds(10, 4)[1]
    assert contract(Op.ALL_GATHER).input_span(3, 4, 10) == chunk_bounds(10, 4)[3]
    assert contract(Op.SCATTER).output_span(2, 4, 12) == block_bounds(12, 4)[2]
    assert contract(Op.GATHER).input_span(2, 4, 12) == block_bounds(12, 4)[2]
    assert contract(Op.ALL_TO_ALL).output_span(0, 4, 12) == (12, 24)
    assert contract(Op.SENDRECV).requires(0, 3, 5, 0) == [(5, 10, 1 << 2, -5)]


def test_only_the_roots_data_exists_for_broadcast_and_scatter() -> None:
    for op in (Op.BROADCAST, Op.SCATTER):
        assert contract(op).holds(0, 4, 12, 2) == []
        assert contract(op).holds(2, 4, 12, 2) == [(0, 12)]
    assert contract(Op.REDUCE).holds(0, 4, 12, 2) == [(0, 12)]


def test_a_reduce_and_a_gather_require_nothing_of_non_roots() -> None:
    for op in (Op.REDUCE, Op.GATHER):
        assert contract(op).requires(1, 4, 12, 0) == []
        assert contract(op).requires(0, 4, 12, 0) != []


@pytest.mark.parametrize("op", list(Op))
def test_every_algorithm_meets_the_contract_of_every_op_it_does(op: Op) -> None:
    # The verifier proves each schedule against the contract's holds/requires: one home for both.
    for name in algorithm_names():
        spec = get_algorithm(name)
        if name == "native" or not spec.supports(op):
            continue
        for world in (2, 5):
            count = 0 if not op.spec.payload else 4 * world + 3 - (3 if op.spec.blocks else 0)
            try:
                schedule = spec.build(op, world, count, root=world - 1)
            except NotApplicableError:
                continue  # needs what is not given here (hierarchical: a layout of several nodes)
            verify(schedule)
