"""The collective operations, each with the facts that belong to it (as nccl-tests keeps them).

Counting convention (the same as nccl-tests', so numbers compare): ``count`` is the number of elements
in the larger of one rank's send and receive buffers, and ``size_bytes = count * dtype size``. For
all-gather that is the gathered output; for reduce-scatter the full input. Rank ``r``'s share of such a
buffer is ``chunk_bounds(count, world_size)[r]``: counts need not divide by the world size.

All-to-all, scatter and gather move equal blocks, one per rank, as nccl-tests' ``alltoall.cu``,
``scatter.cu`` and ``gather.cu`` do: ``count`` is the whole per-rank buffer (all-to-all's send and
receive buffers, scatter's root input, gather's root output), a block is ``count // n`` elements and a
count that does not divide is rounded down to ``n * (count // n)`` (:func:`op_count`), as nccl-tests'
``*GetCollByteCount`` do. Send/recv (``sendrecv.cu``) moves the whole buffer one rank along a ring.
Barrier moves no payload: its count is 0 and only its time is reported.

Scan and exclusive scan (``MPI_Scan``, ``MPI_Exscan``) are prefix reductions: with ``x_r`` rank r's
buffer, scan leaves ``x_0 op x_1 op ... op x_r`` on rank r, exscan ``x_0 op ... op x_(r-1)``. Their
reduction need not commute, so the order of the operands is part of the result. Exscan's rank 0 has no
prefix: MPI leaves its output undefined, and collbench never writes it (its output keeps what was
there). Scan works in place; exscan needs its input beside its output (rank r must pass on its own
prefix while keeping the one before it), so its buffer is input then output, like all-to-all's.
nccl-tests has neither: no log can hold them. Their busbw factor is 1, as broadcast's: a chain passes
the whole buffer over each link once.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from collbench.errors import UnknownNameError


class Op(str, Enum):
    ALL_REDUCE = "all-reduce"
    REDUCE_SCATTER = "reduce-scatter"
    ALL_GATHER = "all-gather"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_TO_ALL = "all-to-all"
    SCATTER = "scatter"
    GATHER = "gather"
    SENDRECV = "sendrecv"
    BARRIER = "barrier"
    SCAN = "scan"
    EXSCAN = "exscan"

    def __str__(self) -> str:
        return self.value

    @property
    def spec(self) -> OpSpec:
        return OP_SPECS[self]

    @classmethod
    def parse(cls, name: str) -> Op:
        """Accept ``all-reduce``, ``all_reduce``, ``allreduce`` and the like; raise UnknownNameError."""
        key = name.strip().lower().replace("_", "-")
        key = _OP_ALIASES.get(key.replace("-", ""), key)
        for op in cls:
            if key in (op.value, op.value.replace("-", "")):
                return op
        raise UnknownNameError("op", name, [op.value for op in cls])


@dataclass(frozen=True, slots=True)
class OpSpec:
    op: Op
    reduces: bool
    """Whether data from several ranks is combined (a reduction applies)."""
    rooted: bool
    """Whether one rank is special (broadcast source, reduce destination)."""
    busbw_numerator: int
    """busbw = algbw * busbw_numerator * (n - 1) / n, or algbw when 0 (broadcast, reduce)."""
    nccl_name: str
    """The name in NCCL's tuner config and nccl-tests (allreduce, allgather, ...)."""
    mpi_name: str
    """The MPI call an MPI library's harness makes for it, lower case without ``MPI_`` (``allreduce``,
    ``bcast``, ``reduce_scatter``; ``sendrecv``: point-to-point, nothing to force): the name Open MPI's
    coll/tuned and MPICH's CVARs give the collective, whichever MPI library runs it."""
    nccl_tuned: bool = True
    """Whether NCCL chooses an algorithm and protocol for it (the five reductions and gathers). The
    others are grouped point-to-point in NCCL (``ncclSend``/``ncclRecv``): nothing to choose or export."""
    blocks: bool = False
    """Whether the buffer is ``n`` equal blocks, one per rank (all-to-all, scatter, gather)."""
    payload: bool = True
    """False for barrier: no data, a time only, no bandwidth."""
    out_of_place: bool = False
    """Whether a schedule's buffer holds a separate output region after the input (all-to-all,
    send/recv, exscan): ``count`` elements of input at [0, count), then ``count`` of output."""
    torch_native: bool = True
    """Whether torch.distributed has a call for it, which ``native`` runs on gloo and NCCL. It has no
    scan: there, native scan and exscan exist only under ``--backend mpi`` (``MPI_Scan``, ``MPI_Exscan``)."""
    ordered: bool = False
    """Whether the reduction's operands keep rank order (scan, exscan: a prefix of ranks 0..r, for a
    reduction that need not commute); the verifier holds every combination to it (ir.py)."""

    def busbw_factor(self, world_size: int) -> float:
        """algbw -> busbw factor: what the busiest link carries in a bandwidth-optimal algorithm.

        All-reduce moves 2(n-1)/n of the buffer over each rank's link (reduce-scatter then all-gather);
        reduce-scatter and all-gather (n-1)/n; broadcast and reduce pass the whole buffer once: 1.
        """
        if not self.payload:
            return 0.0
        if self.busbw_numerator == 0:
            return 1.0
        if world_size <= 1:
            return 0.0 if self.busbw_numerator else 1.0
        return self.busbw_numerator * (world_size - 1) / world_size


OP_SPECS: dict[Op, OpSpec] = {
    Op.ALL_REDUCE: OpSpec(
        Op.ALL_REDUCE, reduces=True, rooted=False, busbw_numerator=2, nccl_name="allreduce", mpi_name="allreduce"
    ),
    Op.REDUCE_SCATTER: OpSpec(
        Op.REDUCE_SCATTER,
        reduces=True,
        rooted=False,
        busbw_numerator=1,
        nccl_name="reducescatter",
        mpi_name="reduce_scatter",
    ),
    Op.ALL_GATHER: OpSpec(
        Op.ALL_GATHER, reduces=False, rooted=False, busbw_numerator=1, nccl_name="allgather", mpi_name="allgather"
    ),
    Op.BROADCAST: OpSpec(
        Op.BROADCAST, reduces=False, rooted=True, busbw_numerator=0, nccl_name="broadcast", mpi_name="bcast"
    ),
    Op.REDUCE: OpSpec(Op.REDUCE, reduces=True, rooted=True, busbw_numerator=0, nccl_name="reduce", mpi_name="reduce"),
    Op.ALL_TO_ALL: OpSpec(
        Op.ALL_TO_ALL,
        reduces=False,
        rooted=False,
        busbw_numerator=1,
        nccl_name="alltoall",
        mpi_name="alltoall",
        nccl_tuned=False,
        blocks=True,
        out_of_place=True,
    ),
    Op.SCATTER: OpSpec(
        Op.SCATTER,
        reduces=False,
        rooted=True,
        busbw_numerator=1,
        nccl_name="scatter",
        mpi_name="scatter",
        nccl_tuned=False,
        blocks=True,
    ),
    Op.GATHER: OpSpec(
        Op.GATHER,
        reduces=False,
        rooted=True,
        busbw_numerator=1,
        nccl_name="gather",
        mpi_name="gather",
        nccl_tuned=False,
        blocks=True,
    ),
    Op.SENDRECV: OpSpec(
        Op.SENDRECV,
        reduces=False,
        rooted=False,
        busbw_numerator=0,
        nccl_name="sendrecv",
        mpi_name="sendrecv",
        nccl_tuned=False,
        out_of_place=True,
    ),
    Op.BARRIER: OpSpec(
        Op.BARRIER,
        reduces=False,
        rooted=False,
        busbw_numerator=0,
        nccl_name="barrier",
        mpi_name="barrier",
        nccl_tuned=False,
        payload=False,
    ),
    Op.SCAN: OpSpec(
        Op.SCAN,
        reduces=True,
        rooted=False,
        busbw_numerator=0,
        nccl_name="scan",
        mpi_name="scan",
        nccl_tuned=False,
        torch_native=False,
        ordered=True,
    ),
    Op.EXSCAN: OpSpec(
        Op.EXSCAN,
        reduces=True,
        rooted=False,
        busbw_numerator=0,
        nccl_name="exscan",
        mpi_name="exscan",
        nccl_tuned=False,
        out_of_place=True,
        torch_native=False,
        ordered=True,
    ),
}

NCCL_TUNED_OPS: tuple[Op, ...] = tuple(op for op in Op if OP_SPECS[op].nccl_tuned)
"""The ops NCCL picks an algorithm and protocol for (its ``ncclFunc_t`` collectives), in ``Op`` order."""

CLASSIC_OPS: frozenset[Op] = frozenset({Op.ALL_REDUCE, Op.REDUCE_SCATTER, Op.ALL_GATHER, Op.BROADCAST, Op.REDUCE})
"""The five reductions and gathers the ring, direct and one-shot builders do (NCCL tunes the same five)."""

SCAN_OPS: frozenset[Op] = frozenset({Op.SCAN, Op.EXSCAN})
"""The prefix reductions, whose builders live in ``schedules/algorithms/scan.py``."""

_OP_ALIASES: dict[str, str] = {
    "alltoall": "all-to-all",
    "a2a": "all-to-all",
    "sendrecv": "sendrecv",
    "sendreceive": "sendrecv",
    "ringshift": "sendrecv",
    "prefixsum": "scan",
    "inclusivescan": "scan",
    "exclusivescan": "exscan",
}


def op_count(op: Op, count: int, world_size: int) -> int:
    """The elements a call of ``op`` with ``count`` really moves: ``count`` rounded down to a multiple of
    the world size for the block ops (as nccl-tests' ``*GetCollByteCount``), 0 for barrier."""
    spec = OP_SPECS[op]
    if not spec.payload:
        return 0
    if spec.blocks and world_size >= 1:
        return count - count % world_size
    return count


def block_bounds(count: int, world_size: int) -> list[tuple[int, int]]:
    """Block ``j`` of a block op's buffer (all-to-all, scatter, gather): ``count // n`` elements each."""
    b = count // world_size
    return [(j * b, (j + 1) * b) for j in range(world_size)]


def buffer_elems(op: Op, count: int) -> int:
    """Elements of one rank's schedule buffer: input then output for the out-of-place ops, one token for
    barrier (its transfers carry one element that nothing checks), ``count`` otherwise."""
    spec = OP_SPECS[op]
    if not spec.payload:
        return 1
    return 2 * count if spec.out_of_place else count


def chunk_bounds(count: int, parts: int) -> list[tuple[int, int]]:
    """Split ``count`` elements into ``parts`` contiguous chunks, the first ``count % parts`` one larger.

    Chunks may be empty when ``count < parts``. Returns half-open ``(start, stop)`` pairs.
    """
    if parts <= 0:
        raise ValueError(f"parts must be >= 1, got {parts}")
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    base, extra = divmod(count, parts)
    bounds: list[tuple[int, int]] = []
    start = 0
    for i in range(parts):
        stop = start + base + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


DTYPE_SIZES: dict[str, int] = {
    "float32": 4,
    "float64": 8,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "int64": 8,
    "int8": 1,
    "uint8": 1,
    # The rest of what nccl-tests measures (src/common.cu's test_typenames; ``-d all`` runs each):
    # rows imported from its logs hold them, though collbench's own sweep does not run them.
    "uint32": 4,
    "uint64": 8,
    "float8_e4m3": 1,
    "float8_e5m2": 1,
}
DTYPE_ALIASES: dict[str, str] = {
    "float": "float32",
    "fp32": "float32",
    "f32": "float32",
    "double": "float64",
    "fp64": "float64",
    "f64": "float64",
    "half": "float16",
    "fp16": "float16",
    "f16": "float16",
    "bf16": "bfloat16",
    "int": "int32",
    "i32": "int32",
    "long": "int64",
    "i64": "int64",
    "char": "int8",
    "i8": "int8",
    "u8": "uint8",
    "u32": "uint32",
    "u64": "uint64",
    "f8e4m3": "float8_e4m3",
    "fp8_e4m3": "float8_e4m3",
    "f8e5m2": "float8_e5m2",
    "fp8_e5m2": "float8_e5m2",
}
SWEEP_DTYPES: tuple[str, ...] = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8")
"""The dtypes collbench's sweep runs, its data patterns sized to each (runtime.executor.buffers). Not
uint32 and uint64, whose patterns are made too: gloo carries neither (torch's ProcessGroupGloo answers
'Invalid scalar type', torch 2.13), nor do torch's CPU kernels the executor reduces with run them."""
FLOAT_DTYPES = frozenset({"float32", "float64", "float16", "bfloat16", "float8_e4m3", "float8_e5m2"})
REDOPS: tuple[str, ...] = ("sum", "prod", "min", "max", "avg")


def parse_dtype(name: str) -> str:
    """Canonical dtype name (``float32``...) for a name or alias; raise UnknownNameError."""
    key = name.strip().lower()
    key = DTYPE_ALIASES.get(key, key)
    if key not in DTYPE_SIZES:
        raise UnknownNameError("dtype", name, list(DTYPE_SIZES))
    return key


def parse_redop(name: str) -> str:
    key = name.strip().lower()
    if key not in REDOPS:
        raise UnknownNameError("reduction", name, list(REDOPS))
    return key
