"""Buffers of one measured point, their deterministic contents, and the data check.

Inputs come from a pattern of (rank, element index, seed) chosen so that the reduction over ranks is
exact in every dtype collbench measures (bfloat16's 8-bit mantissa included), whatever order the
algorithm combines them in:

* sum and avg: integers in [-2, 2]; partial sums stay below 256 for up to 128 ranks;
* prod: +-1, with a 2 on about one rank in 32 per element, so products are powers of two;
* min, max and ops that do not reduce: integers in [-50, 50].

The expected output is computed in float64 (int64 for integer dtypes) and cast once to the dtype, so
a correct collective matches it bit for bit and ``count_wrong`` compares exactly.

Filling and checking work in chunks of ``CHUNK_ELEMS`` elements on the buffers' own device, so the
memory they add is a few chunk-sized temporaries whatever the size (a whole-buffer float64 copy on
the host took 2.85 GB and 20 s for 256 MiB on 8 ranks), and on GPUs the work stays on the GPU.
``check_buffers`` can call back between chunks, so ranks with less to check (a reduce's non-roots)
wait one chunk at a time instead of for the whole check.

Buffer shapes follow nccl-tests (see ``collbench.schedules.ops``): ``count`` is the larger buffer.
In-place: all-reduce, broadcast and reduce use one buffer; all-gather's input is the rank's chunk of
the output, reduce-scatter's output is the rank's chunk of the input. The block ops split ``count``
into ``ops.block_bounds`` (``count // n`` each; a sweep rounds ``count`` to whole blocks first, as
nccl-tests does): scatter's input is the root's ``count`` and its output the rank's block (in place:
that block of the input); gather's input is the rank's block and its output the root's ``count`` (in
place: the block of the output). All-to-all and send/recv are out of place only, one allocation of
``2 * count`` (the schedule's buffer, ``ops.buffer_elems``): input, then output. Barrier moves no data:
its buffers are one token element and nothing is checked (:func:`checks_data`).

Expected values: all-to-all's output block j on rank r is rank j's input block r; scatter's output is
block r of the root's pattern; gather's root output holds every rank's pattern at its block; send/recv's
output is rank ``(r - 1) % n``'s input (a ring shift).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from collbench.runtime.executor.reduce import divide_exactly
from collbench.schedules.ops import Op, block_bounds, buffer_elems, chunk_bounds

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
CHUNK_ELEMS = 1 << 18
"""Elements filled or checked at a time: ~2 MiB per 64-bit temporary, a handful of them at once."""


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype for a canonical collbench dtype name (``float32``...); KeyError otherwise."""
    return TORCH_DTYPES[name]


def pattern(
    rank: int,
    start: int,
    stop: int,
    *,
    redop: str | None,
    seed: int = 0,
    dtype: torch.dtype = torch.int64,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Rank ``rank``'s input values for element indices [start, stop), on ``device``.

    ``redop`` None means the op does not reduce (all-gather, broadcast). Values are small integers
    (see the module docstring); the result has ``dtype``.
    """
    idx = torch.arange(start, stop, dtype=torch.int64, device=device)
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
    world_size: int,
    start: int,
    stop: int,
    *,
    redop: str,
    dtype: torch.dtype,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """The exact reduction over ranks 0..world_size-1 of the pattern on [start, stop), in ``dtype``."""
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    acc = pattern(0, start, stop, redop=redop, seed=seed, dtype=wide, device=device)
    for rank in range(1, world_size):
        values = pattern(rank, start, stop, redop=redop, seed=seed, dtype=wide, device=device)
        if redop in ("sum", "avg"):
            acc += values
        elif redop == "prod":
            acc *= values
        elif redop == "min":
            acc = torch.minimum(acc, values)
        else:
            acc = torch.maximum(acc, values)
    if redop == "avg":
        # Not ``acc / world_size``: on CUDA that multiplies by the reciprocal, one ulp off the quotient
        # in float64 (which the executor's correctly rounded division would then "miss").
        divide_exactly(acc, world_size)
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
    whole: torch.Tensor
    """The one allocation the input and output are views of, or the larger of the two: what a schedule
    runs in (``2 * count`` for all-to-all and send/recv, one token for barrier, else ``count``)."""


def checks_data(op: Op) -> bool:
    """Whether a call of ``op`` leaves anything to check: False for barrier, which moves no data."""
    return op.spec.payload


def _own_span(b: PointBuffers) -> tuple[int, int]:
    """The rank's part of a rooted or chunked op, in global element indices."""
    if b.op.spec.blocks:
        return block_bounds(b.count, b.world_size)[b.rank]
    return chunk_bounds(b.count, b.world_size)[b.rank]


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
    """Allocate one rank's buffers for ``op`` on ``count`` elements (contents undefined until ``fill``).

    Raises ValueError for ``in_place`` with an op that is out of place only (all-to-all, send/recv).
    """
    spec = op.spec
    if spec.out_of_place and in_place:
        raise ValueError(f"{op.value} is out of place only (its input and output are separate buffers)")
    big = torch.empty(buffer_elems(op, count), dtype=dtype, device=device)
    if spec.blocks:
        lo, hi = block_bounds(count, world_size)[rank]
    else:
        lo, hi = chunk_bounds(count, world_size)[rank]
    if not spec.payload:
        inp = out = big
    elif spec.out_of_place:
        inp, out = big[:count], big[count:]
    elif op in (Op.REDUCE_SCATTER, Op.SCATTER):
        inp, out = big, (big[lo:hi] if in_place else torch.empty(hi - lo, dtype=dtype, device=device))
    elif op in (Op.ALL_GATHER, Op.GATHER):
        out, inp = big, (big[lo:hi] if in_place else torch.empty(hi - lo, dtype=dtype, device=device))
    else:
        inp, out = big, (big if in_place else torch.empty(count, dtype=dtype, device=device))
    return PointBuffers(op, count, rank, world_size, root, in_place, inp, out, big)


def fill(buffers: PointBuffers, redop: str, seed: int = 0) -> None:
    """Write the rank's pattern into the input and the sentinel into output cells the op must write."""
    b = buffers
    if not checks_data(b.op):
        b.whole.zero_()  # the token: nothing reads what it holds
        return
    reducing = redop if b.op.spec.reduces else None
    if not b.in_place or b.op in (Op.ALL_GATHER, Op.GATHER):
        b.output.fill_(SENTINEL)
    lo, hi = _own_span(b)
    start, stop = (lo, hi) if b.op in (Op.ALL_GATHER, Op.GATHER) else (0, b.input.numel())
    # Non-root broadcast and scatter inputs are never read; their pattern differs from the root's, so
    # a broadcast or scatter that does nothing is caught.
    for first in range(start, stop, CHUNK_ELEMS):
        last = min(first + CHUNK_ELEMS, stop)
        values = pattern(b.rank, first, last, redop=reducing, seed=seed, dtype=b.input.dtype, device=b.input.device)
        b.input[first - start : last - start].copy_(values)


def expected_output(buffers: PointBuffers, redop: str, seed: int = 0) -> torch.Tensor | None:
    """What ``buffers.output`` must hold after the op; None where the op defines nothing (non-root reduce
    or gather, barrier). Elements past the last whole block of a block op are not defined either: the
    expectation covers the blocks only (``count`` is a multiple of the world size in a sweep)."""
    b = buffers
    dtype = b.output.dtype
    lo, hi = chunk_bounds(b.count, b.world_size)[b.rank]
    if not checks_data(b.op) or (b.op in (Op.REDUCE, Op.GATHER) and b.rank != b.root):
        return None
    if b.op.spec.ordered:
        return _expected_slice(b, redop, seed, 0, b.count).cpu()
    if b.op.spec.blocks or b.op is Op.SENDRECV:
        start, stop = _own_span(b) if b.op is Op.SCATTER else (0, b.count)
        if b.op.spec.blocks and b.op is not Op.SCATTER:
            stop = block_bounds(b.count, b.world_size)[-1][1]
        return _expected_slice(b, redop, seed, start, stop).cpu()
    if b.op is Op.ALL_REDUCE:
        return expected_reduction(b.world_size, 0, b.count, redop=redop, dtype=dtype, seed=seed)
    if b.op is Op.REDUCE_SCATTER:
        return expected_reduction(b.world_size, lo, hi, redop=redop, dtype=dtype, seed=seed)
    if b.op is Op.REDUCE:
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


def check_chunks(count: int) -> int:
    """How many chunks ``check_buffers`` takes for a point of ``count`` elements (the same on every rank)."""
    return max(1, math.ceil(count / CHUNK_ELEMS))


def _expected_slice(b: PointBuffers, redop: str, seed: int, start: int, stop: int) -> torch.Tensor:
    """The expected output for global element indices [start, stop), on the output's device."""
    dtype, device = b.output.dtype, b.output.device
    if b.op.spec.ordered:
        # Scan: ranks 0..r; exscan: ranks 0..r-1, and rank 0's output, which no rank writes, untouched.
        upto = b.rank + 1 if b.op is Op.SCAN else b.rank
        if upto == 0:
            return torch.full((stop - start,), SENTINEL, dtype=dtype, device=device)
        return expected_reduction(upto, start, stop, redop=redop, dtype=dtype, seed=seed, device=device)
    if b.op in (Op.ALL_REDUCE, Op.REDUCE, Op.REDUCE_SCATTER):
        return expected_reduction(b.world_size, start, stop, redop=redop, dtype=dtype, seed=seed, device=device)
    if b.op in (Op.BROADCAST, Op.SCATTER):
        return pattern(b.root, start, stop, redop=None, seed=seed, dtype=dtype, device=device)
    if b.op is Op.SENDRECV:
        return pattern((b.rank - 1) % b.world_size, start, stop, redop=None, seed=seed, dtype=dtype, device=device)
    bounds = block_bounds(b.count, b.world_size) if b.op.spec.blocks else chunk_bounds(b.count, b.world_size)
    parts = []
    for owner, (lo, hi) in enumerate(bounds):
        a, c = max(lo, start), min(hi, stop)
        if a >= c:
            continue
        if b.op is Op.ALL_TO_ALL:
            # Output block ``owner`` is rank ``owner``'s input block ``b.rank``: same offsets in it.
            mine = bounds[b.rank][0] - lo
            parts.append(pattern(owner, a + mine, c + mine, redop=None, seed=seed, dtype=dtype, device=device))
        else:
            parts.append(pattern(owner, a, c, redop=None, seed=seed, dtype=dtype, device=device))
    return torch.cat(parts) if parts else torch.empty(0, dtype=dtype, device=device)


def check_buffers(
    buffers: PointBuffers, redop: str, seed: int = 0, between_chunks: Callable[[], None] | None = None
) -> int:
    """Wrong elements in this rank's output after one call on freshly filled buffers.

    Works through the point in ``check_chunks(count)`` chunks of global element indices, on the
    output's device, and calls ``between_chunks`` after each (every rank the same number of times,
    whether it has anything to check there or not).
    """
    b = buffers
    # The output's place in global indices: reduce-scatter and scatter hold one chunk or block, a
    # reduce's or gather's non-root nothing, the block ops their whole blocks only; barrier nothing.
    if b.op in (Op.REDUCE_SCATTER, Op.SCATTER):
        own = _own_span(b)
    elif not checks_data(b.op) or (b.op in (Op.REDUCE, Op.GATHER) and b.rank != b.root):
        own = (0, 0)
    elif b.op.spec.blocks:
        own = (0, block_bounds(b.count, b.world_size)[-1][1])
    else:
        own = (0, b.count)
    wrong = torch.zeros((), dtype=torch.int64, device=b.output.device)
    for index in range(check_chunks(b.count)):
        start = max(own[0], index * CHUNK_ELEMS)
        stop = min(own[1], (index + 1) * CHUNK_ELEMS)
        if start < stop:
            expected = _expected_slice(b, redop, seed, start, stop)
            wrong += torch.ne(b.output[start - own[0] : stop - own[0]], expected).sum()
        if between_chunks is not None:
            between_chunks()
    return int(wrong.item())
