"""The sweep's data patterns are sized to every dtype nccl-tests measures and to the world: any subset of
ranks reduces, in any order, to an integer the dtype holds exactly, never wrapping (int8 and uint8
included), at 2..64 ranks and at the 16,384-rank shapes a check may be asked for; expected_reduction is
the brute-force reduction itself; a corrupted int8 or uint8 result is still caught."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.runtime.executor import buffers
from collbench.runtime.executor.buffers import (
    SENTINEL,
    check_buffers,
    exact_integers,
    expected_output,
    expected_reduction,
    fill,
    make_buffers,
    pattern,
    pattern_period,
    torch_dtype,
)
from collbench.schedules.ops import FLOAT_DTYPES, Op

DTYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "bfloat16", "float32", "float64")
REDUCTIONS = ("sum", "prod", "min", "max", "avg")


def _rows(world: int, start: int, stop: int, redop: str | None, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Every rank's pattern, one row each, as int64, computed one rank at a time (the brute force)."""
    return torch.stack(
        [
            pattern(r, start, stop, redop=redop, world_size=world, seed=seed, dtype=dtype).to(torch.int64)
            for r in range(world)
        ]
    )


def _assert_every_partial_reduction_is_exact(rows: torch.Tensor, redop: str, dtype: torch.dtype) -> None:
    room = exact_integers(dtype)
    if redop in ("sum", "avg"):
        # The largest and smallest sums any subset of ranks (any order's partial sums) can reach.
        assert int(rows.clamp(min=0).sum(dim=0).max()) <= room.highest
        assert int(rows.clamp(max=0).sum(dim=0).min()) >= room.lowest
    elif redop == "prod":
        assert set(rows.abs().unique().tolist()) <= {1, 2}
        # Any subset's product is +-2^k with k at most the twos of the whole world.
        assert int((rows.abs() == 2).sum(dim=0).max()) <= room.top_power_of_two
        if room.lowest == 0:
            assert int(rows.min()) >= 1
    else:
        assert room.lowest <= int(rows.min()) and int(rows.max()) <= room.highest
    assert not bool((rows == SENTINEL).any()) or redop in ("sum", "avg", "prod")


def _brute_force(rows: torch.Tensor, redop: str, dtype: torch.dtype) -> torch.Tensor:
    """The reduction of every row in the wide type, along the ranks at once (no cycles, no counting)."""
    wide = rows.to(torch.float64 if dtype.is_floating_point else torch.int64)
    if redop in ("sum", "avg"):
        acc = wide.sum(dim=0)
    elif redop == "prod":
        acc = wide.prod(dim=0)
    elif redop == "min":
        acc = wide.amin(dim=0)
    else:
        acc = wide.amax(dim=0)
    return acc / rows.shape[0] if redop == "avg" else acc


@settings(max_examples=120, deadline=None)
@given(
    dtype_name=st.sampled_from(DTYPES),
    redop=st.sampled_from(REDUCTIONS),
    world=st.integers(2, 64),
    start=st.integers(0, 10**6),
    length=st.integers(1, 700),
    seed=st.integers(0, 5),
)
def test_every_reduction_is_exact_and_is_the_brute_force(
    dtype_name: str, redop: str, world: int, start: int, length: int, seed: int
) -> None:
    if redop == "avg" and dtype_name not in FLOAT_DTYPES:
        return  # refused by the sweep: NCCL's integer avg truncates (tests/cli: test_int8_sweeps)
    dtype = torch_dtype(dtype_name)
    rows = _rows(world, start, start + length, redop, dtype, seed)
    _assert_every_partial_reduction_is_exact(rows, redop, dtype)
    expected = expected_reduction(world, start, start + length, redop=redop, dtype=dtype, seed=seed)
    assert expected.dtype == dtype
    brute = _brute_force(rows, redop, dtype)
    if redop == "avg":
        # The exact sum divided in float64 and rounded once more to the dtype, as the executor's avg.
        assert torch.equal(expected, brute.to(dtype))
    else:
        # Cast once to the dtype, and the cast loses nothing: the value is exact there.
        assert torch.equal(expected.to(brute.dtype), brute)
    # A scan's prefix of k ranks reduces the whole world's pattern.
    k = 1 + start % world
    prefix = expected_reduction(k, start, start + length, redop=redop, dtype=dtype, world_size=world, seed=seed)
    assert torch.equal(prefix, _brute_force(rows[:k], redop, dtype).to(dtype))


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("redop", [None, "sum", "prod", "min", "max"])
def test_ops_that_do_not_reduce_and_the_sentinel_fit_every_dtype(dtype_name: str, redop: str | None) -> None:
    dtype = torch_dtype(dtype_name)
    values = pattern(3, 0, 505, redop=redop, world_size=4, dtype=dtype)
    assert torch.equal(values.to(torch.int64).to(dtype), values)  # no value rounded or wrapped
    if redop in (None, "min", "max"):
        # The sentinel lies outside the pattern: an output a collective never wrote is caught.
        assert not bool((values.to(torch.int64) == SENTINEL).any())
        assert int(values.to(torch.int64).min()) >= exact_integers(dtype).lowest


@pytest.mark.parametrize("dtype_name", DTYPES)
@pytest.mark.parametrize("redop", ["sum", "prod", "min", "max"])
def test_the_16384_rank_shapes_stay_exact(dtype_name: str, redop: str) -> None:
    # Every rank's row at 64 indices spread over one period (a whole period of 16,384 rows would take
    # GBs): the subset bounds and the expectation against the brute force, as above.
    dtype, world = torch_dtype(dtype_name), 16384
    period = pattern_period(redop, world, dtype)
    for start in range(0, period, max(1, period // 8))[:8]:
        # Every rank's row in one call (buffers' own 2-D form, which the brute force above checks).
        rows = buffers._pattern_values(
            range(world), start, start + 8, redop=redop, world_size=world, seed=1, dtype=dtype, device="cpu"
        )
        for r in (0, 1, world - 1):
            alone = pattern(r, start, start + 8, redop=redop, world_size=world, seed=1, dtype=dtype)
            assert torch.equal(rows[r], alone.to(torch.int64))
        _assert_every_partial_reduction_is_exact(rows, redop, dtype)
        expected = expected_reduction(world, start, start + 8, redop=redop, dtype=dtype, seed=1)
        brute = _brute_force(rows, redop, dtype)
        assert torch.equal(expected.to(brute.dtype), brute)


def test_small_types_widen_their_windows_only_where_needed() -> None:
    # Patterns the sweep ran before are kept where they fit (5 and 32); csrc/mpi_harness.c mirrors both.
    assert buffers.sum_period(64, torch.int8) == 5 and buffers.prod_spacing(64, torch.int8) == 32
    assert buffers.sum_period(64, torch.float32) == 5 and buffers.prod_spacing(16384, torch.float64) == 32
    assert buffers.sum_period(16384, torch.int8) > 5 and buffers.prod_spacing(16384, torch.float16) > 32


@pytest.mark.parametrize("dtype_name", ["int8", "uint8"])
@pytest.mark.parametrize("redop", ["sum", "prod", "min", "max"])
def test_a_corrupted_int8_or_uint8_result_is_caught(dtype_name: str, redop: str) -> None:
    dtype = torch_dtype(dtype_name)
    b = make_buffers(Op.ALL_REDUCE, 1000, dtype=dtype, rank=1, world_size=4, in_place=False)
    fill(b, redop)
    assert check_buffers(b, redop) == 1000  # nothing written yet: every element still the sentinel
    expected = expected_output(b, redop)
    assert expected is not None
    b.output.copy_(expected)
    assert check_buffers(b, redop) == 0
    # One element off by one, and a reduction that left one rank out.
    b.output[17] += 1
    assert check_buffers(b, redop) == 1
    missing = expected_reduction(3, 0, 1000, redop=redop, dtype=dtype, world_size=4)
    b.output.copy_(missing)
    assert check_buffers(b, redop) > 0


def test_docs_measuring_says_where_a_sums_window_grows_past_five_ranks() -> None:
    # docs/measuring.md quotes these: past them a rank left out is caught only in messages as long as the window.
    first_past_five = {
        dtype: next(n for n in range(2, 20_000) if buffers.sum_period(n, dtype) > 5)
        for dtype in (torch.uint8, torch.int8, torch.bfloat16, torch.float16)
    }
    assert first_past_five == {torch.uint8: 126, torch.int8: 211, torch.bfloat16: 426, torch.float16: 3411}
    at_scale = {dtype: buffers.sum_period(16_384, dtype) for dtype in (torch.int8, torch.uint8, torch.bfloat16)}
    assert at_scale == {torch.int8: 391, torch.uint8: 656, torch.bfloat16: 193}
