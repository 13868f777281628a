"""Buffers of one measured point, their deterministic contents, and the data check.

Inputs come from a pattern of (rank, element index, seed) chosen so that the reduction over ranks is
exact in every dtype collbench measures (bfloat16's 8-bit mantissa included), whatever order the
algorithm combines them in:

* sum and avg: integers in [-2, 2]; partial sums stay below 256 for up to 128 ranks;
* prod: +-1, with a 2 on about one rank in 32 per element, so products are powers of two;
* min, max and ops that do not reduce: integers in [-50, 50].

The expected output is computed in float64 (int64 for integer dtypes) and cast once to the dtype, so
a correct collective matches it bit for bit and ``count_wrong`` compares exactly.

Buffer shapes follow nccl-tests (see ``collbench.schedules.ops``): ``count`` is the larger buffer.
In-place: all-reduce, broadcast and reduce use one buffer; all-gather's input is the rank's chunk of
the output, reduce-scatter's output is the rank's chunk of the input.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from collbench.schedules.ops import FLOAT_DTYPES, Op, chunk_bounds

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int32": torch.int32,
    "int64": torch.int64,
}
SENTINEL = 77
"""What outputs hold before a collective writes them: outside every pattern's range, exact in bf16."""


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype for a canonical collbench dtype name (``float32``...); KeyError otherwise."""
    return TORCH_DTYPES[name]


def pattern(
    rank: int, start: int, stop: int, *, redop: str | None, seed: int = 0, dtype: torch.dtype = torch.int64
) -> torch.Tensor:
    """Rank ``rank``'s input values for element indices [start, stop).

    ``redop`` None means the op does not reduce (all-gather, broadcast). Values are small integers
    (see the module docstring); the result has ``dtype``.
    """
    idx = torch.arange(start, stop, dtype=torch.int64)
    if redop in ("sum", "avg"):
        values = (idx * 7 + (rank * 13 + seed * 3)) % 5 - 2
    elif redop == "prod":
        two = (idx * 5 + (rank + seed)) % 32 == 0
        minus = (idx + (2 * rank + seed)) % 3 == 0
        values = torch.where(two, 2, 1) * torch.where(minus, -1, 1)
    else:
        values = (idx * 31 + (rank * 17 + seed * 7)) % 101 - 50
    return values.to(dtype)


def expected_reduction(
    world_size: int, start: int, stop: int, *, redop: str, dtype: torch.dtype, seed: int = 0
) -> torch.Tensor:
    """The exact reduction over ranks 0..world_size-1 of the pattern on [start, stop), in ``dtype``."""
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    acc = pattern(0, start, stop, redop=redop, seed=seed, dtype=wide)
    for rank in range(1, world_size):
        values = pattern(rank, start, stop, redop=redop, seed=seed, dtype=wide)
        if redop in ("sum", "avg"):
            acc += values
        elif redop == "prod":
            acc *= values
        elif redop == "min":
            acc = torch.minimum(acc, values)
        else:
            acc = torch.maximum(acc, values)
    if redop == "avg":
        acc = acc / world_size
    return acc.to(dtype)


@dataclass(frozen=True, slots=True)
class PointBuffers:
    """One rank's input and output of one collective call (the same storage when in place)."""

    op: Op
    count: int
    rank: int
    world_size: int
    root: int
    in_place: bool
    input: torch.Tensor
    output: torch.Tensor


def make_buffers(
    op: Op,
    count: int,
    *,
    dtype: torch.dtype,
    rank: int,
    world_size: int,
    root: int = 0,
    in_place: bool,
    device: torch.device | str = "cpu",
) -> PointBuffers:
    """Allocate one rank's buffers for ``op`` on ``count`` elements (contents undefined until ``fill``)."""
    lo, hi = chunk_bounds(count, world_size)[rank]
    big = torch.empty(count, dtype=dtype, device=device)
    if op is Op.REDUCE_SCATTER:
        inp, out = big, (big[lo:hi] if in_place else torch.empty(hi - lo, dtype=dtype, device=device))
    elif op is Op.ALL_GATHER:
        out, inp = big, (big[lo:hi] if in_place else torch.empty(hi - lo, dtype=dtype, device=device))
    else:
        inp, out = big, (big if in_place else torch.empty(count, dtype=dtype, device=device))
    return PointBuffers(op, count, rank, world_size, root, in_place, inp, out)


def fill(buffers: PointBuffers, redop: str, seed: int = 0) -> None:
    """Write the rank's pattern into the input and the sentinel into output cells the op must write."""
    b = buffers
    reducing = redop if b.op.spec.reduces else None
    if not b.in_place or b.op is Op.ALL_GATHER:
        b.output.fill_(SENTINEL)
    lo, hi = chunk_bounds(b.count, b.world_size)[b.rank]
    start, stop = (lo, hi) if b.op is Op.ALL_GATHER else (0, b.input.numel())
    # Non-root broadcast inputs are never read; their pattern differs from the root's, so a
    # broadcast that does nothing is caught.
    values = pattern(b.rank, start, stop, redop=reducing, seed=seed, dtype=b.input.dtype)
    b.input.copy_(values.to(b.input.device))


def expected_output(buffers: PointBuffers, redop: str, seed: int = 0) -> torch.Tensor | None:
    """What ``buffers.output`` must hold after the op; None where the op defines nothing (non-root reduce)."""
    b = buffers
    dtype = b.output.dtype
    lo, hi = chunk_bounds(b.count, b.world_size)[b.rank]
    if b.op is Op.ALL_REDUCE:
        return expected_reduction(b.world_size, 0, b.count, redop=redop, dtype=dtype, seed=seed)
    if b.op is Op.REDUCE_SCATTER:
        return expected_reduction(b.world_size, lo, hi, redop=redop, dtype=dtype, seed=seed)
    if b.op is Op.REDUCE:
        if b.rank != b.root:
            return None
        return expected_reduction(b.world_size, 0, b.count, redop=redop, dtype=dtype, seed=seed)
    if b.op is Op.BROADCAST:
        return pattern(b.root, 0, b.count, redop=None, seed=seed, dtype=dtype)
    parts = [
        pattern(owner, start, stop, redop=None, seed=seed, dtype=dtype)
        for owner, (start, stop) in enumerate(chunk_bounds(b.count, b.world_size))
    ]
    return torch.cat(parts) if parts else torch.empty(0, dtype=dtype)


def count_wrong(actual: torch.Tensor, expected: torch.Tensor | None) -> int:
    """Elements of ``actual`` that differ from ``expected`` (exact comparison); 0 when nothing is defined."""
    if expected is None:
        return 0
    if actual.shape != expected.shape:
        raise ValueError(f"output has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    return int(torch.ne(actual.cpu(), expected.cpu()).sum().item())


def check_buffers(buffers: PointBuffers, redop: str, seed: int = 0) -> int:
    """Wrong elements in this rank's output after one call on freshly filled buffers."""
    return count_wrong(buffers.output, expected_output(buffers, redop, seed))


def redop_allowed(dtype_name: str, redop: str) -> bool:
    """avg divides, so it is defined for floating dtypes only (as in NCCL)."""
    return redop != "avg" or dtype_name in FLOAT_DTYPES
