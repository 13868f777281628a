"""`collbench fit`: alpha-beta-gamma cost models fitted to measured results, with crossovers."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated

import typer

from collbench.cli.console import console, err_console, print_notes
from collbench.cli.options import split_values
from collbench.cli.render.models import render_fits
from collbench.errors import InputFileError
from collbench.importers.nccl_tests import looks_like_nccl_tests, read_nccl_tests
from collbench.importers.nccl_tests_infer import ranks_per_node_from_devices
from collbench.models.fit import fit_results
from collbench.models.fit_points import PointSummaries
from collbench.models.fitted import Fit
from collbench.results.io import check_regular_file, iter_rows
from collbench.results.row import NODES_UNKNOWN, ResultRow
from collbench.schedules.ops import Op


def load_results(paths: list[Path], *, op: str | None = None) -> list[ResultRow]:
    """Rows of collbench result files (.jsonl/.csv/.parquet) and nccl-tests logs (detected).

    ``op`` labels the rows of a log that names no test (a log naming one keeps its own); what a log
    left to inference is printed, one line each.
    """
    return list(stream_results(paths, op=op))


def stream_results(
    paths: list[Path], *, op: str | None = None, nodes_from_devices: bool = False
) -> Iterator[ResultRow]:
    """The rows of :func:`load_results`, one at a time: a results file is never held whole.

    Raises InputFileError as the readers do (file, line and field), when the bad row is reached.
    ``nodes_from_devices``: a log that names too few hosts for its node count gives one from its rank
    lines' device numbers (:func:`ranks_per_node_from_devices`), said in a note.
    """
    notes: list[str] = []
    for path in paths:
        check_regular_file(path)  # before anything opens it: a FIFO blocks, /dev/zero never ends
        if looks_like_nccl_tests(path):
            rows = read_nccl_tests(path, op=op, strict_op=False, notes=notes)
            if nodes_from_devices:
                rows = _nodes_from_devices(path, rows, notes)
            yield from rows
        else:
            yield from iter_rows(path)
    print_notes(notes)


def _nodes_from_devices(path: Path, rows: list[ResultRow], notes: list[str]) -> list[ResultRow]:
    """Rows of one log with an unknown node count given the one its rank lines' devices imply."""
    if all(r.nodes != NODES_UNKNOWN for r in rows):
        return rows
    per_node = ranks_per_node_from_devices(path)
    if per_node is None:
        return rows
    out = []
    for row in rows:
        if row.nodes == NODES_UNKNOWN and row.world_size % per_node == 0:
            row = dataclasses.replace(row, nodes=row.world_size // per_node)
        out.append(row)
    worlds = sorted({r.world_size for r in out if r.nodes != NODES_UNKNOWN})
    notes.append(
        f"{path}: its rank lines reach device {per_node - 1}: taken as {per_node} ranks a node "
        f"({', '.join(f'{w} ranks on {w // per_node} nodes' for w in worlds)})"
    )
    return out


def _noting_nodes(rows: Iterable[ResultRow], seen: dict[tuple[str, str, str, int], set[int]]) -> Iterator[ResultRow]:
    """The rows unchanged, noting each group's node counts on the way (a stream is read once)."""
    for row in rows:
        seen.setdefault((row.op, row.algo, row.backend, row.world_size), set()).add(row.nodes)
        yield row


def _with_nodes(fit: Fit, seen: dict[tuple[str, str, str, int], set[int]]) -> Fit:
    """The fit with its measured node count where every row of its group gave the same known one."""
    counts = seen.get((fit.op, fit.algo, fit.backend, fit.world_size), set())
    if len(counts) == 1 and min(counts) >= 1:
        return dataclasses.replace(fit, nodes=min(counts))
    return fit


def fit(
    results: Annotated[
        list[Path],
        typer.Argument(metavar="RESULTS...", help="collbench results (.jsonl/.csv/.parquet) or nccl-tests logs."),
    ],
    json_out: Annotated[bool, typer.Option("--json", help="Print {fits, crossovers} as JSON, nothing else.")] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", metavar="FILE.png", help="Plot measured points, fitted curves, residuals.")
    ] = None,
    op: Annotated[
        list[str] | None, typer.Option("--op", metavar="OP[,OP...]", help="Only these collectives (commas or repeats).")
    ] = None,
    algo: Annotated[
        list[str] | None,
        typer.Option("--algo", metavar="ALGO[,ALGO...]", help="Only these algorithms (commas or repeats)."),
    ] = None,
    piecewise: Annotated[
        bool, typer.Option("--piecewise/--no-piecewise", help="Split sizes into segments where one line does not fit.")
    ] = True,
) -> None:
    """Fit alpha-beta-gamma cost models to measured results."""
    if plot is not None:
        from collbench.report.plots import check_plot_path

        check_plot_path(plot)
    op_names = [o for o in split_values(op) if o.lower() != "all"]
    algo_names = [a.lower() for a in split_values(algo) if a.lower() != "all"]
    ops = {Op.parse(o).value for o in op_names} if op_names else None
    algos = set(algo_names) if algo_names else None
    # One --op also names the collective of a log that does not say it; several only filter.
    rows = stream_results(results, op=op_names[0] if len(op_names) == 1 else None, nodes_from_devices=True)
    wanted = (r for r in rows if (ops is None or r.op in ops) and (algos is None or r.algo in algos))
    nodes_seen: dict[tuple[str, str, str, int], set[int]] = {}
    # Rows are folded into per-point summaries as they are read: memory grows with the points, not the file.
    points = PointSummaries().extend(_noting_nodes(wanted, nodes_seen))
    if not points.rows_seen:
        raise InputFileError(", ".join(str(p) for p in results), "no rows left after --op/--algo")
    if points.rows_failed:
        err_console.print(f"{points.rows_failed} row(s) failed validation (wrong > 0): left out of the fits")
    report = fit_results(points, piecewise=piecewise)
    report = dataclasses.replace(report, fits=[_with_nodes(f, nodes_seen) for f in report.fits])
    if plot is not None:
        from collbench.report.plots import plot_fits

        plot_fits(points.points(), report.fits, plot)
        err_console.print(f"wrote plot to {plot}")
    if json_out:
        typer.echo(json.dumps(report.to_dict(), indent=2))
        return
    console.print(render_fits(report))
