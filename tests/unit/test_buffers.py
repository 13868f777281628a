"""Deterministic patterns reduce exactly in every dtype; buffers and checks follow nccl-tests' shapes."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.runtime.executor.buffers import (
    SENTINEL,
    check_buffers,
    count_wrong,
    expected_output,
    expected_reduction,
    fill,
    make_buffers,
    pattern,
    pattern_period,
    torch_dtype,
)
from collbench.schedules.ops import CLASSIC_OPS, FLOAT_DTYPES, REDOPS, SWEEP_DTYPES, Op, chunk_bounds

COMBOS = [(d, r) for d in SWEEP_DTYPES for r in REDOPS if r != "avg" or d in FLOAT_DTYPES]


@pytest.mark.parametrize(("dtype_name", "redop"), COMBOS)
@pytest.mark.parametrize("world_size", [2, 3, 7, 16])
def test_every_order_of_reduction_is_exact_in_the_dtype(dtype_name: str, redop: str, world_size: int) -> None:
    dtype = torch_dtype(dtype_name)
    count = 500
    inputs = [pattern(r, 0, count, redop=redop, world_size=world_size, seed=3, dtype=dtype) for r in range(world_size)]
    expected = expected_reduction(world_size, 0, count, redop=redop, dtype=dtype, seed=3)
    for order in (list(range(world_size)), list(reversed(range(world_size)))):
        acc = inputs[order[0]].clone()
        for r in order[1:]:
            if redop in ("sum", "avg"):
                acc += inputs[r]
            elif redop == "prod":
                acc *= inputs[r]
            elif redop == "min":
                acc = torch.minimum(acc, inputs[r])
            else:
                acc = torch.maximum(acc, inputs[r])
        if redop == "avg":
            acc = acc / world_size
        assert count_wrong(acc, expected) == 0


@pytest.mark.parametrize("redop", [*REDOPS, None])
def test_a_pattern_and_its_reduction_repeat_one_period_element_for_element(redop: str | None) -> None:
    # Filling and checking repeat one period (buffers.pattern_period); each element computed alone (a
    # range within one period) is the arithmetic itself. A range over several periods, starting mid-period.
    start, stop = 997, 997 + 3 * pattern_period(redop, 7, torch.float64) + 7
    for rank, seed in ((0, 0), (5, 3)):
        tiled = pattern(rank, start, stop, redop=redop, world_size=7, seed=seed, dtype=torch.float64)
        alone = torch.cat(
            [
                pattern(rank, i, i + 1, redop=redop, world_size=7, seed=seed, dtype=torch.float64)
                for i in range(start, stop)
            ]
        )
        assert torch.equal(tiled, alone)
    if redop is None:
        return
    floats = (torch.float32, torch.float64, torch.bfloat16)
    for dtype in (*floats, torch.int64, torch.int8, torch.uint8) if redop != "avg" else floats:
        tiled = expected_reduction(7, start, stop, redop=redop, dtype=dtype, seed=2)
        alone = torch.cat(
            [expected_reduction(7, i, i + 1, redop=redop, dtype=dtype, seed=2) for i in range(start, stop)]
        )
        assert torch.equal(tiled, alone)


def test_patterns_differ_between_ranks_and_seeds() -> None:
    a = pattern(0, 0, 100, redop="sum", world_size=2)
    assert not torch.equal(a, pattern(1, 0, 100, redop="sum", world_size=2))
    assert not torch.equal(a, pattern(0, 0, 100, redop="sum", world_size=2, seed=1))
    assert torch.equal(pattern(2, 10, 20, redop="max", world_size=3), pattern(2, 0, 20, redop="max", world_size=3)[10:])


def test_prod_pattern_keeps_few_twos() -> None:
    values = pattern(0, 0, 3200, redop="prod", world_size=2)
    assert set(values.abs().unique().tolist()) == {1, 2}
    assert int((values.abs() == 2).sum()) == 100


@pytest.mark.parametrize("in_place", [False, True])
def test_all_gather_buffers_and_expectation(in_place: bool) -> None:
    n, count = 3, 10
    outs = []
    for rank in range(n):
        b = make_buffers(Op.ALL_GATHER, count, dtype=torch.float32, rank=rank, world_size=n, in_place=in_place)
        lo, hi = chunk_bounds(count, n)[rank]
        assert b.input.numel() == hi - lo and b.output.numel() == count
        fill(b, "sum")
        assert int((b.output == SENTINEL).sum()) == count - (hi - lo if in_place else 0)
        outs.append(b)
    # Simulate a correct all-gather: every chunk from its owner.
    for b in outs:
        for owner, (lo, hi) in enumerate(chunk_bounds(count, n)):
            b.output[lo:hi] = outs[owner].input if not in_place else pattern(owner, lo, hi, redop=None, world_size=n)
        assert check_buffers(b, "sum") == 0


def test_in_place_reduce_scatter_output_is_the_ranks_chunk_of_the_input() -> None:
    b = make_buffers(Op.REDUCE_SCATTER, 11, dtype=torch.int32, rank=1, world_size=3, in_place=True)
    lo, hi = chunk_bounds(11, 3)[1]
    assert b.output.data_ptr() == b.input[lo:hi].data_ptr()
    fill(b, "min")
    expected = expected_output(b, "min")
    assert expected is not None and expected.numel() == hi - lo
    assert check_buffers(b, "min") > 0  # not reduced yet
    b.output.copy_(expected)
    assert check_buffers(b, "min") == 0


def test_non_root_reduce_defines_nothing_and_broadcast_expects_the_roots_pattern() -> None:
    reduce_buf = make_buffers(Op.REDUCE, 5, dtype=torch.float64, rank=1, world_size=2, root=0, in_place=False)
    assert expected_output(reduce_buf, "sum") is None
    bcast = make_buffers(Op.BROADCAST, 5, dtype=torch.bfloat16, rank=1, world_size=3, root=2, in_place=True)
    fill(bcast, "sum")
    assert check_buffers(bcast, "sum") > 0
    bcast.output.copy_(pattern(2, 0, 5, redop=None, world_size=3, dtype=torch.bfloat16))
    assert check_buffers(bcast, "sum") == 0


def test_count_wrong_counts_elements_and_rejects_shapes() -> None:
    assert count_wrong(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 0.0, 0.0])) == 2
    assert count_wrong(torch.tensor([1.0]), None) == 0
    with pytest.raises(ValueError, match="shape"):
        count_wrong(torch.zeros(2), torch.zeros(3))


@settings(max_examples=40, deadline=None)
@given(
    count=st.integers(min_value=0, max_value=50),
    n=st.integers(min_value=1, max_value=9),
    op=st.sampled_from(sorted(CLASSIC_OPS)),
    in_place=st.booleans(),
)
def test_buffer_shapes_follow_nccl_tests(count: int, n: int, op: Op, in_place: bool) -> None:
    # The five reductions and gathers; the newer ops' shapes are test_buffers_new_ops.py's.
    for rank in range(n):
        b = make_buffers(op, count, dtype=torch.float32, rank=rank, world_size=n, in_place=in_place)
        lo, hi = chunk_bounds(count, n)[rank]
        small = hi - lo
        if op is Op.REDUCE_SCATTER:
            assert (b.input.numel(), b.output.numel()) == (count, small)
        elif op is Op.ALL_GATHER:
            assert (b.input.numel(), b.output.numel()) == (small, count)
        else:
            assert b.input.numel() == b.output.numel() == count
        if count > 0:
            shared = b.input.untyped_storage().data_ptr() == b.output.untyped_storage().data_ptr()
            assert shared == in_place
