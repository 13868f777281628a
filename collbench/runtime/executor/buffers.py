"""Buffers of one measured point, their deterministic contents, and the data check.

Inputs come from a pattern of (rank, element index, seed), sized to the dtype and the world, chosen
so that every partial reduction over any subset of ranks, in any order, is an integer the dtype holds
exactly (bfloat16's 8-bit significand and int8's 127 included) and never wraps an unsigned type:

* sum and avg: over every window of ``P`` consecutive ranks, one rank each of -2, -1, 0, 1, 2 (unsigned
  types: 0, 1, 2, 3, 4) and the rest 0, so any subset of ``n`` ranks sums within
  ``3 * ceil(n / P)`` (unsigned: ``10 * ceil(n / P)``); ``P`` is 5 (every rank nonzero but one in five)
  until the dtype's exact integers run out, then grows with the world: int8 at 64 ranks keeps 5,
  at 16,384 ranks 391;
* prod: +-1 (unsigned: 1), with a 2 on one rank in ``Q`` per element (``Q`` at least 32, more where
  ``ceil(n / Q)`` twos would pass the dtype's largest power of two: int8 holds 2^6, float16 2^15),
  so every partial product is a power of two the dtype holds;
* min, max and ops that do not reduce: integers in [-50, 50] (unsigned: [78, 178]).

Why not nccl-tests' own data (NVIDIA/nccl-tests @ a0b82b2, 2.19.6, verifiable/verifiable.cu, which
src/common.cu's ``InitData``/``InitDataReduce`` call): its integer inputs are random bits of the whole
width (``genInput``, lines 756-770), whose sums and products wrap modulo 2^bits, exact only because
NCCL's integer arithmetic wraps the same way in every order; torch's CPU kernels make no such promise for
signed types, and a wrapped result cannot tell a rank counted twice from one counted once. Its float
products follow the approach taken here (``genInOutFloatProd``, lines 716-748): every rank gives 1 or a
power of two whose exponents over the ranks sum within the type's (``genSumXY``, lines 576-620), one
rank alone a mantissa. avg of integers is, in NCCL, the wrapped sum divided by the rank count and
truncated toward zero (``ReduceAvg_Base<T, true>::postOp``, lines 392-398); gloo has no avg, and the
sweep runs avg for floating dtypes only.

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

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from collbench.runtime.executor.reduce import divide_exactly
from collbench.schedules.contracts import contract
from collbench.schedules.ops import Op, buffer_elems

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int32": torch.int32,
    "int64": torch.int64,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "uint32": torch.uint32,
    "uint64": torch.uint64,
}
SENTINEL = 77
"""What outputs hold before a collective writes them: outside every pattern's range ([-50, 50] signed,
[78, 178] unsigned), exact in bfloat16 and int8."""
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
    world_size: int,
    seed: int = 0,
    dtype: torch.dtype = torch.int64,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """Rank ``rank``'s input values for element indices [start, stop), on ``device``, in ``dtype``.

    ``redop`` None means the op does not reduce (all-gather, broadcast). Values are small integers sized
    to ``dtype`` and ``world_size`` ranks (see the module docstring).
    """
    period = pattern_period(redop, world_size, dtype)
    if stop - start <= period:
        return _pattern_values(
            rank, start, stop, redop=redop, world_size=world_size, seed=seed, dtype=dtype, device=device
        ).to(dtype)
    first = _pattern_values(
        rank, start, start + period, redop=redop, world_size=world_size, seed=seed, dtype=dtype, device=device
    ).to(dtype)
    return _tiled(first, stop - start)


@dataclass(frozen=True, slots=True)
class ExactIntegers:
    """The integers a dtype holds exactly, as far as the pattern and its int64 or float64 expectation go."""

    lowest: int
    """Every integer from here to ``highest`` is exact (0 for an unsigned type)."""
    highest: int
    top_power_of_two: int
    """The largest k such that 2^k (and -2^k for a signed type) is exact: a product's limit."""


def exact_integers(dtype: torch.dtype) -> ExactIntegers:
    """What ``dtype`` holds exactly, from torch's own limits: a floating type's integers up to
    2^(significand bits) and powers of two up to its largest; an integer type's range, cut to int64's
    where the expectation is computed (uint64)."""
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
        highest = 1 << round(1 - math.log2(info.eps))
        return ExactIntegers(-highest, highest, math.floor(math.log2(info.max)))
    iinfo = torch.iinfo(dtype)
    highest = min(iinfo.max, torch.iinfo(torch.int64).max)
    return ExactIntegers(max(iinfo.min, -highest), highest, highest.bit_length() - 1)


def sum_period(world_size: int, dtype: torch.dtype) -> int:
    """``P``, the window of ranks over which a sum's (or avg's) pattern gives each of its five values once.

    Any subset of ``world_size`` ranks holds at most ``ceil(n / P)`` ranks of each value, so its sum
    stays within 3 of that (-2 - 1 or 1 + 2; unsigned 0 + ... + 4 = 10): ``P`` is the least, from 5,
    that keeps it inside ``dtype``'s exact integers, and prime to 7 and 13 (the pattern's steps along
    the index and the ranks), so each window and each period of ``P`` indices meets every value once.
    """
    room = exact_integers(dtype)
    per_window = 3 if room.lowest < 0 else 10
    windows = room.highest // per_window
    period = max(5, -(-world_size // windows))
    while period % 7 == 0 or period % 13 == 0:
        period += 1
    return period


def prod_spacing(world_size: int, dtype: torch.dtype) -> int:
    """``Q``: one rank in every ``Q`` consecutive ranks holds a 2 at each element of a prod's pattern.

    At least 32 (a 2 is rare, as nccl-tests keeps its products' exponents few); more where
    ``ceil(n / Q)`` twos would pass ``dtype``'s largest power of two; prime to 5 (the step along the
    index), so each period of ``Q`` indices puts the 2 on every rank of a window once.
    """
    top = exact_integers(dtype).top_power_of_two
    spacing = max(32, -(-world_size // top))
    while spacing % 5 == 0:
        spacing += 1
    return spacing


def pattern_period(redop: str | None, world_size: int, dtype: torch.dtype) -> int:
    """The period of every rank's pattern in the element index: ``sum_period`` for sum and avg (7 * P is
    0 mod P), ``3 * prod_spacing`` for prod (its 2s repeat every Q indices, its signs every 3; Q is prime
    to 3 or a multiple of it, so 3 * Q is a common period), 101 otherwise (31 * 101 is 0 mod 101).

    Filling and checking compute one period and repeat it: the arithmetic on an int64 index of every
    element (and, to check a reduction, every rank's pattern of it) took 0.45 s per rank at 16 MiB on
    4 ranks, the largest part of a tune's per-point time outside its calls on the namespace cluster;
    the values are the same.
    """
    if redop in ("sum", "avg"):
        return sum_period(world_size, dtype)
    if redop == "prod":
        return 3 * prod_spacing(world_size, dtype)
    return 101


def _tiled(first: torch.Tensor, length: int) -> torch.Tensor:
    """``first`` (one period) repeated to ``length`` elements."""
    return first.repeat(-(-length // first.numel()))[:length]


def _pattern_values(
    rank: int | range,
    start: int,
    stop: int,
    *,
    redop: str | None,
    world_size: int,
    seed: int,
    dtype: torch.dtype,
    device: torch.device | str,
) -> torch.Tensor:
    """The pattern of :func:`pattern` computed element by element, as int64: one row, or for ``rank`` a
    range of ranks one row per rank."""
    idx = torch.arange(start, stop, dtype=torch.int64, device=device)
    # A range of ranks is a column against the row of indices: the arithmetic below broadcasts to (R, L).
    r: int | torch.Tensor = (
        rank
        if isinstance(rank, int)
        else torch.arange(rank.start, rank.stop, dtype=torch.int64, device=device).unsqueeze(1)
    )
    signed = exact_integers(dtype).lowest < 0
    if redop in ("sum", "avg"):
        window = sum_period(world_size, dtype)
        step = (idx * 7 + (r * 13 + seed * 3)) % window
        # Five of each window's steps carry the values, the rest 0 (none when the window is 5).
        values = torch.where(step < 5, step - 2 if signed else step, 0)
    elif redop == "prod":
        two = (idx * 5 + (r + seed)) % prod_spacing(world_size, dtype) == 0
        values = torch.where(two, 2, 1)
        if signed:
            values = values * torch.where((idx + (2 * r + seed)) % 3 == 0, -1, 1)
    else:
        values = (idx * 31 + (r * 17 + seed * 7)) % 101 - (50 if signed else -78)
    return values


def expected_reduction(
    ranks: int,
    start: int,
    stop: int,
    *,
    redop: str,
    dtype: torch.dtype,
    world_size: int | None = None,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """The exact reduction over ranks 0..ranks-1 of the pattern on [start, stop), in ``dtype``.

    ``world_size`` (default ``ranks``) is the world the pattern is sized for: a scan's prefix of
    ``ranks`` reduces the inputs of the whole world's pattern.
    """
    world = ranks if world_size is None else world_size
    period = pattern_period(redop, world, dtype)
    if stop - start > period:
        # Every rank's pattern has the same period, so their reduction has it too.
        first = expected_reduction(
            ranks, start, start + period, redop=redop, dtype=dtype, world_size=world, seed=seed, device=device
        )
        return _tiled(first, stop - start)
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    if redop == "prod":
        acc = _product(ranks, start, stop, world=world, seed=seed, dtype=dtype, wide=wide, device=device)
    else:
        # Every rank's pattern repeats along the ranks with period ``cycle`` (13 and 17 are prime to
        # the windows); ``ranks`` hold ``ranks // cycle`` whole cycles and the first ``ranks % cycle``
        # again, so the work is O(cycle), not O(ranks), per element: a sum is whole cycles times one
        # cycle's sum plus the rest's, a min or max one cycle's (or fewer ranks').
        cycle = sum_period(world, dtype) if redop in ("sum", "avg") else 101
        whole, rest = divmod(ranks, cycle)
        if redop in ("sum", "avg") and whole:
            acc = whole * _reduced(cycle, start, stop, redop, world, seed, dtype, wide, device)
            if rest:
                acc += _reduced(rest, start, stop, redop, world, seed, dtype, wide, device)
        elif redop in ("sum", "avg"):
            acc = _reduced(rest, start, stop, redop, world, seed, dtype, wide, device)
        else:
            acc = _reduced(min(ranks, cycle), start, stop, redop, world, seed, dtype, wide, device)
    if redop == "avg":
        # Not ``acc / ranks``: on CUDA that multiplies by the reciprocal, one ulp off the quotient
        # in float64 (which the executor's correctly rounded division would then "miss").
        divide_exactly(acc, ranks)
    return acc.to(dtype)


_RANK_REDUCTIONS: dict[
    str, tuple[Callable[..., torch.Tensor], Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]
] = {
    "sum": (torch.sum, torch.add),
    "avg": (torch.sum, torch.add),
    "min": (torch.amin, torch.minimum),
    "max": (torch.amax, torch.maximum),
}
"""A reduction over ranks: how a block of rank rows reduces along its ranks, and how two blocks' results combine."""


def _reduced(
    ranks: int,
    start: int,
    stop: int,
    redop: str,
    world: int,
    seed: int,
    dtype: torch.dtype,
    wide: torch.dtype,
    device: torch.device | str,
) -> torch.Tensor:
    """Sum (avg), min or max over ranks 0..ranks-1 (at least one) of the pattern, in ``wide``.

    Ranks a block at a time, each block one 2-D pattern (a row per rank) reduced along its ranks, a
    block of ``CHUNK_ELEMS`` values as a chunk of the check: a call per rank cost ~0.1 ms."""
    along, combine = _RANK_REDUCTIONS[redop]
    block = max(1, CHUNK_ELEMS // max(1, stop - start))
    acc: torch.Tensor | None = None
    for first in range(0, ranks, block):
        rows = range(first, min(first + block, ranks))
        values = _pattern_values(
            rows, start, stop, redop=redop, world_size=world, seed=seed, dtype=dtype, device=device
        ).to(wide)
        part = along(values, dim=0)
        acc = part if acc is None else combine(acc, part)
    if acc is None:
        raise ValueError(f"a reduction needs at least one rank, got {ranks}")
    return acc


def _product(
    ranks: int,
    start: int,
    stop: int,
    *,
    world: int,
    seed: int,
    dtype: torch.dtype,
    wide: torch.dtype,
    device: torch.device | str,
) -> torch.Tensor:
    """The product over ranks 0..ranks-1 of the prod pattern, in ``wide``, from its twos and minus
    signs counted in closed form (O(1) per element: multiplying 16,384 ranks' rows took seconds).

    At index i, rank r holds a 2 where ``r = -(5i + seed) mod Q`` (one residue of every ``Q`` ranks)
    and a minus sign where ``r = i + seed mod 3`` (``i + 2r + seed = 0 mod 3``, 2 being its own inverse
    mod 3), as :func:`_pattern_values` makes them; tests check the two against each other."""
    idx = torch.arange(start, stop, dtype=torch.int64, device=device)
    spacing = prod_spacing(world, dtype)
    first_two = (-(idx * 5 + seed)) % spacing
    twos = torch.div(ranks - first_two + spacing - 1, spacing, rounding_mode="floor")
    magnitude = torch.ldexp(torch.ones_like(idx, dtype=torch.float64), twos).to(wide)
    if exact_integers(dtype).lowest >= 0:
        return magnitude
    minuses = torch.div(ranks - (idx + seed) % 3 + 2, 3, rounding_mode="floor")
    return torch.where(minuses % 2 == 1, -magnitude, magnitude)


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
    terms = contract(op)
    big = torch.empty(buffer_elems(op, count), dtype=dtype, device=device)
    in_span = terms.input_span(rank, world_size, count)
    out_span = terms.output_span(rank, world_size, count)

    def part(span: tuple[int, int]) -> torch.Tensor:
        # Where the schedule's buffer is the other side: a view of it in place, else a buffer of its own.
        if in_place:
            return big if span == (0, count) else big[span[0] : span[1]]
        return torch.empty(span[1] - span[0], dtype=dtype, device=device)

    if not spec.payload:
        inp = out = big
    elif spec.out_of_place:
        inp, out = big[in_span[0] : in_span[1]], big[out_span[0] : out_span[1]]
    elif in_span == (0, count):
        inp, out = big, part(out_span)
    else:
        inp, out = part(in_span), big
    return PointBuffers(op, count, rank, world_size, root, in_place, inp, out, big)


def fill(buffers: PointBuffers, redop: str, seed: int = 0) -> None:
    """Write the rank's pattern into the input and the sentinel into output cells the op must write."""
    b = buffers
    if not checks_data(b.op):
        b.whole.zero_()  # the token: nothing reads what it holds
        return
    reducing = redop if b.op.spec.reduces else None
    terms = contract(b.op)
    start, stop = terms.input_span(b.rank, b.world_size, b.count)
    out_lo, out_hi = terms.output_span(b.rank, b.world_size, b.count)
    if not b.in_place or not start <= out_lo <= out_hi <= stop:
        # Output cells the input does not overwrite: a collective that leaves them is caught.
        b.output.fill_(SENTINEL)
    # Non-root broadcast and scatter inputs are never read; their pattern differs from the root's, so
    # a broadcast or scatter that does nothing is caught.
    for first in range(start, stop, CHUNK_ELEMS):
        last = min(first + CHUNK_ELEMS, stop)
        values = pattern(
            b.rank,
            first,
            last,
            redop=reducing,
            world_size=b.world_size,
            seed=seed,
            dtype=b.input.dtype,
            device=b.input.device,
        )
        b.input[first - start : last - start].copy_(values)


def required_output(b: PointBuffers) -> list[tuple[int, int, int, int]]:
    """The op's requirements (``contracts.OpContract.requires``) inside the rank's output, in the output's
    own indices: output elements ``[start, stop)`` hold the data of ``contributors`` at input index + ``shift``."""
    if not checks_data(b.op):
        return []
    terms = contract(b.op)
    lo, hi = terms.output_span(b.rank, b.world_size, b.count)
    return [
        (max(a, lo) - lo, min(z, hi) - lo, mask, shift + lo)
        for a, z, mask, shift in terms.requires(b.rank, b.world_size, b.count, b.root)
        if max(a, lo) < min(z, hi)
    ]


def expected_output(buffers: PointBuffers, redop: str, seed: int = 0) -> torch.Tensor | None:
    """What ``buffers.output`` must hold after the op; None where the op defines nothing (non-root reduce
    or gather, barrier). Elements past the last whole block of a block op are not defined either: the
    expectation covers the blocks only (``count`` is a multiple of the world size in a sweep)."""
    required = required_output(buffers)
    if not required:
        return None
    return _expected_slice(buffers, redop, seed, required[0][0], required[-1][1]).cpu()


def count_wrong(actual: torch.Tensor, expected: torch.Tensor | None) -> int:
    """Elements of ``actual`` that differ from ``expected`` (exact comparison); 0 when nothing is defined."""
    if expected is None:
        return 0
    if actual.shape != expected.shape:
        raise ValueError(f"output has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    return int(torch.ne(actual.cpu(), expected.cpu()).sum().item())


KEEP_OUTPUT_BYTES = 64 << 20
"""The largest point (``count`` x element bytes, the same on every rank) whose first call's output is
copied aside and checked after its timed calls. A larger one is checked right after that call, with
one warm-up call between the check and the timing: its copy would be one more buffer of the largest
size a rank holds (a 256 MiB ring all-reduce's peak 3.73x its buffer with the check before the
timing, 4.46x with the copy: bench_check_memory), so the largest point that fits would shrink, while
one more call of it costs a tune at most the time of that size's calls."""


def keeps_output(count: int, elem_bytes: int) -> bool:
    """Whether a point's data check reads a copy of its first call's output after the timing
    (:data:`KEEP_OUTPUT_BYTES`); else it checks right after that call, before a warm-up and the timing."""
    return count * elem_bytes <= KEEP_OUTPUT_BYTES


def kept_output(buffers: PointBuffers) -> PointBuffers:
    """``buffers`` with their output copied aside as the call just made left it, for a data check made
    after the calls that follow (which overwrite it, and in place their own input too): the check of
    the copy is the check of that call. A rank with nothing defined in its output (a reduce's or
    gather's non-roots, barrier) copies nothing and gets ``buffers`` back: its check reads nothing."""
    if not required_output(buffers):
        return buffers
    return dataclasses.replace(buffers, output=buffers.output.clone())


def check_chunks(count: int) -> int:
    """How many chunks ``check_buffers`` takes for a point of ``count`` elements (the same on every rank)."""
    return max(1, math.ceil(count / CHUNK_ELEMS))


def _expected_slice(b: PointBuffers, redop: str, seed: int, start: int, stop: int) -> torch.Tensor:
    """The expected output for output indices [start, stop), on the output's device."""
    dtype, device = b.output.dtype, b.output.device
    parts = []
    for lo, hi, contributors, shift in required_output(b):
        a, c = max(lo, start), min(hi, stop)
        if a >= c:
            continue
        if contributors == 0:
            # Defined as untouched (exscan's rank 0, which no rank writes): still the sentinel.
            values = torch.full((c - a,), SENTINEL, dtype=dtype, device=device)
        elif b.op.spec.reduces:
            # The contributors are ranks 0..k-1 (every rank, or a scan's prefix).
            values = expected_reduction(
                contributors.bit_length(),
                a + shift,
                c + shift,
                redop=redop,
                dtype=dtype,
                world_size=b.world_size,
                seed=seed,
                device=device,
            )
        else:
            # One contributor: the rank whose data it is (the root's, a neighbour's, a block's owner).
            owner = contributors.bit_length() - 1
            values = pattern(
                owner, a + shift, c + shift, redop=None, world_size=b.world_size, seed=seed, dtype=dtype, device=device
            )
        parts.append(values)
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
    # The output's defined part, in its own indices: a reduce's or gather's non-root nothing, the block
    # ops their whole blocks only; barrier nothing.
    required = required_output(b)
    own = (required[0][0], required[-1][1]) if required else (0, 0)
    wrong = torch.zeros((), dtype=torch.int64, device=b.output.device)
    for index in range(check_chunks(b.count)):
        start = max(own[0], index * CHUNK_ELEMS)
        stop = min(own[1], (index + 1) * CHUNK_ELEMS)
        if start < stop:
            expected = _expected_slice(b, redop, seed, start, stop)
            wrong += torch.ne(b.output[start:stop], expected).sum()
        if between_chunks is not None:
            between_chunks()
    return int(wrong.item())
