"""Read nccl-tests output (its text table, or the ``-J`` JSON file) into collbench result rows.

Text: the header names the program (``# Collective test starting: all_reduce_perf`` since 2.13, or the
command line a user pasted above it), ``# nThread .. iters: 20 ..``, and one ``#  Rank  N Group  G
Pid .. on HOST device D [BUS] NAME`` line per rank (older versions: no ``Group``). Each data line is
``size count type redop [root]`` then ``time algbw busbw #wrong`` twice: out-of-place, then in-place
(``#wrong`` is ``N/A`` with ``-c 0``; versions before 2.0 print a float ``error`` instead). NCCL's
INFO lines may be interleaved; several tests may follow each other in one log. rccl-tests (AMD) prints
the same table, with ``RCCL version : X`` lines under the ranks and often no ``Group`` on them. Which
programs are read (alltoall, scatter, gather, sendrecv and hypercube besides the five) and the lead
columns each has printed over the versions are ``nccl_tests_ops.py``'s; the header's words place each
half's figures.

A result line cut short, or split in two by another process's output landing between its ``printf``
calls, is not read as a row (a whole half it holds is kept); every such line is named in one note, so
nothing measured is lost unsaid. Going through the log's lines, into one run per test with its header's
facts, result lines and cut lines, is ``nccl_tests_scan.py``'s.

Validation: a ``#wrong`` count above zero is a failed row, whatever its notation (large counts print
as ``2.09715e+06``). The legacy ``error`` column is the largest difference from the expected value;
nccl-tests counted a row out of bounds when it exceeded ``DeltaMaxValue`` of the type (1e-5 for
float, 1e-12 for double, 5e-2 for half, any difference for integers), so such a row is failed (wrong
1: at least one element, the count unknown) and one within it passed (wrong 0). rccl-tests marks an
out-of-bounds error with an asterisk. A failed row is kept (it was measured) but never fitted or
selected; ``# Out of bounds values : N FAILED`` with no row saying which adds a note.

The ``-J`` JSON file is ``nccl_tests_json.py``'s.

Times are nccl-tests' averages over iterations; collbench's p50/mean/min/max all take that value.
algbw and busbw are recomputed from size and time with collbench's factors (the table rounds them to
two decimals, which loses small sizes).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path

from collbench.backends import RCCL
from collbench.errors import InputFileError
from collbench.fileio import check_number_lengths, decode_text, read_text_file
from collbench.filekinds import NCCL_TESTS_KIND, misfiled
from collbench.importers.nccl_tests_infer import (
    TableRow,
    column_ops,
    infer_op,
    op_from_file_name,
    ranks_from_bandwidths,
    ranks_from_blocks,
    unidentified,
)
from collbench.importers.nccl_tests_json import choose_op, nccl_version_string, op_from_program, parse_json
from collbench.importers.nccl_tests_ops import (
    BLANK_REDOP_OPS,
    PROGRAM_ALGOS,
    PROGRAM_OPS,
    canonical_dtype,
    factor_row,
    program_name,
    ranks_from_command,
    refuse_unlogged,
    row_columns,
    shape_columns,
    unheld_dtypes,
    wrong_count,
)
from collbench.importers.nccl_tests_scan import Run, cut_note, split_runs
from collbench.importers.nodes import NODES_LEFT_UNKNOWN
from collbench.pasted import clean_pasted_text
from collbench.results.fields import FIELD_RANGES, time_problem
from collbench.results.row import NODES_UNKNOWN, ResultRow
from collbench.schedules.ops import Op


@dataclass(frozen=True, slots=True)
class _Shape:
    """Where a run's world size and node count came from."""

    world_size: int
    nodes: int
    host: str
    device: str


def _program(run: Run) -> str | None:
    """The run's program as nccl-tests names it (``hypercube_perf``), from its test name or command line."""
    named = run.named or run.program
    return program_name(named) if named else None


def _blank_redop(run: Run, op: Op | None) -> bool:
    """Whether the run's program may print an empty redop column (nccl_tests_ops' layouts)."""
    program = _program(run)
    return op in BLANK_REDOP_OPS or program == "hypercube_perf" or PROGRAM_OPS.get(program or "") in BLANK_REDOP_OPS


@dataclass(frozen=True, slots=True)
class _Lead:
    """The columns of a result line before its times."""

    size: int
    count: int
    dtype: str
    redop: str
    root: int | None
    times_at: int


def _lead(run: Run, tokens: list[str], op: Op | None = None) -> _Lead:
    """Read size, count, type, redop and root by the header's columns (or, with no header, by shape).

    Raises ValueError or IndexError for a line that does not have them.
    """
    columns = shape_columns(tokens) if run.columns is None else row_columns(run.columns, tokens, _blank_redop(run, op))
    at = {name: i for i, name in enumerate(columns)}
    redop = tokens[at["redop"]] if "redop" in at else "none"
    if not redop.isalpha():
        raise ValueError(
            f"its redop column holds {redop!r}, not a reduction: the line does not fit the log's columns"
            " (hypercube_perf and alltoall_perf of 2022 leave it empty: keep the test's name in the paste)"
        )
    root = int(tokens[at["root"]]) if "root" in at else None
    return _Lead(int(tokens[0]), int(tokens[1]), canonical_dtype(tokens[2]), redop, root, len(columns))


def _table_rows(run: Run, op: Op | None = None) -> list[TableRow]:
    """The columns inference reads, from the lines that parse (bad lines fail later, with their line),
    read as ``op``'s program prints them where that is given (an empty redop column)."""
    out: list[TableRow] = []
    for _, tokens in run.rows:
        try:
            lead = _lead(run, tokens, op or run.op)
            head, half = lead.times_at, run.halves[0]
            algbw = float(tokens[head + half.algbw]) if len(tokens) > head + half.busbw else None
            busbw = float(tokens[head + half.busbw]) if len(tokens) > head + half.busbw else None
            out.append(TableRow(lead.size, lead.count, lead.dtype, lead.redop, lead.root, algbw, busbw))
        except (ValueError, IndexError):
            continue
    return out


def _run_op(run: Run, path: Path, op: Op | None, strict: bool, notes: list[str]) -> Op:
    named = run.op
    if named is None and run.program is not None:
        named = op_from_program(run.program, path)
    chosen = choose_op(named, op, path) if strict else named or op
    if chosen is not None and named is None and strict:
        _check_columns_fit(run, chosen, path)
    if chosen is not None:
        return chosen
    inferred = infer_op(_table_rows(run))
    if inferred is None:
        by_name = op_from_file_name(path, lambda named: _table_rows(run, named))
        if by_name is None:
            raise InputFileError(str(path), f"the log names no test and {unidentified(_table_rows(run))}")
        notes.append(f"{path}: no test name in the log; took {by_name[1]}")
        return by_name[0]
    notes.append(f"{path}: no test name in the log; took {inferred.op.value} from the columns ({inferred.reason})")
    return inferred.op


def _check_columns_fit(run: Run, op: Op, path: Path) -> None:
    """Refuse ``--op`` for a log whose columns show another collective (filing it would corrupt every use)."""
    rows = _table_rows(run)
    allowed = column_ops(rows)
    if allowed is None or op in allowed:
        return  # alltoall_perf prints all-gather's columns, sendrecv_perf all-reduce's: those stand
    implied = infer_op(rows)
    if implied is not None:
        seems = f"{implied.reason}, so it seems to be {implied.op.value}; pass --op {implied.op.value}"
    else:
        ops = " or --op ".join(sorted(o.value for o in allowed))
        seems = f"{unidentified(rows).split(';')[0]}; pass --op {ops},"
    raise InputFileError(str(path), f"the log's columns do not match --op {op.value}: {seems} or import the right log")


def _run_shape(run: Run, op: Op, path: Path, ranks: int | None, notes: list[str]) -> _Shape:
    """World size and node count from every source the log gives; nodes is NODES_UNKNOWN when none says."""
    said: dict[str, int] = {}
    if run.ranks:
        said["'# Rank' lines"] = max(run.ranks) + 1
    if run.nranks:
        said["NCCL's nranks"] = run.nranks
    world = max(said.values()) if said else None
    if world is None:
        implied = infer_op(_table_rows(run))
        if implied is not None and implied.op == op and implied.ranks:
            world = implied.ranks
            notes.append(f"{path}: no rank count in the log; took {world} ranks from the columns ({implied.reason})")
    if world is None and (blocks := ranks_from_blocks(op, _table_rows(run))) is not None:
        world = blocks
        notes.append(
            f"{path}: no rank count in the log; took {world} ranks from the columns"
            f" (size = {world} x count x type size, as {op.value} prints one rank's block as count)"
        )
    program = _program(run)
    cmd = ranks_from_command(run.command, program, run.per_process) if program else None
    if world is None and ranks is None and cmd is not None:
        world = cmd.ranks
        notes.append(f"{path}: no rank count in the log; took {world} ranks from the command line ({cmd.how})")
    if world is None and ranks is None:
        world = ranks_from_bandwidths(op, _table_rows(run))
        if world is not None:
            notes.append(f"{path}: no rank count in the log; took {world} ranks from busbw/algbw for {op.value}")
    if ranks is not None:
        if world is not None and world != ranks and said:
            raise InputFileError(str(path), f"the log says {world} ranks, not {ranks}; drop --ranks")
        world = ranks
    if world is None:
        raise InputFileError(
            str(path), "no '# Rank' lines and no NCCL nranks: cannot tell the number of ranks; pass --ranks N"
        )
    hosts = {**run.info_hosts, **{r: h for r, (h, _) in run.ranks.items()}}
    if run.nnodes:
        nodes = run.nnodes
    elif len(hosts) >= world and all(r in hosts for r in range(world)):
        nodes = len({hosts[r] for r in range(world)})
    elif cmd is not None and cmd.one_process and cmd.ranks == world:
        nodes = 1
        notes.append(f"{path}: the command line starts one process ({cmd.how}): took 1 node")
    else:
        nodes = NODES_UNKNOWN
        notes.append(
            f"{path}: the log names the host of {len(hosts)} of {world} ranks and prints no node count;"
            f" {NODES_LEFT_UNKNOWN}"
        )
    if run.ranks:
        host, device = run.ranks[min(run.ranks)]
    else:
        host, device = (hosts[min(hosts)] if hosts else ""), ""
    return _Shape(world, nodes, host, device)


def _parse_text(
    text: str, path: Path, op: Op | None, *, strict_op: bool, ranks: int | None, notes: list[str]
) -> list[ResultRow]:
    out: list[ResultRow] = []
    cut: list[tuple[int, str]] = []
    timeless: list[str] = []
    for run in split_runs(text, path, cut, timeless):
        run_op = _run_op(run, path, op, strict_op, notes)
        if run.collbench is not None:
            algo, backend, world_size = run.collbench
            out.extend(
                replace(r, algo=algo, backend=backend, source="collbench")
                for lineno, tokens in run.rows
                for r in _text_row(tokens, lineno, run, run_op, world_size, path, cut)
            )
            continue
        shape = _run_shape(run, run_op, path, ranks, notes)
        run_rows: list[ResultRow] = []
        for lineno, tokens in run.rows:
            run_rows.extend(_text_row(tokens, lineno, run, run_op, shape.world_size, path, cut))
        if run.failed_values and not any(r.wrong > 0 for r in run_rows):
            notes.append(
                f"{path}: the log says {run.failed_values} values failed validation but no row says which;"
                " its rows are kept as they read"
            )
        program_algo = PROGRAM_ALGOS.get(_program(run) or "")
        out.extend(
            replace(
                r,
                algo=program_algo or r.algo,
                iters=run.iters,
                nodes=shape.nodes,
                host=shape.host,
                device_name=shape.device,
                backend_version=run.version,
                backend=RCCL if run.rccl else r.backend,
            )
            for r in run_rows
        )
    if cut:
        notes.append(cut_note(path, sorted(cut)))
    if timeless:
        # Its rows are the sweep's --stream file; the block was dropped with no word (16 rows of 17).
        notes.append(
            f"{path}: collbench's {', '.join(timeless)} {'block' if len(timeless) == 1 else 'blocks'} of times"
            " without sizes not read (the op moves no data); the sweep's rows (--stream, -O) hold them"
        )
    if not out and timeless:
        raise InputFileError(str(path), notes.pop().removeprefix(f"{path}: "))
    if not out:
        raise InputFileError(str(path), "no nccl-tests result lines found")
    return out


def _time_us(token: str, size_bytes: int, path: Path, lineno: int) -> float:
    value = float(token)
    # Past a week a call is no time either (results.fields bounds a row's): 1e308 reached compare's sums.
    if not math.isfinite(value) or not 0 <= value <= FIELD_RANGES["time_us"][1]:
        raise InputFileError(
            str(path), f"time {token!r} is not a time (NaN, infinite, negative or past a week)", line=lineno
        )
    problem = time_problem(value, size_bytes)
    if problem is not None:
        raise InputFileError(str(path), f"time {token!r} is not a time ({problem})", line=lineno)
    return value


def _text_row(
    tokens: list[str], lineno: int, run: Run, op: Op, world_size: int, path: Path, cut: list[tuple[int, str]]
) -> list[ResultRow]:
    """The rows of one result line; a line its header gives more halves than it holds goes to ``cut``."""
    try:
        lead = _lead(run, tokens, op)
        body = tokens[lead.times_at :]
        halves = [(body[h.time], body[h.wrong]) for h in run.halves if len(body) > max(h.time, h.wrong)]
        if run.columns is not None and len(halves) < len(run.halves):
            cut.append((lineno, " ".join(tokens)))  # the half it holds was measured and is kept
        rows = [
            factor_row(
                op,
                world_size,
                lead.size,
                lead.count,
                lead.dtype,
                lead.redop,
                -1 if lead.root is None else lead.root,
                i == 1,
                _time_us(h[0], lead.size, path, lineno),
                wrong_count(h[1], run.legacy_error, lead.dtype),
            )
            for i, h in enumerate(halves)
            if h[0].upper() != "N/A"  # that mode was not measured
        ]
    except (ValueError, IndexError) as exc:
        raise InputFileError(
            str(path), f"cannot read the result line {' '.join(tokens)!r} ({exc})", line=lineno
        ) from exc
    if not rows:
        raise InputFileError(str(path), f"the result line {' '.join(tokens)!r} has no time columns", line=lineno)
    return rows


def read_nccl_tests(
    path: Path | str,
    *,
    algo: str = "native",
    op: str | None = None,
    ranks: int | None = None,
    strict_op: bool = True,
    notes: list[str] | None = None,
) -> list[ResultRow]:
    """Result rows from an nccl-tests log (text table) or its ``-J`` JSON file.

    ``algo`` names the algorithm the rows are filed under (``native``, or what the user forced, such as
    ``native:ring``). ``op`` is the collective when the log does not name its program; with
    ``strict_op`` a log naming another one is an error (``import``), without it the log's own name
    wins (``fit``, which filters by op afterwards). ``ranks`` is the rank count when the log does not
    say it. ``notes``, when given, receives one line for each thing inferred rather than read (the op
    from the columns, the ranks from busbw/algbw, an unknown node count).
    Raises InputFileError for a missing file, a file that is not nccl-tests output, one with no rows,
    and a time that is NaN, infinite or negative (naming the line).
    """
    path = Path(path)
    if not os.path.lexists(path):  # a link that loops is said by the reader, not as missing
        raise InputFileError(str(path), "no such file")
    if ranks is not None and ranks < 1:
        raise InputFileError(str(path), f"--ranks must be at least 1, got {ranks}")
    text = read_text_file(path, "nccl-tests output")
    check_number_lengths(text, path)
    op_override = Op.parse(op) if op else None
    refuse_unlogged(op_override, path)
    sink = notes if notes is not None else []
    try:
        rows = _rows_of(text, path, op_override, strict_op=strict_op, ranks=ranks, notes=sink)
    except InputFileError as exc:
        # Results rows, a profile or an OSU log given for nccl-tests output: say which, not "no result lines".
        raise misfiled(path, text, NCCL_TESTS_KIND) or exc from None
    rows = unheld_dtypes(rows, path, sink)
    _check_held(rows, path)
    # Blocks that collbench itself printed name their algorithm, and so does a program that runs one of
    # collbench's schedules (hypercube_perf: recursive doubling); nccl-tests' other rows take the user's.
    fixed = {r.algo for r in rows if r.source != "collbench" and r.algo != "native"}
    if fixed and algo != "native" and fixed != {algo}:
        raise InputFileError(
            str(path), f"the log's program runs {', '.join(sorted(fixed))}, not --algo {algo}; drop --algo"
        )
    return [r if r.source == "collbench" or r.algo != "native" else replace(r, algo=algo) for r in rows]


def _check_held(rows: list[ResultRow], path: Path) -> None:
    """Raise InputFileError naming the first row that a results file could not hold, and why.

    Each row is checked as a reader of results checks one: ``import`` would otherwise stop at writing it,
    blaming its own output ("row 1 was not written"), while ``fit``, ``report`` and ``compare`` took it as
    measured (a -J file's size of -4096 or 1e30 bytes, a redop 'xor', an 'ngpus' of 0).
    """
    for row in rows:
        try:
            ResultRow.from_dict(row.to_dict())
        except ValueError as exc:
            place = "in place" if row.in_place else "out of place"
            raise InputFileError(
                str(path), f"its {row.op} row of {row.size_bytes} bytes ({place}) is not a result: {exc}"
            ) from None


def _rows_of(
    text: str, path: Path, op_override: Op | None, *, strict_op: bool, ranks: int | None, notes: list[str]
) -> list[ResultRow]:
    """The rows of an nccl-tests log's ``text``, from its -J JSON or its text table."""
    if clean_pasted_text(text).lstrip().startswith("{"):
        try:
            data = json.loads(clean_pasted_text(text))
        except json.JSONDecodeError as exc:
            raise InputFileError(str(path), f"not JSON ({exc.msg})", line=exc.lineno) from exc
        except RecursionError:
            # nccl-tests' -J files nest four deep; Python's reader gives up near a thousand.
            raise InputFileError(str(path), "the JSON nests too deep to read: not an nccl-tests -J file") from None
        if not isinstance(data, dict) or "results" not in data:
            raise InputFileError(str(path), "not an nccl-tests JSON file (no 'results')")
        return parse_json(data, path, op_override)
    return _parse_text(text, path, op_override, strict_op=strict_op, ranks=ranks, notes=notes)


def looks_like_nccl_tests(path: Path) -> bool:
    """Whether a file is nccl-tests output rather than collbench results (by extension, then content)."""
    if path.suffix.lower() in (".jsonl", ".csv", ".parquet"):
        return False
    try:
        with path.open("rb") as f:  # the head alone: read_text()[:20000] held a log of gigabytes whole
            head = decode_text(f.read(20000), errors="replace")
    except OSError:
        return False
    # "busbw" is in the table's own column header, which is all an excerpt pasted from a job log may keep.
    markers = ("nccl-tests", "out-of-place", "Avg bus bandwidth", "_perf", '"results"', "busbw")
    return any(m in head for m in markers)


__all__ = ["PROGRAM_OPS", "looks_like_nccl_tests", "nccl_version_string", "read_nccl_tests"]
