"""collbench's CUDA reduction kernels against torch: every dtype, reduction, k, odd sizes, unaligned offsets.

The kernels accumulate in float32 and round once per pass of up to 8 inputs, so the reference does the
same float32 operations in the same order and the results must match exactly (avg: one IEEE division
of the float32 sum, as the kernel's; see ``reference``).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch

from collbench.runtime.cuda import kernels as cuda_kernels

pytestmark = pytest.mark.gpu

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
REDOPS = ("sum", "prod", "min", "max", "avg")
KS = (1, 2, 3, 4, 5, 6, 7, 8, 11, 17)
SIZES = (1, 3, 7, 8, 9, 31, 4097, 65_543, (1 << 20) + 5)
PASS = 8


@pytest.fixture(scope="module", autouse=True)
def extension() -> None:
    # On a GPU machine the kernels must build: a failure here is a real failure, not a skip.
    assert cuda_kernels.unavailable_reason() is None, cuda_kernels.unavailable_reason()
    assert cuda_kernels.load_extension() is not None


def _combine(acc: torch.Tensor, x: torch.Tensor, redop: str) -> torch.Tensor:
    if redop in ("sum", "avg"):
        return acc + x
    if redop == "prod":
        return acc * x
    if redop == "min":
        return torch.minimum(acc, x)
    return torch.maximum(acc, x)


def reference(sources: Sequence[torch.Tensor], redop: str, dtype: torch.dtype, alias: int | None) -> torch.Tensor:
    """What the kernels compute: float32 left to right, passes of 8 (dst's source first), rounded per pass."""
    order = list(sources)
    if len(order) > PASS and alias is not None:
        order.insert(0, order.pop(alias))
    first, rest = order[:PASS], order[PASS:]
    acc = first[0].float()
    for s in first[1:]:
        acc = _combine(acc, s.float(), redop)
    while rest:
        chunk, rest = rest[: PASS - 1], rest[PASS - 1 :]
        acc = acc.to(dtype).float()
        for s in chunk:
            acc = _combine(acc, s.float(), redop)
    if redop == "avg":
        # The kernel divides (``acc / divisor``, IEEE division). ``acc / len(sources)`` would not: on
        # CUDA torch multiplies by the reciprocal of a Python scalar (BinaryDivTrueKernel.cu), one ulp
        # off the quotient for some values when len(sources) is not a power of two. A divisor on the
        # device makes torch divide (its DivFunctor).
        acc = acc / torch.full((), len(sources), dtype=torch.float32, device=acc.device)
    return acc.to(dtype)


def _inputs(k: int, n: int, dtype: torch.dtype, redop: str, offsets: Sequence[int], seed: int) -> list[torch.Tensor]:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    out = []
    for i in range(k):
        off = offsets[i % len(offsets)]
        base = torch.empty(n + off + 8, dtype=dtype, device="cuda")
        if redop == "prod":
            # Products of up to 17 factors near 1 stay finite in every dtype.
            values = torch.rand(n, generator=gen, device="cuda") * 0.5 + 0.75
        else:
            values = torch.randn(n, generator=gen, device="cuda") * 4
        view = base[off : off + n]
        view.copy_(values.to(dtype))
        out.append(view)
    return out


def _check(dtype: torch.dtype, redop: str, offsets: Sequence[int], sizes: Sequence[int], ks: Sequence[int]) -> None:
    failures = []
    for k in ks:
        for n in sizes:
            sources = _inputs(k, n, dtype, redop, offsets, seed=k * 1000 + n)
            # dst at the first source's offset: with equal offsets all round the 16-byte vector path.
            dst = torch.full((n + 16,), float("nan"), dtype=dtype, device="cuda")[offsets[0] : offsets[0] + n]
            assert cuda_kernels.reduce_cuda(dst, sources, redop)
            expected = reference(sources, redop, dtype, alias=None)
            if not torch.equal(dst, expected):
                bad = int((dst != expected).sum())
                failures.append(f"k={k} n={n} offsets={tuple(offsets)}: {bad} wrong")
    assert not failures, failures


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("redop", REDOPS)
def test_aligned(dtype: torch.dtype, redop: str) -> None:
    _check(dtype, redop, offsets=[0], sizes=SIZES, ks=KS)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("redop", REDOPS)
def test_same_unaligned_offset(dtype: torch.dtype, redop: str) -> None:
    # Every pointer the same distance past a 16-byte boundary: scalar head, vector body, scalar tail.
    for off in (1, 3, 5):
        _check(dtype, redop, offsets=[off], sizes=(5, 4099, 65_541), ks=(2, 3, 8))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("redop", REDOPS)
def test_mixed_offsets(dtype: torch.dtype, redop: str) -> None:
    # Pointers at different offsets cannot share 16-byte loads: the element-wise path throughout.
    _check(dtype, redop, offsets=[0, 1, 2, 3], sizes=(1, 9, 4097, 100_003), ks=(2, 3, 4, 8, 11))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("k", [2, 3, 8, 11, 17])
def test_reduce_into_a_source(dtype: torch.dtype, k: int) -> None:
    n = 70_001
    for alias in sorted({0, k // 2, k - 1}):
        for redop in REDOPS:
            sources = _inputs(k, n, dtype, redop, [0], seed=alias + k)
            expected = reference([s.clone() for s in sources], redop, dtype, alias=alias)
            dst = sources[alias]
            assert cuda_kernels.reduce_cuda(dst, sources, redop)
            torch.testing.assert_close(dst, expected, rtol=0, atol=0, msg=f"{redop} alias={alias}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("redop", REDOPS)
def test_reduce_many_cuda_matches_the_torch_loop(dtype: torch.dtype, redop: str) -> None:
    # reduce.reduce_many's meaning: dst = dst (op) s0 (op) s1 ..., avg summing.
    n = 12_345
    for k in (1, 2, 7):
        dst = _inputs(1, n, dtype, redop, [0], seed=k)[0]
        sources = _inputs(k, n, dtype, redop, [0], seed=100 + k)
        expected = reference([dst.clone(), *sources], "sum" if redop == "avg" else redop, dtype, alias=0)
        assert cuda_kernels.reduce_many_cuda(dst, sources, redop)
        torch.testing.assert_close(dst, expected, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_propagates_through_min_and_max(dtype: torch.dtype) -> None:
    a = torch.tensor([1.0, float("nan"), 3.0, 0.0] * 5, device="cuda", dtype=dtype)
    b = torch.tensor([float("nan"), 2.0, 1.0, 0.0] * 5, device="cuda", dtype=dtype)
    for redop, fn in (("min", torch.minimum), ("max", torch.maximum)):
        dst = torch.empty_like(a)
        assert cuda_kernels.reduce_cuda(dst, [a, b], redop)
        torch.testing.assert_close(dst, fn(a, b), equal_nan=True, rtol=0, atol=0)


def test_outside_the_kernels_answers_false() -> None:
    x = torch.ones(64, device="cuda")
    assert not cuda_kernels.reduce_cuda(torch.ones(64, device="cuda", dtype=torch.float64), [x.double()], "sum")
    assert not cuda_kernels.reduce_cuda(torch.ones(8, 8, device="cuda").t(), [x.view(8, 8)], "sum")
    assert not cuda_kernels.reduce_cuda(x, [torch.ones(32, device="cuda")], "sum")
    assert not cuda_kernels.reduce_cuda(x, [torch.ones(64, device="cuda", dtype=torch.float16)], "sum")


def test_partial_overlap_is_an_error() -> None:
    base = torch.ones(128, device="cuda")
    with pytest.raises(RuntimeError, match="overlap"):
        cuda_kernels.reduce_cuda(base[0:64], [base[32:96], base[64:128]], "sum")


def test_empty_tensors() -> None:
    dst = torch.empty(0, device="cuda")
    assert cuda_kernels.reduce_cuda(dst, [torch.empty(0, device="cuda")] * 3, "max")


def test_runs_on_the_current_stream() -> None:
    n = 1 << 22
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        dst = torch.empty(n, device="cuda")
        assert cuda_kernels.reduce_cuda(dst, [a, b], "sum")
        check = dst - (a + b)  # queued behind the kernel on the same stream
    stream.synchronize()
    assert float(check.abs().max()) == 0.0
