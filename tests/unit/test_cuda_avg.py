"""``avg`` on CUDA: the executor's division and the check of NCCL's own avg, against fakes of their contracts.

Contracts faked here:

* torch's CUDA true division (aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu, ``div_true_kernel_cuda``):
  when the divisor is a CPU scalar (a Python number), ``inv_b = opmath_t(1.0) / b`` is computed once
  and every element becomes ``a * inv_b`` in ``opmath_t`` (float for float32/float16/bfloat16),
  rounded to the dtype; any other divisor (a tensor on the device) runs ``DivFunctor``, ``a / b``.
  ``CudaDivision`` is a CPU tensor that says it is on CUDA and divides by Python numbers that way.
* NCCL's avg (``hostToDevRedOp`` in NVIDIA/nccl src/enqueue.cc): ``ncclDevPreMulSum`` with scalar
  ``float(1.0/nRanks)`` rounded to the type; each rank's input times the scalar, then summed in the
  algorithm's order, each addition rounded to the type. ``premulsum`` does that in a given order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch

from collbench.runtime.cuda.nccl_avg import allowed_error, check_nccl_avg, nccl_avg_scalar
from collbench.runtime.executor import buffers
from collbench.runtime.executor.buffers import (
    PointBuffers,
    check_buffers,
    expected_reduction,
    fill,
    make_buffers,
    pattern,
)
from collbench.runtime.executor.reduce import divide_exactly
from collbench.runtime.executor.schedule_runner import finish_avg
from collbench.schedules.ops import Op, chunk_bounds
from collbench.schedules.registry import get_algorithm

FLOATS = (torch.float32, torch.float16, torch.bfloat16)


class CudaDivision(torch.Tensor):
    """A CPU tensor with CUDA's division by a Python scalar: a multiplication by its reciprocal."""

    divisions_by_scalar: ClassVar[int] = 0

    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if getattr(func, "__self__", None) is torch.Tensor.device:  # the device attribute's getter
            return torch.device("cuda", 0)
        in_place = func in (torch.Tensor.div_, torch.Tensor.__itruediv__)
        out_of_place = func in (torch.Tensor.div, torch.Tensor.__truediv__, torch.div, torch.true_divide)
        if (in_place or out_of_place) and isinstance(args[1], int | float) and not kwargs.get("rounding_mode"):
            CudaDivision.divisions_by_scalar += 1
            target: torch.Tensor = args[0]
            with torch._C.DisableTorchFunctionSubclass():
                opmath = torch.float64 if target.dtype == torch.float64 else torch.float32
                inv = torch.tensor(1.0, dtype=opmath) / torch.tensor(float(args[1]), dtype=opmath)
                quotient = (target.to(opmath) * inv).to(target.dtype)
                if not in_place:
                    return quotient.as_subclass(CudaDivision)
                target.copy_(quotient)
            return target
        return super().__torch_function__(func, types, args, kwargs)


def _on_fake_cuda(values: torch.Tensor) -> torch.Tensor:
    return values.clone().as_subclass(CudaDivision)


def _quotients(n: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Every sum the avg of n ranks of integers in [-2, 2] can reach, and random ones; their quotients."""
    sums = torch.cat([torch.arange(-2 * n, 2 * n + 1, dtype=torch.float64), torch.randn(4096, dtype=torch.float64)])
    sums = sums.to(dtype).double()  # values the dtype holds
    return sums, (sums / n).to(dtype)  # float64 division then one rounding: correctly rounded


def test_the_fake_reproduces_the_documented_one_ulp() -> None:
    # 5 / 3 in float32: 5 * fl(1/3) rounds to the float32 below the correctly rounded quotient.
    values = _on_fake_cuda(torch.tensor([5.0], dtype=torch.float32))
    values.div_(3)
    exact = torch.tensor([5.0 / 3.0], dtype=torch.float64).float()
    assert values.as_subclass(torch.Tensor).item() != exact.item()


@pytest.mark.parametrize("n", [3, 5, 6, 7])
def test_finish_avg_rounds_once_on_cuda(n: int) -> None:
    # Fails before divide_exactly: finish_avg divided by the world size as a Python scalar, which on
    # CUDA multiplies by the reciprocal (5/3, 9/5, 7/6, 3/7 ... one ulp off in float32).
    sums, expected = _quotients(n, torch.float32)
    schedule = get_algorithm("ring").build(Op.ALL_REDUCE, n, sums.numel())
    buffer = _on_fake_cuda(sums.float())
    finish_avg(schedule, buffer, rank=0)
    got = buffer.as_subclass(torch.Tensor)
    assert int((got != expected).sum()) == 0


@pytest.mark.parametrize("dtype", [*FLOATS, torch.float64], ids=str)
@pytest.mark.parametrize("n", [2, 3, 5, 6, 7, 12, 300])
def test_divide_exactly_is_correctly_rounded(dtype: torch.dtype, n: int) -> None:
    sums, expected = _quotients(n, dtype)
    before = CudaDivision.divisions_by_scalar
    on_cuda = _on_fake_cuda(sums.to(dtype))
    divide_exactly(on_cuda, n)
    assert CudaDivision.divisions_by_scalar == before  # never by a Python scalar on CUDA
    assert torch.equal(on_cuda.as_subclass(torch.Tensor), expected)
    on_cpu = sums.to(dtype)
    divide_exactly(on_cpu, n)
    assert torch.equal(on_cpu, expected)


@pytest.mark.parametrize("n", [3, 5, 6, 7, 12])
def test_the_expected_float64_avg_is_what_cuda_computes(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Fails before expected_reduction divided with divide_exactly: its ``acc / world_size`` ran on the
    # output's device, and on CUDA that multiplies by the reciprocal, one ulp off the quotient in
    # float64 (3 / 7, 5 / 3, ...), which the executor's correctly rounded avg would then "miss". The
    # sweep's own pattern sums to -2..2 only (each 5 consecutive ranks' values cancel), where 1/n times
    # a power of two is exact; a pattern whose sums reach all of [-2n, 2n] shows the defect.
    def every_sum(ranks: range, start: int, stop: int, **kwargs: Any) -> torch.Tensor:
        # expected_reduction asks the pattern of a range of ranks, a row each.
        idx = torch.arange(start, stop, dtype=torch.int64)
        rows = [idx % (4 * n + 1) - 2 * n if rank == 0 else torch.zeros_like(idx) for rank in ranks]
        return _on_fake_cuda(torch.stack(rows))

    monkeypatch.setattr(buffers, "_pattern_values", every_sum)
    count = 4 * n + 1
    # The stand-in pattern repeats every `count` indices, not every 5 as the sweep's does: expected_reduction
    # computes one period and tiles it (buffers.pattern_period).
    monkeypatch.setattr(buffers, "pattern_period", lambda *sized: count)
    monkeypatch.setattr(buffers, "sum_period", lambda *sized: n)  # one cycle of ranks: no whole-cycle shortcut
    got = expected_reduction(n, 0, count, redop="avg", dtype=torch.float64, device="cuda").as_subclass(torch.Tensor)
    sums = torch.arange(count, dtype=torch.float64) - 2 * n
    assert torch.equal(got, sums / n)  # the CPU's division: correctly rounded
    assert bool((sums * (1.0 / n) != sums / n).any()), "some sum's reciprocal product rounds apart"


def test_divide_exactly_refuses_what_it_cannot_divide() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        divide_exactly(torch.ones(3), 0)
    with pytest.raises(ValueError, match="floating"):
        divide_exactly(torch.ones(3, dtype=torch.int64), 3)


# NCCL's own avg ---------------------------------------------------------------------------------


def premulsum(inputs: Sequence[torch.Tensor], order: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """NCCL's avg of ``inputs`` (one per rank) summed in ``order``, each addition rounded to ``dtype``."""
    c = torch.tensor(nccl_avg_scalar(len(inputs), dtype), dtype=dtype)
    terms = [(x * c).to(dtype) for x in inputs]
    acc = terms[order[0]].clone()
    for r in order[1:]:
        acc = (acc.float() + terms[r].float()).to(dtype)
    return acc


def pairwise(inputs: Sequence[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """NCCL's avg summed as a binary tree would (pairs, then pairs of pairs)."""
    c = torch.tensor(nccl_avg_scalar(len(inputs), dtype), dtype=dtype)
    level = [(x * c).to(dtype) for x in inputs]
    while len(level) > 1:
        level = [
            (level[i].float() + level[i + 1].float()).to(dtype) if i + 1 < len(level) else level[i]
            for i in range(0, len(level), 2)
        ]
    return level[0]


def _rank_inputs(n: int, count: int, dtype: torch.dtype, seed: int = 0) -> list[torch.Tensor]:
    return [pattern(r, 0, count, redop="avg", world_size=n, seed=seed, dtype=dtype) for r in range(n)]


def _all_reduce_result(n: int, result: torch.Tensor, rank: int = 0) -> PointBuffers:
    bufs = make_buffers(Op.ALL_REDUCE, result.numel(), dtype=result.dtype, rank=rank, world_size=n, in_place=True)
    bufs.output.copy_(result)
    return bufs


def _orders(n: int) -> list[list[int]]:
    # A ring's chunks start at every rank and go round; reversed rings as well.
    rotations = [[(start + k) % n for k in range(n)] for start in range(n)]
    return rotations + [list(reversed(o)) for o in rotations]


@pytest.mark.parametrize(
    ("dtype", "n"),
    [
        (torch.float32, 3),
        (torch.float32, 6),
        (torch.float32, 7),
        (torch.float16, 3),
        (torch.float16, 6),
        (torch.bfloat16, 3),
        (torch.bfloat16, 6),
    ],
    ids=str,
)
def test_a_correct_nccl_avg_fails_the_exact_check(dtype: torch.dtype, n: int) -> None:
    # What the sweep did before check_nccl_avg: NCCL's correct avg counted wrong. A ring's chunks
    # start at every rank, so every rotation of the order is some chunk's.
    count = 2000
    inputs = _rank_inputs(n, count, dtype)
    wrong = [check_buffers(_all_reduce_result(n, premulsum(inputs, order, dtype)), "avg") for order in _orders(n)]
    assert max(wrong) > 0


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 8, 12, 16])
def test_a_correct_nccl_avg_passes_in_any_order(dtype: torch.dtype, n: int) -> None:
    count = 3000
    inputs = _rank_inputs(n, count, dtype, seed=1)
    results = [premulsum(inputs, order, dtype) for order in _orders(n)] + [pairwise(inputs, dtype)]
    for result in results:
        assert check_nccl_avg(_all_reduce_result(n, result), seed=1) == 0


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("n", [2, 3, 6, 7])
def test_a_wrong_nccl_avg_is_still_wrong(dtype: torch.dtype, n: int) -> None:
    count = 3000
    inputs = _rank_inputs(n, count, dtype)
    # One rank's contribution missing: every element where that rank's input is not 0 is wrong.
    missing = premulsum([*inputs[1:], torch.zeros_like(inputs[0])], list(range(n)), dtype)
    expect_wrong = int((inputs[0] != 0).sum())
    assert check_nccl_avg(_all_reduce_result(n, missing)) == expect_wrong
    # The sum, not divided; an output never written (the sentinel); NaN.
    total = expected_reduction(n, 0, count, redop="sum", dtype=dtype)
    undivided = check_nccl_avg(_all_reduce_result(n, total))
    assert undivided == int((total != 0).sum()) > 0
    untouched = make_buffers(Op.ALL_REDUCE, count, dtype=dtype, rank=0, world_size=n, in_place=False)
    fill(untouched, "avg")
    assert check_nccl_avg(untouched) == count
    nan = torch.full((count,), float("nan"), dtype=dtype)
    assert check_nccl_avg(_all_reduce_result(n, nan)) == count


def test_the_bound_is_the_arithmetic_of_premulsum() -> None:
    # float32 on 3 ranks: |S| |c - 1/3| + 2u/(1-2u) * c * sum|x_i|, S and sum|x_i| per element.
    n, u = 3, 2.0**-24
    c = float(torch.tensor(1.0 / 3.0, dtype=torch.float64).float())
    quotient = torch.tensor([5.0 / 3.0, 0.0], dtype=torch.float64)
    abs_sum = torch.tensor([5.0, 4.0], dtype=torch.float64)
    bound = allowed_error(n, torch.float32, quotient, abs_sum)
    gamma = 2 * u / (1 - 2 * u)
    hand = torch.tensor([5.0 * abs(c - 1.0 / 3.0) + gamma * c * 5.0, gamma * c * 4.0], dtype=torch.float64)
    # The bound is the arithmetic plus a margin of a few float64 roundings, nothing more.
    assert bool((hand <= bound).all()) and bool((bound <= hand * (1 + 1e-7)).all())
    # One rank: NCCL multiplies by exactly 1 (ncclLaunchOneRank's PreMulSum kernel): no room at all.
    one = allowed_error(1, torch.bfloat16, torch.tensor([2.0], dtype=torch.float64), torch.tensor([2.0]).double())
    assert float(one) < 1e-14


def test_reduce_scatter_and_non_root_reduce_check_their_own_part() -> None:
    n, count, dtype = 3, 999, torch.float32
    inputs = _rank_inputs(n, count, dtype)
    full = premulsum(inputs, [2, 0, 1], dtype)
    ticks: list[int] = []
    for rank in range(n):
        bufs = make_buffers(Op.REDUCE_SCATTER, count, dtype=dtype, rank=rank, world_size=n, in_place=False)
        lo, hi = chunk_bounds(count, n)[rank]
        bufs.output.copy_(full[lo:hi])
        assert check_nccl_avg(bufs, between_chunks=lambda: ticks.append(1)) == 0
    assert ticks == [1] * n  # one chunk each, the call made on every rank
    non_root = make_buffers(Op.REDUCE, count, dtype=dtype, rank=1, world_size=n, in_place=False)
    non_root.output.fill_(77)
    assert check_nccl_avg(non_root) == 0  # a non-root's output is not defined
    gather = make_buffers(Op.ALL_GATHER, count, dtype=dtype, rank=0, world_size=n, in_place=False)
    with pytest.raises(ValueError, match="does not reduce"):
        check_nccl_avg(gather)


def test_the_sweep_checks_native_nccl_avg_with_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from collbench.runtime.sweep import points, worker
    from collbench.runtime.sweep.plan import SweepConfig, SweepJob

    n, count, dtype = 3, 500, torch.float32
    result = premulsum(_rank_inputs(n, count, dtype), [2, 0, 1], dtype)
    bufs = _all_reduce_result(n, result)
    config = SweepConfig(world_size=n, backend="nccl", redop="avg")

    def job(backend: str) -> SweepJob:
        return SweepJob(
            config=config,
            backend=backend,
            ops=(Op.ALL_REDUCE,),
            algos=(),
            sizes=(),
            dtype="float32",
            redop="avg",
            stream_path=Path("unused.jsonl"),
        )

    def point(algo: str) -> Any:
        return points.SweepPoint(Op.ALL_REDUCE, algo, count * 4, count, True, None, "rank-order")

    tick: Callable[[], None] = lambda: None  # noqa: E731
    assert worker._count_wrong(job("nccl"), point("native"), bufs, tick) == 0
    assert worker._count_wrong(job("nccl"), point("native:ring"), bufs, tick) == 0
    # collbench's own algorithms divide once, correctly rounded: the exact check stays.
    assert worker._count_wrong(job("nccl"), point("ring"), bufs, tick) > 0
