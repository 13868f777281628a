"""The data check of NCCL's own ``avg``: NCCL sums premultiplied inputs, it does not divide a sum.

Facts from NCCL's source (NVIDIA/nccl, v2.10 to v2.30): ``hostToDevRedOp`` (``src/enqueue.cc``) turns
``ncclAvg`` on a floating type into ``ncclDevPreMulSum`` with the scalar ``1/nRanks`` rounded to the
type (``float(1.0 / comm->nRanks)``, then ``__float2half``/``__float2bfloat16`` for the half types).
Every rank's input is multiplied by that scalar and the products are summed in whatever order the
algorithm combines them (ring, tree, NVLS...), each addition rounded to the type. The result is
therefore not the correctly rounded ``S/n`` the exact check expects: the sweep's avg pattern (integers
in [-2, 2], ``executor.buffers``) on 3, 6 or 7 ranks gives float32, float16 and bfloat16 results one
or more units in the last place away from it, on about half the elements, from a correct NCCL.

The bound this check allows, per element, and why (``u`` the type's unit roundoff: 2**-24 float32,
2**-11 float16, 2**-8 bfloat16; ``c`` NCCL's scalar; ``x_i`` the ranks' inputs, ``S`` their sum):

* the products ``x_i * c`` are exact (``|x_i| <= 2`` integers: a power-of-two multiple of ``c``);
* their exact sum is ``S * c``, which is ``|S| * |c - 1/n|`` from ``S/n``;
* summing ``n`` terms in any order, each addition rounded, errs by at most
  ``gamma(n-1) * sum|x_i * c|`` with ``gamma(k) = k*u / (1 - k*u)`` (the bound for any order of
  summation; N. J. Higham, *Accuracy and Stability of Numerical Algorithms*, section 4.2).

So ``|result - S/n| <= |S| * |c - 1/n| + gamma(n-1) * c * sum|x_i|``, plus a margin for evaluating
``S/n`` and the bound in float64 (a few units of 2**-53). An element outside it is wrong. A rank's
input left out or counted twice moves the result by ``c * |x_i|``, which stays above the bound while
``(n-1) * u * sum|x_i|`` is below 1: up to thousands of ranks in float32, about 40 in float16 and a
dozen in bfloat16; past that only grosser errors (an output never written, another buffer's data,
the sum left undivided) are still caught, because NCCL's own rounding may be as large as one input.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from collbench.runtime.executor.buffers import CHUNK_ELEMS, PointBuffers, check_chunks, pattern, required_output

UNIT_ROUNDOFF: dict[torch.dtype, float] = {
    torch.float32: 2.0**-24,
    torch.float16: 2.0**-11,
    torch.bfloat16: 2.0**-8,
    torch.float64: 2.0**-53,
}
"""Half the distance from 1 to the next value of each floating type (round to nearest)."""
_FLOAT64_MARGIN = 8 * 2.0**-53
"""Relative error of computing the quotient and the bound in float64 (a few roundings), with room."""


def nccl_avg_scalar(world_size: int, dtype: torch.dtype) -> float:
    """NCCL's premultiplier for avg on ``world_size`` ranks in ``dtype``: 1/n rounded as hostToDevRedOp does."""
    if world_size < 1:
        raise ValueError(f"world size must be at least 1, got {world_size}")
    if dtype == torch.float64:
        return 1.0 / world_size
    as_float = torch.tensor(1.0 / world_size, dtype=torch.float64).to(torch.float32)
    return float(as_float.to(dtype))


def allowed_error(world_size: int, dtype: torch.dtype, quotient: torch.Tensor, abs_sum: torch.Tensor) -> torch.Tensor:
    """Per element, how far a correct NCCL avg may be from the exact ``S/n`` (see the module docstring).

    ``quotient`` is the exact ``S/n`` and ``abs_sum`` the sum of the ranks' absolute inputs, both
    float64. Raises KeyError for a dtype that is not floating.
    """
    u = UNIT_ROUNDOFF[dtype]
    n = world_size
    c = nccl_avg_scalar(n, dtype)
    k = n - 1
    gamma = k * u / (1.0 - k * u) if k * u < 1.0 else float("inf")
    scalar_error = abs(c - 1.0 / n) + _FLOAT64_MARGIN / n
    sums = quotient.abs() * n  # |S|
    return sums * scalar_error + gamma * c * abs_sum + quotient.abs() * _FLOAT64_MARGIN


def _quotient_and_abs_sum(
    world_size: int, start: int, stop: int, seed: int, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    total = torch.zeros(stop - start, dtype=torch.float64, device=device)
    abs_sum = torch.zeros_like(total)
    for rank in range(world_size):
        # The pattern the ranks filled, sized to their dtype, in float64 (its integers are exact there).
        values = pattern(rank, start, stop, redop="avg", world_size=world_size, seed=seed, dtype=dtype, device=device)
        values = values.double()
        total += values
        abs_sum += values.abs()
    return total / world_size, abs_sum


def check_nccl_avg(buffers: PointBuffers, seed: int = 0, between_chunks: Callable[[], None] | None = None) -> int:
    """Wrong elements in this rank's output after one NCCL ``avg`` collective on freshly filled buffers.

    The same walk as ``executor.buffers.check_buffers`` (chunks of global indices, ``between_chunks``
    after each, the same number of times on every rank), but an element is wrong only when it is
    farther from the exact average than NCCL's own arithmetic can put it (:func:`allowed_error`).
    Raises ValueError for an op that does not reduce or a dtype that is not floating.
    """
    b = buffers
    if not b.op.spec.reduces:
        raise ValueError(f"{b.op.value} does not reduce: it has no average to check")
    dtype = b.output.dtype
    if dtype not in UNIT_ROUNDOFF:
        raise ValueError(f"avg is defined for floating dtypes only, not {dtype}")
    # The reduced part of the output (none on a reduce's non-roots), in the output's own indices, and
    # where in the inputs it comes from (the op's contract).
    required = required_output(b)
    own, shift = ((required[0][0], required[-1][1]), required[0][3]) if required else ((0, 0), 0)
    device = b.output.device
    wrong = torch.zeros((), dtype=torch.int64, device=device)
    for index in range(check_chunks(b.count)):
        start = max(own[0], index * CHUNK_ELEMS)
        stop = min(own[1], (index + 1) * CHUNK_ELEMS)
        if start < stop:
            quotient, abs_sum = _quotient_and_abs_sum(b.world_size, start + shift, stop + shift, seed, dtype, device)
            bound = allowed_error(b.world_size, dtype, quotient, abs_sum)
            actual = b.output[start:stop].double()
            # A NaN or an infinity is wrong: the comparison is False for it, so it counts.
            wrong += (~((actual - quotient).abs() <= bound)).sum()
        if between_chunks is not None:
            between_chunks()
    return int(wrong.item())
