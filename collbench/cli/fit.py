"""`collbench fit`: alpha-beta-gamma cost models fitted to measured results, with crossovers."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from collbench.cli.console import console, err_console, print_note
from collbench.cli.options import split_values
from collbench.cli.rows import stream_results
from collbench.errors import ConfigError, InputFileError
from collbench.importers.nodes import check_nodes_option
from collbench.models.stored import (
    FIT_NODES_ADVICE,
    LOGS_NODES_ADVICE,
    ROWS_NODES_ADVICE,
    GroupsSeen,
    fit_nvlink_domain_note,
    noting_groups,
    with_group,
)
from collbench.results.fields import name_problem
from collbench.results.io import RESULT_SUFFIXES
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op, parse_dtype
from collbench.units import check_ranks, counted


def fit(
    results: Annotated[
        list[Path],
        typer.Argument(metavar="RESULTS", help="collbench results (.jsonl/.csv/.parquet) or nccl-tests logs."),
    ],
    json_out: Annotated[bool, typer.Option("--json", help="Print {fits, crossovers} as JSON, nothing else.")] = False,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-O",
            metavar="FITS.json",
            help="Write {fits, crossovers} as JSON (what --json prints; predict --fits reads it) to this file.",
        ),
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option("--overwrite", help="Replace a file at -O or --plot (never a profile, results or a topology)."),
    ] = False,
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
    dtype: Annotated[
        list[str] | None,
        typer.Option(
            "-d",
            "--dtype",
            metavar="TYPE[,TYPE...]",
            help="Only rows of these dtypes (commas or repeats); rows of several are fitted as one.",
        ),
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
    if ranks is not None:
        check_ranks(ranks, 1, "fit")
    check_nodes_option(nodes, ranks, "fit")
    op_names = [o for o in split_values(op) if o.lower() != "all"]
    algo_names = [a.lower() for a in split_values(algo) if a.lower() != "all"]
    ops = {Op.parse(o).value for o in op_names} if op_names else None
    for name in algo_names:
        # As --op and --dtype are: a name no row can hold ('--algo rign') said only "no rows left".
        if problem := name_problem("algo", name):
            raise ConfigError(f"--algo: {problem}")
    algos = set(algo_names) if algo_names else None
    dtypes = {parse_dtype(d) for d in split_values(dtype)} or None
    if plot is not None:  # the options first, then the file it would write
        from collbench.report.plots import check_plot_path

        check_plot_path(plot)
        from collbench.filekinds import refuse_replacing, refuse_replacing_record

        refuse_replacing_record(plot, "a plot")  # a profile or rows under the plot's name stay
        refuse_replacing(plot, overwrite, option="--plot")  # and another plot, unless told
    if output is not None:
        check_fits_output(output, results, overwrite)
    # One --op also names the collective of a log that does not say it; several only filter.
    rows = stream_results(
        results, op=op_names[0] if len(op_names) == 1 else None, nodes_from_devices=True, ranks=ranks, nodes=nodes
    )
    wanted = (
        r
        for r in rows
        if (ops is None or r.op in ops) and (algos is None or r.algo in algos) and (dtypes is None or r.dtype in dtypes)
    )
    dtypes_seen: dict[str, set[str]] = {}
    redops_seen: dict[str, set[str]] = {}
    groups_seen: GroupsSeen = {}
    # Rows are folded into per-point summaries as they are read: memory grows with the points, not the file.
    from collbench.cli.render.models import render_fits
    from collbench.models.fit import fit_results
    from collbench.models.fit_points import PointSummaries

    points = PointSummaries().extend(
        _noting_dtypes_and_reductions(noting_groups(wanted, groups_seen), dtypes_seen, redops_seen)
    )
    if not points.rows_seen:
        raise InputFileError(", ".join(str(p) for p in results), "no rows left after --op/--algo/--dtype")
    if points.rows_failed:
        err_console.print(f"{counted(points.rows_failed, 'row')} failed validation (wrong > 0): left out of the fits")
    mixed: dict[tuple[str, ...], list[str]] = {}
    for op_name, seen in dtypes_seen.items():
        if len(seen) > 1:
            mixed.setdefault(tuple(sorted(seen)), []).append(op_name)
    for kinds, mixed_ops in mixed.items():
        # A fit has no dtype: a size's point is the fastest of its rows, whatever their dtype (a sweep
        # of float32 then bfloat16 into one file was fitted as one model without a word).
        print_note(
            "note",
            f"{', '.join(mixed_ops)}: rows of {' and '.join(kinds)} fitted as one model, each size at the "
            "fastest of them; -d TYPE fits one dtype's rows",
        )
    for op_name, seen in redops_seen.items():
        if len(seen) > 1:
            # As dtypes are: a sweep of -o sum then -o max into one stream was fitted as one model unsaid.
            print_note(
                "note",
                f"{op_name}: rows of the {' and '.join(sorted(seen))} reductions fitted as one model, each size at "
                "the fastest of them; a results file of one reduction fits it alone",
            )
    # Named by its files: 'error: results: no rows ...' read as a file called results.
    report = fit_results(points, piecewise=piecewise, source=", ".join(str(p) for p in results))
    report = dataclasses.replace(report, fits=[with_group(f, groups_seen) for f in report.fits])
    if nodes is None:
        # `fit --nodes` gives a log its node count; rows record theirs and refuse it ('fit rows.jsonl --nodes
        # 20' of the imported 1,440-rank log: "its rows say 360 nodes, not 20"), so their note says what works.
        rows_given = any(p.suffix.lower() in RESULT_SUFFIXES for p in results)
        advice = ROWS_NODES_ADVICE if rows_given else LOGS_NODES_ADVICE if len(results) > 1 else FIT_NODES_ADVICE
        for said in sorted({n for f in report.fits if (n := fit_nvlink_domain_note(f, f.nodes, advice)) is not None}):
            print_note("note", said)
    if plot is not None:
        from collbench.report.plots import plot_fits

        plot_fits(points.points(), report.fits, plot)
        err_console.print(f"wrote plot to {plot}")
    document = json.dumps(report.to_dict(), indent=2)
    if output is not None:
        from collbench.fileio import atomic_write_text

        atomic_write_text(output, document + "\n")
    if json_out:
        typer.echo(document)
    else:
        console.print(render_fits(report))
    if output is not None:
        err_console.print(f"wrote fits to {escape(str(output))}", highlight=False)


def check_fits_output(path: Path, inputs: Sequence[Path], overwrite: bool) -> None:
    """UserError, before any work, for a place fits cannot go: not writable, not a .json name (predict
    --fits reads a file by its suffix), one of the inputs (a log named .json replaced by its own fits),
    a file holding a profile, results or a topology (never, even with ``overwrite``: what was measured
    stays), or, unless ``overwrite``, any other file with content (as import's and profile's -O)."""
    from collbench.fileio import check_writable
    from collbench.filekinds import FITS_KIND, refuse_replacing, refuse_replacing_record

    check_writable(path)
    if path.suffix.lower() != ".json":
        raise ConfigError(f"-O/--output {path}: fits are JSON (predict --fits reads them); use a .json name")
    for given in inputs:
        with contextlib.suppress(OSError):
            if path.samefile(given):
                raise ConfigError(f"-O {path} is one of the files fitted; write the fits to another file")
    refuse_replacing_record(path, FITS_KIND)
    refuse_replacing(path, overwrite)


def _noting_dtypes_and_reductions(
    rows: Iterable[ResultRow], seen: dict[str, set[str]], redops: dict[str, set[str]]
) -> Iterator[ResultRow]:
    """``rows`` as they stream past, with each op's dtypes gathered into ``seen``, the reductions of an op
    that reduces into ``redops`` (an all-gather's row keeps the sweep's -o, which it never applied)."""
    reduces: dict[str, bool] = {}
    for row in rows:
        seen.setdefault(row.op, set()).add(row.dtype)
        if reduces.setdefault(row.op, Op.parse(row.op).spec.reduces):
            redops.setdefault(row.op, set()).add(row.redop)
        yield row
