"""One contract per op: where a rank's input and output lie in the schedule's buffer, whose data it
holds before the first step, and what every element must hold after the last.

The verifier (``verifier.py``: symbolically), the executor's buffers and its data check
(``runtime/executor/buffers.py``: on real values) and the sweep's call around a schedule
(``runtime/sweep/worker.py``) all read these, so an op is defined once; they never ask an op its name.
The byte count and busbw factor are the op's :class:`collbench.schedules.ops.OpSpec`'s.

Coordinates are those of one rank's schedule buffer (``ops.buffer_elems``): ``count`` elements, then
``count`` of output for the out-of-place ops, one token for barrier. Rank ``j``'s input element at index
``k`` there is "rank j's data at k"; a requirement ``(start, stop, contributors, shift)`` says elements
``[start, stop)`` must hold the data of the ``contributors`` (a bitmask of ranks) at index + ``shift``,
combined by the reduction where the op reduces.

Adding an op: its :class:`collbench.schedules.ops.OpSpec` and one entry in :data:`CONTRACTS` (its spans and
its ``requires``); a test checks every op has one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from collbench.schedules.ops import Op, block_bounds, chunk_bounds

Span = tuple[int, int]
"""Half-open element range ``[start, stop)`` in the schedule's buffer."""
Need = tuple[int, int, int, int]
"""``(start, stop, contributors, shift)``: elements ``[start, stop)`` hold the contributors' data at index
+ shift."""
SpanOf = Callable[[int, int, int], Span]
"""``(rank, world_size, count) -> Span``."""
NeedsOf = Callable[[int, int, int, int], list[Need]]
"""``(rank, world_size, count, root) -> [Need, ...]``."""


@dataclass(frozen=True, slots=True)
class OpContract:
    """What a call of one op takes and leaves, per rank (see the module docstring for the coordinates)."""

    op: Op
    input_span: SpanOf
    """Where the rank's input lies (its chunk or block for the gathers, else the first ``count``)."""
    output_span: SpanOf
    """Where the rank's output lies (its chunk or block for reduce-scatter and scatter, after the input
    for the out-of-place ops, else the first ``count``)."""
    requires: NeedsOf
    """What must hold where after the last step (nothing on a reduce's or gather's non-roots)."""
    from_root: bool = False
    """Whether only the root's input is data (broadcast, scatter): other ranks' inputs are never read."""
    native_equal_chunks: bool = False
    """Whether the backend's own call takes equal chunks (torch's ``reduce_scatter_tensor`` and
    ``all_gather_into_tensor``): a native point's count is rounded down to a multiple of the world size,
    as nccl-tests rounds it."""

    def holds(self, rank: int, world_size: int, count: int, root: int) -> list[Span]:
        """Where the rank's own data lies before the first step (nothing on a broadcast's non-roots)."""
        if self.from_root and rank != root:
            return []
        return [self.input_span(rank, world_size, count)]


def _whole(rank: int, world_size: int, count: int) -> Span:
    return (0, count)


def _chunk(rank: int, world_size: int, count: int) -> Span:
    return chunk_bounds(count, world_size)[rank]


def _block(rank: int, world_size: int, count: int) -> Span:
    return block_bounds(count, world_size)[rank]


def _after_input(rank: int, world_size: int, count: int) -> Span:
    return (count, 2 * count)


def _token(rank: int, world_size: int, count: int) -> Span:
    return (0, 1)


def _everyone(world_size: int) -> int:
    return (1 << world_size) - 1


def _all_reduce(rank: int, n: int, count: int, root: int) -> list[Need]:
    return [(0, count, _everyone(n), 0)]


def _reduce_scatter(rank: int, n: int, count: int, root: int) -> list[Need]:
    return [(*chunk_bounds(count, n)[rank], _everyone(n), 0)]


def _all_gather(rank: int, n: int, count: int, root: int) -> list[Need]:
    return [(a, z, 1 << owner, 0) for owner, (a, z) in enumerate(chunk_bounds(count, n))]


def _broadcast(rank: int, n: int, count: int, root: int) -> list[Need]:
    return [(0, count, 1 << root, 0)]


def _reduce(rank: int, n: int, count: int, root: int) -> list[Need]:
    return [(0, count, _everyone(n), 0)] if rank == root else []


def _all_to_all(rank: int, n: int, count: int, root: int) -> list[Need]:
    # Output block j (at count + j*b) holds rank j's input block ``rank`` (at rank*b).
    blocks = block_bounds(count, n)
    return [(count + a, count + z, 1 << j, blocks[rank][0] - count - a) for j, (a, z) in enumerate(blocks)]


def _scatter(rank: int, n: int, count: int, root: int) -> list[Need]:
    return [(*block_bounds(count, n)[rank], 1 << root, 0)]


def _gather(rank: int, n: int, count: int, root: int) -> list[Need]:
    if rank != root:
        return []
    return [(a, z, 1 << owner, 0) for owner, (a, z) in enumerate(block_bounds(count, n))]


def _sendrecv(rank: int, n: int, count: int, root: int) -> list[Need]:
    # The ring shift: the output holds the left neighbour's input.
    return [(count, 2 * count, 1 << ((rank - 1) % n), -count)]


def _scan(rank: int, n: int, count: int, root: int) -> list[Need]:
    # Ranks 0..rank, combined in rank order (the verifier holds an ordered op to it).
    return [(0, count, (1 << (rank + 1)) - 1, 0)]


def _exscan(rank: int, n: int, count: int, root: int) -> list[Need]:
    # Ranks 0..rank-1 in the output; rank 0 has no prefix: its output stays unwritten (no defined data,
    # contributors 0), as MPI_Exscan leaves it.
    return [(count, 2 * count, (1 << rank) - 1, -count if rank else 0)]


def _barrier(rank: int, n: int, count: int, root: int) -> list[Need]:
    # The token: every rank has heard from every rank (its value means nothing and is never checked).
    return [(0, 1, _everyone(n), 0)]


CONTRACTS: dict[Op, OpContract] = {
    Op.ALL_REDUCE: OpContract(Op.ALL_REDUCE, _whole, _whole, _all_reduce),
    Op.REDUCE_SCATTER: OpContract(Op.REDUCE_SCATTER, _whole, _chunk, _reduce_scatter, native_equal_chunks=True),
    Op.ALL_GATHER: OpContract(Op.ALL_GATHER, _chunk, _whole, _all_gather, native_equal_chunks=True),
    Op.BROADCAST: OpContract(Op.BROADCAST, _whole, _whole, _broadcast, from_root=True),
    Op.REDUCE: OpContract(Op.REDUCE, _whole, _whole, _reduce),
    Op.ALL_TO_ALL: OpContract(Op.ALL_TO_ALL, _whole, _after_input, _all_to_all),
    Op.SCATTER: OpContract(Op.SCATTER, _whole, _block, _scatter, from_root=True),
    Op.GATHER: OpContract(Op.GATHER, _block, _whole, _gather),
    Op.SENDRECV: OpContract(Op.SENDRECV, _whole, _after_input, _sendrecv),
    Op.BARRIER: OpContract(Op.BARRIER, _token, _token, _barrier),
    Op.SCAN: OpContract(Op.SCAN, _whole, _whole, _scan),
    Op.EXSCAN: OpContract(Op.EXSCAN, _whole, _after_input, _exscan),
}


def contract(op: Op) -> OpContract:
    """The op's contract (every op has one: tests/unit/test_contracts.py)."""
    return CONTRACTS[op]
