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
from collbench.errors import ConfigError, InputFileError
from collbench.importers.nccl_tests import looks_like_nccl_tests, read_nccl_tests
from collbench.importers.nodes import check_nodes_option, given_nodes, settle_log_nodes
from collbench.models.fit import fit_results
from collbench.models.fit_points import PointSummaries
from collbench.models.fitted import Fit
from collbench.results.io import check_regular_file, iter_rows
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op


def load_results(paths: list[Path], *, op: str | None = None) -> list[ResultRow]:
    """Rows of collbench result files (.jsonl/.csv/.parquet) and nccl-tests logs (detected).

    ``op`` labels the rows of a log that names no test (a log naming one keeps its own); what a log
    left to inference is printed, one line each.
    """
    return list(stream_results(paths, op=op))


def stream_results(
    paths: list[Path],
    *,
    op: str | None = None,
    nodes_from_devices: bool = False,
    ranks: int | None = None,
    nodes: int | None = None,
) -> Iterator[ResultRow]:
    """The rows of :func:`load_results`, one at a time: a results file is never held whole.

    Raises InputFileError as the readers do (file, line and field), when the bad row is reached.
    ``nodes_from_devices``: a log that names too few hosts for its node count gives one from its rank
    lines' device numbers (``importers/nodes.py``), said in a note. ``ranks``: the rank count of a log
    that does not say it (``fit --ranks``); ``nodes``: the node count of rows that do not say it
    (``fit --nodes``), an error where a row says another.
    """
    notes: list[str] = []
    for path in paths:
        check_regular_file(path)  # before anything opens it: a FIFO blocks, /dev/zero never ends
        if looks_like_nccl_tests(path):
            rows = read_nccl_tests(path, op=op, ranks=ranks, strict_op=False, notes=notes)
            if nodes_from_devices or nodes is not None:
                rows = settle_log_nodes(path, rows, nodes, notes)
            yield from rows
        elif nodes is not None:
            yield from given_nodes(iter_rows(path), nodes, str(path))
        else:
            yield from iter_rows(path)
    print_notes(notes)


def _noting_nodes(
    rows: Iterable[ResultRow], seen: dict[tuple[str, str, str, int], tuple[set[int], set[str]]]
) -> Iterator[ResultRow]:
    """The rows unchanged, noting each group's node counts and devices on the way (a stream is read once)."""
    for row in rows:
        nodes, devices = seen.setdefault((row.op, row.algo, row.backend, row.world_size), (set(), set()))
        nodes.add(row.nodes)
        devices.add(row.device_name)
        yield row


def _with_nodes(fit: Fit, seen: dict[tuple[str, str, str, int], tuple[set[int], set[str]]]) -> Fit:
    """The fit with its measured node count and device where every row of its group gave the same known one."""
    counts, devices = seen.get((fit.op, fit.algo, fit.backend, fit.world_size), (set(), set()))
    if len(counts) == 1 and min(counts) >= 1:
        fit = dataclasses.replace(fit, nodes=min(counts))
    if len(devices) == 1 and min(devices):
        fit = dataclasses.replace(fit, device=min(devices))
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
    ranks: Annotated[
        int | None, typer.Option("--ranks", metavar="N", help="The rank count of a log that does not say it.")
    ] = None,
    nodes: Annotated[
        int | None,
        typer.Option("--nodes", metavar="N", help="The node count of rows and logs that do not say it."),
    ] = None,
) -> None:
    """Fit alpha-beta-gamma cost models to measured results."""
    if ranks is not None and ranks < 1:
        raise ConfigError(f"--ranks must be at least 1, got {ranks}")
    check_nodes_option(nodes, ranks)
    op_names = [o for o in split_values(op) if o.lower() != "all"]
    algo_names = [a.lower() for a in split_values(algo) if a.lower() != "all"]
    ops = {Op.parse(o).value for o in op_names} if op_names else None
    algos = set(algo_names) if algo_names else None
    if plot is not None:  # the options first, then the file it would write
        from collbench.report.plots import check_plot_path

        check_plot_path(plot)
    # One --op also names the collective of a log that does not say it; several only filter.
    rows = stream_results(
        results, op=op_names[0] if len(op_names) == 1 else None, nodes_from_devices=True, ranks=ranks, nodes=nodes
    )
    wanted = (r for r in rows if (ops is None or r.op in ops) and (algos is None or r.algo in algos))
    nodes_seen: dict[tuple[str, str, str, int], tuple[set[int], set[str]]] = {}
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
