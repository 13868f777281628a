"""What each nccl-tests program measures, and the column layouts its table has had.

Programs (``src/*.cu`` in NVIDIA/nccl-tests and ROCm/rccl-tests; each test's ``*GetCollByteCount``
and ``*GetBw``). Every table prints ``size`` as the larger of one rank's send and receive buffers and
``count`` as the elements of the call's own count argument, so:

* ``all_reduce_perf``, ``broadcast_perf``, ``reduce_perf``, ``sendrecv_perf``: size = count x type size.
* ``all_gather_perf``, ``reduce_scatter_perf``, ``alltoall_perf``, ``scatter_perf``, ``gather_perf``,
  ``hypercube_perf``: ``count`` is one rank's block, size = n x count x type size (the whole
  all-to-all buffer, scatter's root input, gather's root output, the gathered output).

collbench's ``count`` is the whole buffer (size / type size) for every op, as ``schedules/ops.py``
fixes it, and busbw follows the op's factor: (n-1)/n for all-to-all, scatter and gather (nccl-tests'
``AlltoAllGetBw``, ``ScatterGetBw``, ``GatherGetBw``), 1 for send/recv (``SendRecvGetBw``: the whole
buffer one rank along).

``hypercube_perf`` is an all-gather done with grouped ``ncclSend``/``ncclRecv``: at step k every rank
swaps the 2^k blocks it holds with rank ``r ^ 2^k`` (``HyperCubeRunColl``, power-of-two rank counts
only). That is recursive doubling, so its rows are all-gather filed under collbench's
``recursive-doubling`` algorithm (not ``native``, which is NCCL's own all-gather). Its table's algbw is
the bytes each rank received, (n-1)/n of the buffer per second (``HyperCubeGetBw``), and its busbw the
same number; collbench's all-gather algbw is the whole gathered buffer per second, so an imported
hypercube row's algbw is the log's x n/(n-1) and its busbw equals the log's busbw.

``alltoallv_perf`` moves blocks of different sizes (its ``dist`` column): no op collbench models.

Layouts of the columns before the times, by version:

* 2.13 (August 2022) on: ``size count type redop root``. alltoall, scatter and gather printed an
  empty redop until September 2022 (``none`` since); hypercube still prints it empty. An empty column
  is blank space, so such a line has one token fewer than the header names.
* Before 2.13: alltoall ``size count type redop`` (redop printed empty), scatter and gather
  ``size count type root``, sendrecv and hypercube ``size count type``; the five reductions and
  gathers as the legacy tables ``nccl_tests.py`` reads.

After them, each half (out-of-place, then in-place) is ``time algbw busbw #wrong`` (``error`` before
2.0; ``cputime`` for ``time`` with ``-C 1``); since 2.19 ``-R``'s per-iteration figures add ``i_min
i_max i_p99 i_cv%`` to each half, and ``-T`` a timestamp at the end. The header names them, so the
halves are found by the header's words, not by a fixed stride.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from collbench.backends.nccl import NCCL
from collbench.errors import InputFileError
from collbench.results.row import NCCL_TESTS_SOURCE, ResultRow
from collbench.schedules.ops import DTYPE_SIZES, Op, parse_dtype
from collbench.units import gbps

PROGRAM_OPS: dict[str, Op] = {
    "all_reduce_perf": Op.ALL_REDUCE,
    "all_gather_perf": Op.ALL_GATHER,
    "reduce_scatter_perf": Op.REDUCE_SCATTER,
    "broadcast_perf": Op.BROADCAST,
    "reduce_perf": Op.REDUCE,
    "alltoall_perf": Op.ALL_TO_ALL,
    "scatter_perf": Op.SCATTER,
    "gather_perf": Op.GATHER,
    "sendrecv_perf": Op.SENDRECV,
    "hypercube_perf": Op.ALL_GATHER,
}
BLANK_REDOP_OPS: frozenset[Op] = frozenset({Op.ALL_TO_ALL, Op.SCATTER, Op.GATHER})
"""Ops whose programs have printed an empty redop column (hypercube_perf too, by name)."""
PRINTED_REDOPS: tuple[str, ...] = ("sum", "prod", "max", "min", "avg", "mulsum", "none")
"""What nccl-tests prints in the redop column: its ``test_opnames`` (``src/common.cu``; ``mulsum`` is
ncclPreMulSum), and ``none`` for programs that reduce nothing (alltoall, scatter, gather since
September 2022)."""
PROGRAM_ALGOS: dict[str, str] = {"hypercube_perf": "recursive-doubling"}
"""Programs that run one of collbench's own schedules over NCCL's send/recv rather than NCCL's collective."""
UNMODELLED: dict[str, str] = {
    "alltoallv_perf": "alltoallv_perf moves blocks of different sizes; collbench models equal-block all-to-all"
    " (alltoall_perf)",
}

_TIME_WORDS = ("time", "cputime")
_WRONG_WORDS = ("#wrong", "error")
_LEAD_WORDS = ("size", "count", "type", "redop", "root")


def program_name(program: str) -> str:
    """``/opt/nccl-tests/build/alltoall_perf_mpi`` to ``alltoall_perf``."""
    return program.rsplit("/", 1)[-1].removesuffix("_mpi")


def is_table_header(words: list[str]) -> bool:
    """Whether ``words`` (a line without its ``#``) is the table's column header."""
    return bool(words) and words[0] == "size" and any(w in _TIME_WORDS for w in words)


def lead_columns(words: list[str]) -> tuple[str, ...]:
    """The header's columns before the first time: ``size count type`` and whichever of redop and root."""
    first = next(i for i, w in enumerate(words) if w in _TIME_WORDS)
    return tuple(words[:first])


@dataclass(frozen=True, slots=True)
class Half:
    """Where one half's figures sit, counted from the first time column."""

    time: int
    algbw: int
    busbw: int
    wrong: int


DEFAULT_HALVES: tuple[Half, ...] = (Half(0, 1, 2, 3), Half(4, 5, 6, 7))
"""``time algbw busbw #wrong`` twice: every layout before per-iteration figures."""


def header_halves(words: list[str]) -> tuple[Half, ...]:
    """Each half's positions from the header's words; DEFAULT_HALVES when they do not say otherwise."""
    body = words[len(lead_columns(words)) :]
    starts = [i for i, w in enumerate(body) if w in _TIME_WORDS]
    halves: list[Half] = []
    for k, start in enumerate(starts):
        part = body[start : starts[k + 1] if k + 1 < len(starts) else len(body)]
        wrong = next((i for i, w in enumerate(part) if w in _WRONG_WORDS), None)
        if "algbw" not in part or "busbw" not in part or wrong is None:
            return DEFAULT_HALVES
        halves.append(Half(start, start + part.index("algbw"), start + part.index("busbw"), start + wrong))
    return tuple(halves) if halves else DEFAULT_HALVES


def row_columns(columns: tuple[str, ...], tokens: list[str], blank_redop: bool) -> tuple[str, ...]:
    """The columns this line has: the header's, less redop where the line left it empty.

    nccl-tests prints an empty redop for hypercube (and for alltoall, scatter and gather until
    September 2022): blank space, so the token under ``redop`` is the root or the first time, never a
    name. ``blank_redop`` says whether the run's program is one of those; for any other a number
    under ``redop`` is a line that does not fit the header, and stays so.
    """
    if "redop" not in columns or not blank_redop:
        return columns
    at = columns.index("redop")
    if at < len(tokens) and tokens[at][:1].isalpha():
        return columns
    return tuple(c for c in columns if c != "redop")


def shape_columns(tokens: list[str]) -> tuple[str, ...]:
    """The lead columns of a line read under no header, by its length: 8 figures after them."""
    lead = len(tokens) - 8
    if lead >= 5:
        return _LEAD_WORDS
    if lead == 4:
        return ("size", "count", "type", "redop" if tokens[3][:1].isalpha() else "root")
    return _LEAD_WORDS[:3]


def block_ranks(size_bytes: int, count: int, dtype: str) -> int | None:
    """n from a block op's columns (size = n x count x type size), or None when they do not divide."""
    if dtype not in DTYPE_SIZES or count <= 0 or size_bytes <= 0:
        return None
    per_rank = count * DTYPE_SIZES[dtype]
    if size_bytes % per_rank:
        return None
    return size_bytes // per_rank


BLOCK_COUNTED: frozenset[Op] = frozenset({Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_TO_ALL, Op.SCATTER, Op.GATHER})
"""Ops whose table ``count`` is one rank's block, so size / (count x type size) is the rank count."""


# nccl-tests' DeltaMaxValue: the largest error a legacy ``error`` column may show and still pass.
LEGACY_ERROR_BOUND = {"float16": 5e-2, "bfloat16": 5e-2, "float32": 1e-5, "float64": 1e-12}
DTYPE_NAMES = {
    "float": "float32",
    "half": "float16",
    "double": "float64",
    "bfloat16": "bfloat16",
    "f8e4m3": "float8_e4m3",
    "f8e5m2": "float8_e5m2",
}
"""nccl-tests' type names (src/common.cu's test_typenames) that are not collbench's; int8, ... are both."""


def unheld_dtypes(rows: list[ResultRow], path: Path, notes: list[str]) -> list[ResultRow]:
    """``rows`` but those of a type collbench's rows do not hold, which one note names.

    collbench's rows hold every type nccl-tests measures (int8 ... f8e5m2; ``-d all`` runs each into one
    log), so this leaves out a type name no version of it printed (a log edited or of another tool): a
    row of one could not be written, and the import stopped at its first row ("row 1 was not written:
    field dtype: unknown dtype ...") while ``fit`` took it. Raises InputFileError when no row is of a
    type collbench holds.
    """
    held = [r for r in rows if r.dtype in DTYPE_SIZES]
    if len(held) == len(rows):
        return rows
    printed = {v: k for k, v in DTYPE_NAMES.items()}
    known = ", ".join(printed.get(name, name) for name in DTYPE_SIZES)
    others = sorted({r.dtype for r in rows if r.dtype not in DTYPE_SIZES})
    said = f"of type {', '.join(others)}, which collbench's rows do not hold (they hold {known})"
    if not held:
        raise InputFileError(str(path), f"its rows are {said}: measure one of those with -d")
    left = len(rows) - len(held)
    notes.append(f"{path}: {left} {'row' if left == 1 else 'rows'} {said} left out; {len(held)} read")
    return held


def canonical_dtype(name: str) -> str:
    key = DTYPE_NAMES.get(name, name)
    try:
        return parse_dtype(key)
    except Exception:
        return name


def wrong_count(token: str, legacy_error: bool, dtype: str) -> int:
    """The row's wrong count: -1 unchecked, 0 passed, above 0 failed (see nccl_tests.py's docstring)."""
    if token.upper() == "N/A":
        return -1
    marked = token.endswith("*")
    value = float(token.rstrip("*"))
    if not math.isfinite(value):
        # float() takes "inf" and "nan"; a count cannot be either, and round() would raise past the
        # caller's ValueError handler: the line is refused as unreadable like any other bad token.
        raise ValueError(f"#wrong {token!r} is not a count")
    if marked:
        return max(1, round(value)) if not legacy_error else 1
    if legacy_error:
        # Old versions print the largest error, not a count: beyond the type's bound is at least one
        # element out of bounds; within it the check passed.
        return 1 if value > LEGACY_ERROR_BOUND.get(dtype, 0.0) else 0
    return round(value)


_LAUNCHERS_WITH_NP = ("mpirun", "mpiexec", "orterun")
_NP_FLAGS = ("-np", "-n", "--np", "-c")
_OTHER_LAUNCHERS = ("srun", "torchrun", "flux", "jsrun", "aprun", "prun", "kubectl", "docker", "ssh")


@dataclass(frozen=True, slots=True)
class CommandRanks:
    """The rank count a pasted command line gives: processes x threads x GPUs per thread."""

    ranks: int
    how: str
    """The words that said it (``-g 8, one process``), for the note."""
    one_process: bool = False
    """No launcher: every rank ran in one process, so on one node."""


def _flag(words: list[str], names: tuple[str, ...]) -> int | None:
    for i, word in enumerate(words):
        for name in names:
            value = word[len(name) + 1 :] if word.startswith(name + "=") else None
            if word == name and i + 1 < len(words):
                value = words[i + 1]
            elif len(name) == 2 and word.startswith(name) and word[2:].isdigit():
                value = word[2:]  # getopt's glued form: -g2
            if value is not None and value.isdigit():
                return int(value)
    return None


def ranks_from_command(line: str, program: str, per_process: int | None = None) -> CommandRanks | None:
    """Ranks from a command line that runs ``program``: nccl-tests runs ``-t`` threads of ``-g`` GPUs in
    each process (``threadArgs``: nProcs x nThreads x nGpus ranks), or ``per_process`` where the log's
    ``# nThread T nGpus G`` line says it, one process unless ``mpirun -np N`` starts N. None for any
    other launcher (srun's tasks come from its own flags and the allocation)."""
    words = line.split()
    at = next((i for i, w in enumerate(words) if program_name(w) == program), None)
    if at is None:
        return None
    launcher, args = words[:at], words[at + 1 :]
    if any(program_name(w) in _OTHER_LAUNCHERS for w in launcher):
        return None
    gpus = _flag(args, ("-g", "--ngpus")) or 1
    threads = _flag(args, ("-t", "--nthreads")) or 1
    each = per_process or threads * gpus
    if any(program_name(w) in _LAUNCHERS_WITH_NP for w in launcher):
        procs = _flag(launcher, _NP_FLAGS)
        if procs is None:
            return None
        how = f"mpirun -np {procs}"
    elif any(w.startswith("-") for w in launcher):
        return None  # flags before the program belong to a launcher collbench does not know
    else:
        procs, how = 1, "one process"
    said = f"{each} a process by the nThread line" if per_process else f"-t {threads}, -g {gpus}"
    return CommandRanks(procs * each, f"{how}, {said}", how == "one process")


def factor_row(
    op: Op,
    world_size: int,
    size: int,
    count: int,
    dtype: str,
    redop: str,
    root: int,
    in_place: bool,
    time_us: float,
    wrong: int,
) -> ResultRow:
    if op.spec.rooted and root != -1 and not 0 <= root < world_size:
        # -1: no root column (the root is then nccl-tests' default, 0). Any other root outside the world
        # is no run of this op (a root of 99 on 8 ranks was imported as is, -5 was made 0).
        raise ValueError(f"{op.value} root {root} is not a rank of the {world_size} ranks")
    algbw = gbps(size, time_us)
    # nccl-tests prints one rank's block as count for the block-counted ops (BLOCK_COUNTED); collbench's
    # count is the elements of the larger buffer (size / dtype size) for every op, whatever the source.
    if dtype in DTYPE_SIZES:
        count = size // DTYPE_SIZES[dtype]
    return ResultRow(
        op=op.value,
        algo="native",
        backend=NCCL.name,
        world_size=world_size,
        dtype=dtype,
        redop=redop,
        in_place=in_place,
        size_bytes=size,
        count=count,
        iters=0,
        time_us=time_us,
        time_us_mean=time_us,
        time_us_min=time_us,
        time_us_max=time_us,
        algbw_gbps=algbw,
        busbw_gbps=algbw * op.spec.busbw_factor(world_size),
        wrong=wrong,
        root=max(root, 0),
        source=NCCL_TESTS_SOURCE,
    )


__all__ = [
    "BLANK_REDOP_OPS",
    "BLOCK_COUNTED",
    "DEFAULT_HALVES",
    "PRINTED_REDOPS",
    "PROGRAM_ALGOS",
    "PROGRAM_OPS",
    "UNMODELLED",
    "CommandRanks",
    "Half",
    "block_ranks",
    "canonical_dtype",
    "factor_row",
    "header_halves",
    "is_table_header",
    "lead_columns",
    "program_name",
    "ranks_from_command",
    "row_columns",
    "shape_columns",
    "wrong_count",
]


def refuse_unlogged(op: Op | None, path: Path) -> None:
    """Raise InputFileError for an ``--op`` no nccl-tests (or rccl-tests) program measures: scan and
    exscan, the prefix reductions, of which no log can hold a row."""
    if op is not None and op.spec.ordered:
        raise InputFileError(
            str(path),
            f"nccl-tests has no {op.value} program, so no log holds {op.value} rows; measure it with collbench "
            f"sweep --op {op.value}",
        )
