"""Result rows for the commands that read them (fit, compare, report): the importers' stream
(``importers/load.py``), with what a log left to inference printed once the rows are read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from collbench.cli.console import print_notes
from collbench.importers.load import refuse_given_twice
from collbench.importers.load import stream_results as _stream
from collbench.results.row import ResultRow


def stream_results(
    paths: list[Path],
    *,
    op: str | None = None,
    nodes_from_devices: bool = False,
    ranks: int | None = None,
    nodes: int | None = None,
) -> Iterator[ResultRow]:
    """The rows of ``paths`` one at a time (``importers.load.stream_results``), then its notes, one line each."""
    notes: list[str] = []
    yield from _stream(paths, notes=notes, op=op, nodes_from_devices=nodes_from_devices, ranks=ranks, nodes=nodes)
    print_notes(notes)


def load_results(paths: list[Path], *, op: str | None = None) -> list[ResultRow]:
    """Every row of ``paths`` (:func:`stream_results`), as a list."""
    return list(stream_results(paths, op=op))


def load_results_by_file(paths: list[Path]) -> list[list[ResultRow]]:
    """The rows of each of ``paths``, file by file (one given twice refused, as :func:`load_results` does)."""
    refuse_given_twice(paths)
    return [load_results([path]) for path in paths]
