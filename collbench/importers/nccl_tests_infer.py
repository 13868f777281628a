"""What an nccl-tests table says about itself when its header does not: the collective and the ranks.

Older builds print no test name, and pastes often drop the command line and the ``# Rank`` lines.
The columns still tell a lot (nccl-tests' ``src/*.cu`` fill them): a ``root`` of 0 or more exists only
for broadcast (``redop none``, size = count x type size), reduce, and scatter and gather (``redop
none``, size = n x count x type size: which of the two, the columns cannot tell); ``redop none`` with
no root is all-gather; a reduction with
``count`` x type size equal to ``size`` is all-reduce, and with ``size`` = ``count`` x type size x n
it is reduce-scatter over n ranks (``count`` is the per-rank element count there, and for all-gather).
Some programs print the same columns (sendrecv as all-reduce, alltoall and hypercube as all-gather),
so every inference comes with the sentence that says what was assumed.

The rank count also follows from the table's own bandwidths: busbw = algbw x factor(n), with factor
2(n-1)/n for all-reduce and (n-1)/n for all-gather, reduce-scatter, all-to-all, scatter and gather
(doc/PERFORMANCE.md, ``*GetBw``). Read off the
row with the largest algbw, where the two-decimal rounding costs least.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from collbench.fileio import read_text_file
from collbench.importers.log_lines import plain_lines
from collbench.importers.nccl_tests_ops import BLOCK_COUNTED, block_ranks
from collbench.schedules.ops import DTYPE_SIZES, Op

# "#  Rank 1439 Group  0 Pid  21082 on HOST device  3 [0x01] NVIDIA GB200": the rank's device number.
_RANK_DEVICE_RE = re.compile(r"^#\s+Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+\S+\s+device\s+(\d+)\s")

# How far the rank count computed from rounded bandwidths may sit from a whole number and still be taken.
_WHOLE_TOLERANCE = 0.2
# Below this algbw the table's two decimals leave too little to compute a ratio from.
_MIN_ALGBW_GBPS = 1.0


@dataclass(frozen=True, slots=True)
class TableRow:
    """The columns of one result line that inference reads."""

    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int | None
    """None where the table has no root column (nccl-tests before 2.0 for the reducing tests)."""
    algbw_gbps: float | None
    busbw_gbps: float | None


@dataclass(frozen=True, slots=True)
class Inferred:
    op: Op
    reason: str
    ranks: int | None = None
    """The rank count the columns imply (reduce-scatter, all-gather), when they do."""


def infer_op(rows: list[TableRow]) -> Inferred | None:
    """The collective the columns identify, with the sentence saying why; None when they do not."""
    row = next((r for r in rows if r.count > 0 and r.dtype in DTYPE_SIZES), None)
    if row is None:
        return None
    elem = DTYPE_SIZES[row.dtype]
    per_rank = row.count * elem
    if row.root is not None and row.root >= 0:
        if row.redop != "none":
            return Inferred(Op.REDUCE, f"root {row.root} and redop {row.redop}")
        if row.size_bytes == per_rank:
            return Inferred(Op.BROADCAST, f"root {row.root}, redop none and size = count x {elem} B")
        # size = n x count x type size with a root: scatter_perf or gather_perf, which print the same.
        return None
    if per_rank == 0 or row.size_bytes % per_rank:
        return None
    ratio = row.size_bytes // per_rank
    if row.redop == "none":
        return Inferred(
            Op.ALL_GATHER,
            f"redop none with no root and size = {ratio} x count x {elem} B (alltoall_perf prints the same)",
            ranks=ratio if ratio > 1 else None,
        )
    if ratio == 1:
        return Inferred(
            Op.ALL_REDUCE,
            f"redop {row.redop} with no root and size = count x {elem} B (sendrecv_perf prints the same)",
        )
    return Inferred(Op.REDUCE_SCATTER, f"redop {row.redop} and size = {ratio} x count x {elem} B", ranks=ratio)


def ranks_from_bandwidths(op: Op, rows: list[TableRow]) -> int | None:
    """The rank count that busbw/algbw implies for ``op``, or None when the table cannot tell.

    Broadcast and reduce have a factor of 1 whatever the ranks; tables whose bandwidths are all
    below 1 GB/s round too coarsely; a ratio that is not close to a whole rank count is refused.
    """
    usable = [r for r in rows if r.algbw_gbps is not None and r.busbw_gbps is not None]
    usable = [r for r in usable if r.algbw_gbps is not None and r.algbw_gbps >= _MIN_ALGBW_GBPS]
    # The factor is k(n-1)/n with the op's k (OpSpec.busbw_numerator): k = 0 (broadcast, reduce, send/recv,
    # barrier) says nothing of n.
    k = op.spec.busbw_numerator
    if k == 0 or not op.spec.payload or not usable:
        return None
    best = max(usable, key=lambda r: r.algbw_gbps or 0.0)
    assert best.algbw_gbps is not None and best.busbw_gbps is not None
    factor = best.busbw_gbps / best.algbw_gbps
    # f = k(n-1)/n, so n = k/(k-f): all-reduce's k is 2, the others' 1.
    room = k - factor
    if room <= 0:
        return None
    estimate = k / room
    n = round(estimate)
    if n < 2 or abs(estimate - n) > _WHOLE_TOLERANCE:
        return None
    return n


def column_ops(rows: list[TableRow]) -> frozenset[Op] | None:
    """Every op whose program prints these columns, or None where they do not narrow it down.

    A root of 0 or more: reduce (a reduction), broadcast (size = count x type size), scatter or gather
    (size = n x count x type size). No root: all-reduce or send/recv (a reduction, size = count x type
    size), all-gather or all-to-all (redop none, n blocks), reduce-scatter (a reduction, n blocks).
    """
    row = next((r for r in rows if r.count > 0 and r.dtype in DTYPE_SIZES), None)
    if row is None:
        return None
    n = block_ranks(row.size_bytes, row.count, row.dtype)
    if row.root is not None and row.root >= 0:
        if row.redop != "none":
            return frozenset({Op.REDUCE})
        if n == 1:
            return frozenset({Op.BROADCAST})
        return frozenset({Op.SCATTER, Op.GATHER}) if n is not None else None
    if n is None:
        return None
    if row.redop == "none":
        return frozenset({Op.ALL_GATHER, Op.ALL_TO_ALL}) if n > 1 else None
    return frozenset({Op.ALL_REDUCE, Op.SENDRECV}) if n == 1 else frozenset({Op.REDUCE_SCATTER})


def unidentified(rows: list[TableRow]) -> str:
    """Why :func:`infer_op` found no collective, as the end of a sentence that asks for ``--op``."""
    row = next((r for r in rows if r.count > 0 and r.dtype in DTYPE_SIZES), None)
    if row is not None and row.root is not None and row.root >= 0 and row.redop == "none":
        n = block_ranks(row.size_bytes, row.count, row.dtype)
        if n is not None and n > 1:
            return (
                f"its columns (a root, size = {n} x count x type size) fit scatter_perf and gather_perf alike;"
                " pass --op scatter or --op gather"
            )
    return "its columns do not identify one; pass --op"


# The programs' names as a file name may spell them (nccl_alltoall.log, all-gather.log), longest
# first: "allreduce" holds "reduce", "reducescatter" holds "scatter".
_NAME_STEMS: tuple[tuple[str, Op], ...] = (
    ("reducescatter", Op.REDUCE_SCATTER),
    ("allreduce", Op.ALL_REDUCE),
    ("allgather", Op.ALL_GATHER),
    ("alltoall", Op.ALL_TO_ALL),
    ("sendrecv", Op.SENDRECV),
    ("broadcast", Op.BROADCAST),
    ("scatter", Op.SCATTER),
    ("gather", Op.GATHER),
    ("reduce", Op.REDUCE),
)


def op_from_file_name(path: Path, rows_as: Callable[[Op], list[TableRow]]) -> tuple[Op, str] | None:
    """The one collective a log's file name names (``nccl_alltoall.log``) where the table's columns, read
    as that program prints them (``rows_as``), fit it; with the words that say so. None otherwise."""
    letters = re.sub(r"[^a-z]", "", path.name.lower())
    named: set[Op] = set()
    for stem, op in _NAME_STEMS:
        if stem in letters:
            named.add(op)
            letters = letters.replace(stem, " ")
    if len(named) != 1:
        return None
    op = named.pop()
    fits = column_ops(rows_as(op))
    if fits is None or op not in fits:
        return None
    others = " or ".join(sorted(o.value for o in fits))
    return op, f"{op.value} from the file's name ({path.name}), which its columns fit (they fit {others})"


def ranks_from_blocks(op: Op, rows: list[TableRow]) -> int | None:
    """The rank count a block-counted op's columns give (size = n x count x type size), or None.

    All-gather, reduce-scatter, all-to-all, scatter and gather print one rank's block as ``count``;
    every readable row must give the same n, or the table is not read that way.
    """
    if op not in BLOCK_COUNTED:
        return None
    found = {block_ranks(r.size_bytes, r.count, r.dtype) for r in rows if r.count > 0}
    if len(found) != 1:
        return None
    n = found.pop()
    return n if n is not None and n >= 1 else None


__all__ = [
    "Inferred",
    "TableRow",
    "column_ops",
    "infer_op",
    "ranks_from_bandwidths",
    "ranks_from_blocks",
    "unidentified",
]


def ranks_per_node_from_devices(path: Path) -> int | None:
    """Ranks a node holds, from the highest device number on the log's ``# Rank`` lines (0-3: 4).

    nccl-tests numbers a process's GPUs from 0 on each node, and launchers place ranks node by node, so
    a log whose rank lines stop at device 3 ran 4 ranks a node, even when it prints one rank line (the
    last rank's). None without rank lines, or when every rank says device 0: a launcher that shows each
    process one GPU numbers every one 0, which says nothing of the node.
    """
    devices = [int(m.group(1)) for line in plain_lines(read_text_file(path, "nccl-tests output"))
               if (m := _RANK_DEVICE_RE.match(line))]  # fmt: skip
    return max(devices) + 1 if devices and max(devices) >= 1 else None
