"""Buffers and data check of all-to-all, scatter, gather, send/recv and barrier (nccl-tests' shapes).

Each op is carried out here by plain tensor copies between the ranks' buffers, from its definition
(ops.py, nccl-tests' alltoall.cu, scatter.cu, gather.cu, sendrecv.cu), then checked: the correct
result has no wrong element, and a result with blocks swapped or one element off is caught.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.runtime.executor import buffers
from collbench.runtime.executor.buffers import (
    PointBuffers,
    check_buffers,
    checks_data,
    count_wrong,
    expected_output,
    fill,
    make_buffers,
)
from collbench.schedules.ops import Op, block_bounds, op_count

DATA_OPS = (Op.ALL_TO_ALL, Op.SCATTER, Op.GATHER, Op.SENDRECV)


def _all(op: Op, count: int, n: int, *, root: int = 0, in_place: bool = False) -> list[PointBuffers]:
    bufs = [
        make_buffers(op, count, dtype=torch.float32, rank=r, world_size=n, root=root, in_place=in_place)
        for r in range(n)
    ]
    for b in bufs:
        fill(b, "sum", seed=5)
    return bufs


def _carry_out(op: Op, bufs: list[PointBuffers]) -> None:
    """The op, by its definition, on every rank's buffers at once."""
    n = len(bufs)
    b0 = bufs[0]
    blocks = block_bounds(b0.count, n)
    inputs = [b.input.clone() for b in bufs]
    root = b0.root
    for r, b in enumerate(bufs):
        if op is Op.ALL_TO_ALL:
            for j, (lo, hi) in enumerate(blocks):
                mine = blocks[r]
                b.output[lo:hi] = inputs[j][mine[0] : mine[1]]
        elif op is Op.SCATTER:
            lo, hi = blocks[r]
            b.output.copy_(inputs[root][lo:hi])
        elif op is Op.GATHER and r == root:
            for j, (lo, hi) in enumerate(blocks):
                b.output[lo:hi] = inputs[j]
        elif op is Op.SENDRECV:
            b.output.copy_(inputs[(r - 1) % n])


@pytest.mark.parametrize("op", DATA_OPS)
@pytest.mark.parametrize(("count", "n"), [(12, 3), (64, 4), (7, 1), (40, 2), (35, 5)])
def test_the_op_done_by_its_definition_checks_clean(op: Op, count: int, n: int) -> None:
    count = op_count(op, count, n)
    for root in {0, n - 1}:
        for in_place in (False, True) if not op.spec.out_of_place else (False,):
            bufs = _all(op, count, n, root=root, in_place=in_place)
            _carry_out(op, bufs)
            assert [check_buffers(b, "sum", seed=5) for b in bufs] == [0] * n
            for b in bufs:
                expected = expected_output(b, "sum", seed=5)
                if expected is not None:
                    assert count_wrong(b.output[: expected.numel()], expected) == 0


@pytest.mark.parametrize("op", DATA_OPS)
def test_nothing_done_is_caught(op: Op) -> None:
    n, count = 3, 24
    bufs = _all(op, count, n)
    wrong = [check_buffers(b, "sum", seed=5) for b in bufs]
    # A gather's non-roots have nothing to check; every rank that receives something is wrong.
    receivers = [0] if op is Op.GATHER else list(range(n))
    assert all(wrong[r] > 0 for r in receivers)


def test_swapped_all_to_all_blocks_and_a_wrong_gathered_element_are_caught() -> None:
    n, count = 4, 32
    bufs = _all(Op.ALL_TO_ALL, count, n)
    _carry_out(Op.ALL_TO_ALL, bufs)
    b = bufs[2].output
    first, second = b[0:8].clone(), b[8:16].clone()
    b[0:8], b[8:16] = second, first
    assert check_buffers(bufs[2], "sum", seed=5) == 16
    gathered = _all(Op.GATHER, count, n, root=1)
    _carry_out(Op.GATHER, gathered)
    gathered[1].output[13] += 1
    assert check_buffers(gathered[1], "sum", seed=5) == 1
    # The rank's own block of an all-to-all must come from its own input (a local copy).
    own = _all(Op.ALL_TO_ALL, count, n)
    _carry_out(Op.ALL_TO_ALL, own)
    own[1].output[8:16] = own[0].input[8:16]
    assert check_buffers(own[1], "sum", seed=5) == 8


def test_a_shift_the_wrong_way_is_caught() -> None:
    n = 3
    bufs = _all(Op.SENDRECV, 10, n)
    for r, b in enumerate(bufs):
        b.output.copy_(bufs[(r + 1) % n].input)
    assert all(check_buffers(b, "sum", seed=5) > 0 for b in bufs)


@settings(max_examples=30, deadline=None)
@given(count=st.integers(min_value=0, max_value=60), n=st.integers(min_value=1, max_value=8))
def test_buffer_shapes_follow_nccl_tests(count: int, n: int) -> None:
    block = count // n
    for rank in range(n):
        for op in (Op.ALL_TO_ALL, Op.SENDRECV):
            b = make_buffers(op, count, dtype=torch.float32, rank=rank, world_size=n, in_place=False)
            # One allocation, input then output: what a schedule of 2 * count runs in.
            assert (b.input.numel(), b.output.numel(), b.whole.numel()) == (count, count, 2 * count)
            if count:
                assert b.output.data_ptr() == b.input.data_ptr() + 4 * count
        for in_place in (False, True):
            s = make_buffers(Op.SCATTER, count, dtype=torch.float32, rank=rank, world_size=n, in_place=in_place)
            g = make_buffers(Op.GATHER, count, dtype=torch.float32, rank=rank, world_size=n, in_place=in_place)
            assert (s.input.numel(), s.output.numel()) == (count, block)
            assert (g.input.numel(), g.output.numel()) == (block, count)
            if in_place and block:
                assert s.output.data_ptr() == s.input.data_ptr() + 4 * block * rank
                assert g.input.data_ptr() == g.output.data_ptr() + 4 * block * rank


def test_out_of_place_only_ops_refuse_in_place_buffers() -> None:
    for op in (Op.ALL_TO_ALL, Op.SENDRECV):
        with pytest.raises(ValueError, match="out of place only"):
            make_buffers(op, 8, dtype=torch.float32, rank=0, world_size=2, in_place=True)


def test_barrier_has_a_token_and_nothing_to_check() -> None:
    b = make_buffers(Op.BARRIER, 0, dtype=torch.float32, rank=1, world_size=3, in_place=False)
    assert b.whole.numel() == 1 and b.input.numel() == b.output.numel() == 1
    fill(b, "sum")
    assert not checks_data(Op.BARRIER) and all(checks_data(op) for op in DATA_OPS)
    assert expected_output(b, "sum") is None
    ticks: list[int] = []
    assert check_buffers(b, "sum", between_chunks=lambda: ticks.append(1)) == 0
    assert ticks == [1]  # one chunk, like every rank of any op with nothing to check


def test_block_ops_are_checked_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(buffers, "CHUNK_ELEMS", 5)
    n, count = 3, 33
    for op in DATA_OPS:
        bufs = _all(op, count, n, root=2)
        _carry_out(op, bufs)
        assert [check_buffers(b, "sum", seed=5) for b in bufs] == [0] * n
        target = bufs[2]
        target.output[7] += 3
        assert check_buffers(target, "sum", seed=5) == 1, op
