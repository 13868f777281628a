"""`collbench compare BASE NEW`: did it get slower? Per point ratio with its uncertainty, per op a summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from collbench.cli.console import console, err_console
from collbench.cli.fit import load_results
from collbench.errors import InputFileError
from collbench.report.compare import Comparison, PointChange, compare_rows, parse_threshold


def _paths(arg: list[Path], name: str) -> list[Path]:
    for p in arg:
        if not p.exists():
            raise InputFileError(str(p), f"no such file ({name})")
    return arg


def _pct(ratio: float) -> str:
    return f"{100.0 * (ratio - 1.0):+.1f}%"


def _verdict(c: PointChange, threshold: float | None) -> str:
    if c.newly_wrong:
        return "[red]WRONG DATA[/red]"
    if not c.beyond_noise:
        return "[dim]noise[/dim]"
    if c.ratio > 1.0:
        failing = threshold is not None and c.regressed(threshold)
        return "[red]SLOWER[/red]" if failing or threshold is None else "[yellow]slower[/yellow]"
    return "[green]faster[/green]"


def _points_table(comparison: Comparison, threshold: float | None) -> Table:
    table = Table(box=box.SIMPLE_HEAD, title="time new / base per point (+: slower)", title_justify="left")
    for name in ("op", "algo", "dtype", "ranks", "size (B)", "base us", "new us", "change", "+-", "verdict"):
        table.add_column(name, justify="right" if name not in ("op", "algo", "dtype", "verdict") else "left")
    for c in comparison.changes:
        table.add_row(
            c.op,
            c.algo,
            c.dtype,
            str(c.world_size),
            str(c.size_bytes),
            f"{c.base.time_us:.2f}",
            f"{c.new.time_us:.2f}",
            _pct(c.ratio),
            f"{100.0 * c.rel_error:.1f}%",
            _verdict(c, threshold),
        )
    return table


def _summary_table(comparison: Comparison) -> Table:
    table = Table(box=box.SIMPLE_HEAD, title="per op and algorithm", title_justify="left")
    for name in ("op", "algo", "points", "geomean", "worst size (B)", "worst", "beyond noise"):
        table.add_column(name, justify="left" if name in ("op", "algo") else "right")
    for s in comparison.summaries():
        table.add_row(
            s.op,
            s.algo,
            str(s.points),
            _pct(s.geomean_ratio),
            str(s.worst.size_bytes),
            f"{_pct(s.worst.ratio)} +- {100.0 * s.worst.rel_error:.1f}%",
            str(s.beyond_noise),
        )
    return table


def compare(
    base: Annotated[
        Path, typer.Argument(metavar="BASE", help="The reference run: collbench results or an nccl-tests log.")
    ],
    new: Annotated[Path, typer.Argument(metavar="NEW", help="The run to judge against BASE.")],
    fail_above: Annotated[
        str | None,
        typer.Option(
            "--fail-above",
            metavar="PCT",
            help="Exit 1 when a point is slower by more than PCT (e.g. 5%) and beyond noise, or newly wrong.",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON, nothing else.")] = False,
) -> None:
    """Compare two result sets point by point: the ratio, its uncertainty, and whether it is beyond noise."""
    threshold = None if fail_above is None else parse_threshold(fail_above)
    base_rows = load_results(_paths([base], "BASE"))
    new_rows = load_results(_paths([new], "NEW"))
    comparison = compare_rows(base_rows, new_rows)
    failed = threshold is not None and bool(comparison.regressions(threshold))
    if json_out:
        typer.echo(json.dumps(comparison.to_dict(threshold), indent=1))
    else:
        console.print(_points_table(comparison, threshold))
        console.print(_summary_table(comparison))
        unmatched = ""
        if comparison.only_base or comparison.only_new:
            unmatched = f"; unmatched: {comparison.only_base} only in BASE, {comparison.only_new} only in NEW"
        err_console.print(
            f"{len(comparison.changes)} points matched{unmatched}. +- is one standard error of the ratio, from both "
            "runs' spreads ((p50 - min) / p50 / sqrt(iters), and between repeated rows); noise: within 2 of them."
        )
        if threshold is not None:
            n = len(comparison.regressions(threshold))
            verdict = f"[red]{n} point(s) regressed[/red]" if n else "[green]no regression[/green]"
            err_console.print(f"{verdict} beyond {100.0 * threshold:g}% and beyond noise")
    if failed:
        raise typer.Exit(1)
