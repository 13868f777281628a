"""The line scanner of nccl-tests text output: a log's lines into runs, one per test.

Each run holds what its header and NCCL's lines around it say (the program, from ``# Collective test
starting:`` or a pasted command line; ``# nThread`` .. ``iters:``; the ``# Rank`` lines; NCCL's
``rank R nranks N`` INFO lines; the library version; the table header's columns and halves; the footer's
``Out of bounds values`` count) and its result lines as tokens, with their line numbers. A new test's
name, a second ``# nThread`` line or a pasted command after rows starts another run; runs with no
result line are dropped. ``nccl_tests.py`` reads the runs into rows.

A result line cut short, or split in two by another process's output landing between its ``printf``
calls, is no row: every such line (one that starts with a number inside a table, one whose redop has
that output glued on, one a zero-filled block has reached; ``nccl_tests.py`` adds one holding fewer
halves than its header) is collected, and :func:`cut_note` names them in one note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from collbench.importers.log_lines import nccl_line, plain_lines
from collbench.importers.nccl_tests_json import nccl_version_string, op_from_program
from collbench.importers.nccl_tests_ops import (
    DEFAULT_HALVES,
    PRINTED_REDOPS,
    Half,
    header_halves,
    is_table_header,
    lead_columns,
)
from collbench.schedules.ops import Op

_PROGRAM_RE = re.compile(r"\b(\w+_perf)(?:_mpi)?\b")
# The block header of `collbench sweep --format nccl-tests`: one block per (op, algorithm).
_COLLBENCH_RE = re.compile(r"^#\s*collbench\s+(\S+)\s+algo\s+(\S+)\s+backend\s+(\S+)\s+nranks\s+(\d+)")
_STARTING_RE = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_RANK_RE = re.compile(
    r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s*(.*)$"
)
# "warmup iters: 5 iters: 20 agg iters: 1": the timed count is the one after a number.
_ITERS_RE = re.compile(r"\d\s+iters:\s*(\d+)")
_NTHREAD_RE = re.compile(r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)")
_VERSION_RE = re.compile(r"[nr]ccl-library=(\d+)")
# rccl-tests prints "RCCL version : 2.22.3-HEAD:7d8d67c" under its rank lines; NCCL prints "NCCL version
# 2.28.7+cuda13.0" on stdout (init.cc's showVersion) whatever NCCL_DEBUG says.
_RCCL_VERSION_RE = re.compile(r"^[NR]CCL version\s*:?\s*(\d+\.\d+\.\d+)")
# rccl-tests opens its output with "rccl-tests: Version develop:5272cd1" (src/common.cu).
_RCCL_TESTS_RE = re.compile(r"^rccl-tests:\s*Version\b")
_FOOTER_RE = re.compile(r"Out of bounds values\s*:\s*(\d+)\s+FAILED")
# A note quotes the first few unreadable result lines, each to about this width (whole tokens).
_CUT_QUOTED = 3
_CUT_QUOTE_CHARS = 48
_NUL_RUN = re.compile("\x00+")


@dataclass
class Run:
    """What the header of one test (and NCCL's lines around it) says, and its table rows so far."""

    op: Op | None = None
    program: str | None = None
    """The program named by a pasted command line, when the log prints no test name."""
    named: str | None = None
    """The program ``# Collective test starting:`` names."""
    command: str = ""
    """The pasted command line that named ``program``."""
    per_process: int | None = None
    """Ranks in each process: nThread x nGpus from the ``# nThread`` line."""
    iters: int = 0
    ranks: dict[int, tuple[str, str]] = field(default_factory=dict)
    """rank -> (host, device) from ``# Rank`` lines."""
    info_hosts: dict[int, str] = field(default_factory=dict)
    """rank -> host from NCCL's ``rank R nranks N`` lines."""
    nranks: int | None = None
    nnodes: int | None = None
    version: str = ""
    rows: list[tuple[int, list[str]]] = field(default_factory=list)
    """(line number, tokens) of each result line."""
    collbench: tuple[str, str, int] | None = None
    """(algorithm, backend, ranks) from a ``# collbench <op> algo A backend B nranks N`` block header."""
    columns: tuple[str, ...] | None = None
    """The header's columns before the first ``time``: size count type, then redop and root where printed
    (nccl-tests before 2.0 printed neither for all-gather, and no redop for broadcast)."""
    halves: tuple[Half, ...] = DEFAULT_HALVES
    """Where each half's time, algbw, busbw and #wrong sit after the lead columns (by the header)."""
    legacy_error: bool = False
    failed_values: int = 0
    """The footer's ``Out of bounds values : N FAILED`` count (0 when it says OK or is absent)."""
    rccl: bool = False
    """The log is rccl-tests' (its ``rccl-tests: Version`` or ``RCCL version :`` line): RCCL measured it,
    not NCCL, whatever GPU its rank lines name (or do not)."""
    cut: list[tuple[int, str]] = field(default_factory=list)
    """(line number, plain text) of each line in the table that starts like a result line but is not one:
    a row cut short, or split by another process's output landing in it."""


def _is_result_line(tokens: list[str]) -> bool:
    # size and count, then type and redop: nothing else in a log starts with two whole numbers and a name.
    return len(tokens) >= 6 and tokens[0].isdigit() and tokens[1].isdigit() and not tokens[2][:1].isdigit()


def _is_glued_row(tokens: list[str]) -> bool:
    # nccl-tests prints a row's size, count, type and redop in one printf and its figures in later ones
    # (the root too, where its header has one): another process's output written in between lands on
    # the row right after the redop (``sumgpu1:2:3 [0] NCCL INFO ...``), and the figures on a line of
    # their own. The redop column then holds a reduction with text glued on.
    redop = tokens[3] if len(tokens) > 3 else ""
    return redop not in PRINTED_REDOPS and any(redop.startswith(name) for name in PRINTED_REDOPS)


def _is_cut_row(run: Run, tokens: list[str]) -> bool:
    # Inside a table nothing else starts with a number: a row another rank's output landed in keeps
    # its size (``1048576  262144  float  sum`` / NCCL's line / the times), or glues a host name to it.
    in_table = run.columns is not None or bool(run.rows)
    return in_table and bool(tokens) and tokens[0][:1].isdigit()


def _is_damaged_row(run: Run, line: str) -> bool:
    # A node that crashed or lost power leaves its log's last blocks zero-filled (the file's size was
    # written, its data was not): what a NUL run covers is gone, so a line in the table holding one and
    # a number is a row with a part lost (its size, a time, a count), never read as a row or skipped.
    in_table = run.columns is not None or bool(run.rows)
    return "\x00" in line and in_table and any(ch.isdigit() for ch in line)


def cut_note(path: Path, cut: list[tuple[int, str]]) -> str:
    """One note naming the unreadable result lines: how many, and the first few quoted (whole tokens)."""
    quoted = []
    for lineno, text in cut[:_CUT_QUOTED]:
        words = _NUL_RUN.sub("\x00", text).split()  # a zero-filled block quoted as one NUL, not thousands
        kept = words[:1]
        for word in words[1:]:
            if len(" ".join([*kept, word])) > _CUT_QUOTE_CHARS:
                break
            kept.append(word)
        shown = " ".join(kept) + (" ..." if len(kept) < len(words) else "")
        quoted.append(f"line {lineno} {shown!r}")
    more = f" and {len(cut) - _CUT_QUOTED} more" if len(cut) > _CUT_QUOTED else ""
    lines = "result line" if len(cut) == 1 else "result lines"
    return f"{path}: {len(cut)} {lines} could not be read (cut or interleaved): {', '.join(quoted)}{more}"


def _read_columns(run: Run, words: list[str]) -> None:
    run.columns = lead_columns(words)
    run.halves = header_halves(words)
    run.legacy_error = "#wrong" not in words and "error" in words


def split_runs(text: str, path: Path, cut: list[tuple[int, str]], timeless: list[str] | None = None) -> list[Run]:
    """The runs of the log that have result lines; every unreadable result line is appended to ``cut``, and
    to ``timeless`` the op and algorithm of each block ``sweep --format nccl-tests`` printed for an op
    that moves no data (barrier: a time, no size), which holds no result line."""
    runs: list[Run] = [Run()]
    # A shell command spread over lines ends each but its last with a backslash (`mpirun \` /
    # ` --np 8 \` / ` .../alltoall_perf -b 8 ...`): the program's line alone would miss the launcher.
    continued: list[str] = []
    for lineno, line in enumerate(plain_lines(text), start=1):
        held = continued
        continued = [*held, line.rstrip()[:-1]] if line.rstrip().endswith("\\") else []
        if not line:
            continue
        run = runs[-1]
        if line.startswith("#"):
            if m := _COLLBENCH_RE.match(line):
                if run.rows or run.op is not None:
                    run = Run()
                    runs.append(run)
                run.op = Op.parse(m.group(1))
                run.collbench = (m.group(2), m.group(3), int(m.group(4)))
            elif m := _STARTING_RE.match(line):
                if run.rows or run.op is not None:
                    run = Run(version=run.version)
                    runs.append(run)
                run.op = op_from_program(m.group(1), path)
                run.named = m.group(1)
            elif m := _VERSION_RE.search(line):
                if run.rows:
                    run = Run()
                    runs.append(run)
                run.version = nccl_version_string(int(m.group(1)))
            elif m := _RANK_RE.match(line):
                run.ranks[int(m.group(1))] = (m.group(2), m.group(3).strip())
            elif "nThread" in line:
                if run.rows:  # a second test pasted after the first, without a test name between them
                    run = Run(program=None, version=run.version)
                    runs.append(run)
                if m := _ITERS_RE.search(line):
                    run.iters = int(m.group(1))
                if m := _NTHREAD_RE.search(line):
                    run.per_process = int(m.group(1)) * int(m.group(2))
            elif is_table_header(words := line.lstrip("#").split()):
                _read_columns(run, words)
            elif m := _FOOTER_RE.search(line):
                run.failed_values = int(m.group(1))
            continue
        if (info := nccl_line(line)) is not None:
            if info.rank is not None:
                run.info_hosts[info.rank] = info.host
            run.nranks = info.nranks or run.nranks
            run.nnodes = info.nnodes or run.nnodes
            if info.version and not run.version:
                run.version = info.version
            continue
        tokens = line.split()
        if _is_damaged_row(run, line) or (_is_result_line(tokens) and _is_glued_row(tokens)):
            run.cut.append((lineno, line))
        elif _is_result_line(tokens):
            run.rows.append((lineno, tokens))
        elif is_table_header(tokens):
            _read_columns(run, tokens)  # a legacy header printed without its '#'
        elif _is_cut_row(run, tokens):
            run.cut.append((lineno, line))
        elif m := _FOOTER_RE.search(line):
            run.failed_values = int(m.group(1))
        elif m := _RCCL_VERSION_RE.match(line):
            run.version = run.version or m.group(1)
            run.rccl = run.rccl or line.startswith("R")
        elif _RCCL_TESTS_RE.match(line):
            run.rccl = True
        elif m := _PROGRAM_RE.search(line):
            if run.rows:
                run = Run(version=run.version)
                runs.append(run)
            run.program = m.group(1)
            run.command = " ".join([*held, line])
    cut.extend(line for r in runs for line in r.cut)
    if timeless is not None:
        timeless.extend(
            f"{r.op.value} {r.collbench[0]}"
            for r in runs
            if r.collbench is not None and r.op is not None and not r.op.spec.payload and not r.rows
        )
    if any(r.rccl for r in runs):
        # One program printed the log: its version lines head the first test only.
        for r in runs:
            r.rccl = True
    return [r for r in runs if r.rows]
