"""Rows from the files a user has: collbench results (.jsonl/.csv/.parquet) and nccl-tests logs (detected),
streamed so that a results file is never held whole; a log's node count settled as ``fit`` and
``import`` settle it (``importers/nodes.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from collbench.errors import InputFileError, UserError
from collbench.fileio import decode_text
from collbench.filekinds import NCCL_TESTS_KIND, RESULTS_KIND, kind_of_text, misfiled
from collbench.importers.nccl_tests import looks_like_nccl_tests, read_nccl_tests
from collbench.importers.nodes import given_nodes, settle_log_nodes
from collbench.results.io import RESULT_SUFFIXES, check_regular_file, iter_rows
from collbench.results.row import ResultRow
from collbench.units import counted


def stream_results(
    paths: list[Path],
    *,
    notes: list[str],
    op: str | None = None,
    nodes_from_devices: bool = False,
    ranks: int | None = None,
    nodes: int | None = None,
) -> Iterator[ResultRow]:
    """The rows of ``paths``, one at a time; what a log left to inference goes to ``notes``, one line each.

    ``op`` labels the rows of a log that names no test (a log naming one keeps its own). Raises
    InputFileError as the readers do (file, line and field), when the bad row is reached.
    ``nodes_from_devices``: a log that names too few hosts for its node count gives one from its rank
    lines' device numbers (``importers/nodes.py``), said in a note. ``ranks``: the rank count of a log
    that does not say it (``fit --ranks``); ``nodes``: the node count of rows that do not say it
    (``fit --nodes``), an error where a row says another.
    """
    refuse_given_twice(paths)
    for path in paths:
        check_regular_file(path)  # before anything opens it: a FIFO blocks, /dev/zero never ends
        if path.suffix.lower() not in RESULT_SUFFIXES:
            _refuse_misnamed_rows(path)
        if looks_like_nccl_tests(path):
            rows = read_nccl_tests(path, op=op, ranks=ranks, strict_op=False, notes=notes)
            if nodes_from_devices or nodes is not None:
                rows = settle_log_nodes(path, rows, nodes, notes)
            yield from rows
        elif path.suffix.lower() not in RESULT_SUFFIXES:
            # Neither: the reader of results would say only "use .jsonl, .csv or .parquet", to someone
            # who gave a log (fit, report and compare read nccl-tests output too).
            empty = path.stat().st_size == 0
            # A profile, a topology or OSU's output given as results: say which it is.
            wrong = misfiled(path, _head(path), f"{NCCL_TESTS_KIND} or collbench results", RESULTS_KIND)
            if wrong is not None:
                raise wrong
            raise InputFileError(
                str(path),
                ("the file is empty" if empty else "no nccl-tests output in it (no table of sizes and times)")
                + "; expected nccl-tests output or collbench results (.jsonl, .csv, .parquet)",
            )
        else:
            found = iter_rows(path) if ranks is None else _given_ranks(iter_rows(path), ranks, path)
            yield from found if nodes is None else given_nodes(found, nodes, str(path))


def _given_ranks(rows: Iterator[ResultRow], ranks: int, path: Path) -> Iterator[ResultRow]:
    """Rows of a results file, InputFileError at one of another rank count than ``--ranks``: every row says
    its own, so 'fit rows.jsonl --ranks 3' of 2-rank rows fitted 2 ranks without a word on the option (a
    log that says another count, and rows that say another --nodes, are refused alike)."""
    for row in rows:
        if row.world_size != ranks:
            raise InputFileError(
                str(path), f"its rows say {counted(row.world_size, 'rank')}, not {ranks}; drop --ranks"
            )
        yield row


def refuse_given_twice(paths: list[Path]) -> None:
    """UserError for a file given twice (by its name, or a link to it): 'report rows.jsonl rows.jsonl' drew
    1,688 rows of 844, and fit took every point twice, as if each had been measured in two rounds."""
    seen: dict[str, Path] = {}
    for path in paths:
        key = os.path.realpath(path)
        if key in seen:
            said = f"{path} is" if seen[key] == path else f"{seen[key]} and {path} are"
            raise UserError(f"{said} one file given twice: its rows would count twice; give each once")
        seen[key] = path


def _head(path: Path) -> str:
    """The first 20,000 bytes of ``path`` as text, for telling what it is (never the whole of a huge log).

    Raises InputFileError naming the path when it cannot be read: the read's own OSError carries no file
    name, and the CLI took an unnamed one for a failed write to stdout."""
    try:
        with path.open("rb") as f:
            return decode_text(f.read(20000), errors="replace")
    except OSError as exc:
        raise InputFileError(str(path), f"cannot read: {exc.strerror or exc}") from None


def _refuse_misnamed_rows(path: Path) -> None:
    """InputFileError for collbench result rows under a name not ending .jsonl (``rows.log``, ``run.txt``):
    their keys hold "busbw", so they were read as an nccl-tests -J file and refused as "Extra data"."""
    found = kind_of_text(_head(path))
    if found is not None and found[0] == RESULTS_KIND:
        raise InputFileError(
            str(path), "holds collbench result rows (JSONL): name it .jsonl; results are read by their suffix"
        )
