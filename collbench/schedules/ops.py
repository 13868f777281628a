"""The collective operations, each with the facts that belong to it (as nccl-tests keeps them).

Counting convention (the same as nccl-tests', so numbers compare): ``count`` is the number of elements
in the larger of one rank's send and receive buffers, and ``size_bytes = count * dtype size``. For
all-gather that is the gathered output; for reduce-scatter the full input. Rank ``r``'s share of such a
buffer is ``chunk_bounds(count, world_size)[r]``: counts need not divide by the world size.
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

    def __str__(self) -> str:
        return self.value

    @property
    def spec(self) -> OpSpec:
        return OP_SPECS[self]

    @classmethod
    def parse(cls, name: str) -> Op:
        """Accept ``all-reduce``, ``all_reduce``, ``allreduce`` and the like; raise UnknownNameError."""
        key = name.strip().lower().replace("_", "-")
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

    def busbw_factor(self, world_size: int) -> float:
        """algbw -> busbw factor: what the busiest link carries in a bandwidth-optimal algorithm.

        All-reduce moves 2(n-1)/n of the buffer over each rank's link (reduce-scatter then all-gather);
        reduce-scatter and all-gather (n-1)/n; broadcast and reduce pass the whole buffer once: 1.
        """
        if self.busbw_numerator == 0:
            return 1.0
        if world_size <= 1:
            return 0.0 if self.busbw_numerator else 1.0
        return self.busbw_numerator * (world_size - 1) / world_size


OP_SPECS: dict[Op, OpSpec] = {
    Op.ALL_REDUCE: OpSpec(Op.ALL_REDUCE, reduces=True, rooted=False, busbw_numerator=2, nccl_name="allreduce"),
    Op.REDUCE_SCATTER: OpSpec(
        Op.REDUCE_SCATTER, reduces=True, rooted=False, busbw_numerator=1, nccl_name="reducescatter"
    ),
    Op.ALL_GATHER: OpSpec(Op.ALL_GATHER, reduces=False, rooted=False, busbw_numerator=1, nccl_name="allgather"),
    Op.BROADCAST: OpSpec(Op.BROADCAST, reduces=False, rooted=True, busbw_numerator=0, nccl_name="broadcast"),
    Op.REDUCE: OpSpec(Op.REDUCE, reduces=True, rooted=True, busbw_numerator=0, nccl_name="reduce"),
}


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
}
FLOAT_DTYPES = frozenset({"float32", "float64", "float16", "bfloat16"})
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
