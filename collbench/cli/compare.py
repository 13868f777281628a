"""`collbench compare BASE NEW`: did it get slower? Per point ratio with its uncertainty, per op a summary."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from collbench.cli.console import console, err_console, print_note, whole_lines
from collbench.cli.render.styles import narrow_table, one_value
from collbench.cli.rows import stream_results
from collbench.errors import InputFileError
from collbench.results.io import check_regular_file
from collbench.results.noise import STALL_FACTOR, STALL_MARK, STALL_MARKER
from collbench.units import counted

MAX_TABLE_POINTS = 60
"""Points the terminal table shows at most: those beyond noise first; ``--json`` lists every point."""

if TYPE_CHECKING:
    from collbench.report.compare import Comparison, PointChange, RunFactor


def _paths(arg: list[Path], name: str) -> list[Path]:
    for p in arg:
        if not os.path.lexists(p):  # a link that loops is said by check_regular_file, not as missing
            raise InputFileError(str(p), f"no such file ({name})")
        check_regular_file(p)
    return arg


def _pct(ratio: float) -> str:
    return f"{100.0 * (ratio - 1.0):+.1f}%"


def _verdict(c: PointChange, threshold: float | None) -> str:
    if c.newly_wrong:
        return "[red]WRONG DATA[/red]"
    if c.stalled:
        # A stalled run's time is the machine's load: neither a regression nor an improvement.
        return "[yellow]stalled[/yellow]"
    if not c.beyond_noise:
        return "[dim]noise[/dim]"
    if c.relative_ratio > 1.0:
        failing = threshold is not None and c.regressed(threshold)
        return "[red]SLOWER[/red]" if failing or threshold is None else "[yellow]slower[/yellow]"
    return "[green]faster[/green]"


def _shown(comparison: Comparison) -> list[PointChange]:
    """The table's points: all of them, or past MAX_TABLE_POINTS those beyond noise, stalled or newly wrong."""
    if len(comparison.changes) <= MAX_TABLE_POINTS:
        return list(comparison.changes)
    notable = [c for c in comparison.changes if c.beyond_noise or c.newly_wrong or c.stalled]
    return notable[:MAX_TABLE_POINTS]


def _points_table(comparison: Comparison, shown: list[PointChange], threshold: float | None) -> Table:
    """Per point: what every shown point shares (op, dtype, ranks) goes in the title, so the table fits
    80 columns with every value whole."""
    shared = {
        "op": one_value(c.op for c in shown),
        "dtype": one_value(c.dtype for c in shown),
        "ranks": one_value(str(c.world_size) for c in shown),
    }
    said = ", ".join(f"{value} {name}" if name == "ranks" else value for name, value in shared.items() if value)
    title = "time new / base per point (+: slower); vs run: the change beyond the whole run's"
    columns = [n for n in ("op", "algo", "dtype", "ranks") if shared.get(n) is None]
    # Wider than 80 columns, each part repeats what names the point (its size too), as the key.
    table = narrow_table(f"{title}{' (' + said + ')' if said else ''}", keep=len(columns) + 1)
    columns += ["size (B)", "base us", "new us", "change", "vs run", "±", "verdict"]
    for name in columns:
        table.add_column(name, justify="left" if name in ("op", "algo", "dtype", "verdict") else "right", no_wrap=True)
    for c in shown:
        cells = {"op": c.op, "algo": c.algo, "dtype": c.dtype, "ranks": str(c.world_size)}
        table.add_row(
            *(cells[n] for n in columns if n in cells),
            str(c.size_bytes),
            f"{c.base.time_us:.2f}{STALL_MARKER if c.base.stalled else ''}",
            f"{c.new.time_us:.2f}{STALL_MARKER if c.new.stalled else ''}",
            _pct(c.ratio),
            _pct(c.relative_ratio),
            f"{100.0 * c.judged_error:.1f}%",
            _verdict(c, threshold),
        )
    return table


def _summary_table(comparison: Comparison) -> Table:
    # Split at 80 columns, each part repeats op and algo: a "stalled" part of op alone named no algorithm.
    table = narrow_table("per op and algorithm", keep=2)
    stalled: dict[tuple[str, str], int] = {}
    for c in comparison.changes:
        if c.stalled:
            stalled[(c.op, c.algo)] = stalled.get((c.op, c.algo), 0) + 1
    names = ["op", "algo", "points", "geomean", "worst at\nsize (B)", "worst", "beyond\nnoise"]
    for name in names + (["stalled"] if stalled else []):
        table.add_column(name, justify="left" if name in ("op", "algo") else "right", no_wrap=True)
    for s in comparison.summaries():
        table.add_row(
            s.op,
            s.algo,
            str(s.points),
            _pct(s.geomean_ratio),
            str(s.worst.size_bytes),
            f"{_pct(s.worst.ratio)} ± {100.0 * s.worst.judged_error:.1f}%",
            str(s.beyond_noise),
            *([str(stalled.get((s.op, s.algo), 0))] if stalled else []),
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
            help="Exit 1 when a point or the whole run is slower than PCT (e.g. 5%) beyond noise, or newly wrong.",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON, nothing else.")] = False,
) -> None:
    """Compare two result sets point by point: the ratio, its uncertainty, and whether it is beyond noise."""
    from collbench.report.compare import compare_rows, parse_threshold

    threshold = None if fail_above is None else parse_threshold(fail_above)
    _paths([base], "BASE")
    _paths([new], "NEW")
    # Each side streams into per-point summaries: memory and time grow with the points, not with rows held.
    comparison = compare_rows(stream_results([base]), stream_results([new]), threshold=threshold)
    failed = threshold is not None and comparison.failed(threshold)
    if json_out:
        typer.echo(json.dumps(comparison.to_dict(threshold), indent=1))
        for warning in comparison.warnings:
            print_note("warning", warning)
    else:
        shown = _shown(comparison)
        if shown:
            console.print(_points_table(comparison, shown, threshold))
        stalled = [c for c in comparison.changes if c.stalled]
        if stalled:
            console.print(
                f"{STALL_MARKER}: stalled, {counted(len(stalled), 'point')} where {100 * STALL_MARK:.0f}% or more of a "
                f"run's iterations took over {STALL_FACTOR:g}x its fastest (the machine was busy): their change is not "
                "judged (verdict 'stalled') and never counts as a regression",
                highlight=False,
                soft_wrap=whole_lines(console),
            )
        console.print(_summary_table(comparison))
        for warning in comparison.warnings:
            print_note("warning", warning)
        unmatched = ""
        if comparison.only_base or comparison.only_new:
            unmatched = f"; unmatched: {comparison.only_base} only in BASE, {comparison.only_new} only in NEW"
        hidden = len(comparison.changes) - len(shown)
        not_shown = f"; {counted(hidden, 'point')} within noise not shown (--json lists every one)" if hidden else ""
        err_console.print(
            f"{counted(len(comparison.changes), 'point')} matched{unmatched}{not_shown}. ± is one standard error of "
            "the point's change beyond the whole run's, from both runs' spreads ((p50 - min) / p50 / sqrt(iters), and "
            f"between repeated rows) and the run-to-run drift; verdict noise: within {_z_text(comparison)} standard "
            "errors of no change (the bar at which two runs of one machine flag no point in 95% of comparisons).",
            highlight=False,
        )
        err_console.print(_run_line(comparison.run), highlight=False)
        if threshold is not None:
            n = len(comparison.regressions(threshold))
            verdict = f"[red]{counted(n, 'point')} regressed[/red]" if n else "[green]no point regressed[/green]"
            if comparison.run_regressed(threshold):
                verdict += ", [red]and the whole run is slower[/red]"
            err_console.print(f"{verdict} beyond {100.0 * threshold:g}% and beyond noise", highlight=False)
    if failed:
        raise typer.Exit(1)


def _z_text(comparison: Comparison) -> str:
    zs = [c.z for c in comparison.changes]
    # Compared as printed: bars of 2.86 and 2.94 read 'within 2.9-2.9 standard errors'.
    low, high = f"{min(zs):.1f}", f"{max(zs):.1f}"
    return low if low == high else f"{low}-{high}"


def _run_line(run: RunFactor) -> str:
    """One line on the whole-run factor: how much, how sure, and what was done with it."""
    change = 100.0 * (run.factor - 1.0)
    how = f"NEW is {abs(change):.1f}% {'slower' if change >= 0 else 'faster'} than BASE overall"
    detail = f"(median over {counted(run.points, 'point')}, +- {100.0 * run.rel_error:.1f}%)"
    drift = f"the {100.0 * run.bound:g}% a whole run may drift"
    if run.regressed:
        verdict = f"[red]slower than {drift}, by more than its noise: a whole-run change[/red]"
    elif run.beyond_noise and change >= 0:
        verdict = f"[yellow]beyond noise[/yellow], but within {drift} (allowing for its noise)"
    elif run.beyond_noise:
        # Faster is never a regression: the drift bound is only about slowing down.
        verdict = "beyond noise (faster)"
    else:
        verdict = "within noise"
    use = (
        "points are judged against it"
        if run.divided_out
        else "too few points to take it out, points are judged as measured"
    )
    return f"{how} {detail}: {verdict}; {use}."
