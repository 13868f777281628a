"""`collbench report`: results, profile and topology as one HTML page that opens offline."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from collbench.cli.console import console, err_console
from collbench.cli.rows import load_results
from collbench.errors import InputFileError
from collbench.fileio import check_writable, refuse_replacing_record


def report(
    results: Annotated[
        list[Path],
        typer.Argument(metavar="RESULTS", help="collbench results (.jsonl/.csv/.parquet) or nccl-tests logs."),
    ],
    profile: Annotated[
        Path | None, typer.Option("--profile", metavar="PROFILE.yaml", help="A profile from `collbench tune`.")
    ] = None,
    topology: Annotated[
        Path | None, typer.Option("--topology", metavar="FILE", help="A topology from `collbench discover -O`.")
    ] = None,
    output: Annotated[Path, typer.Option("--output", "-O", metavar="FILE.html", help="Where the page goes.")] = Path(
        "report.html"
    ),
) -> None:
    """One self-contained HTML page: the machine, per op charts and tables, the profile, and provenance."""
    from collbench.report.page import ReportInputs, write_report
    from collbench.results.row import ResultRow

    if output.suffix.lower() not in (".html", ".htm"):
        raise InputFileError(str(output), "a report is HTML; use a .html name")
    check_writable(output)
    refuse_replacing_record(output, "an HTML page")
    loaded_profile = None
    if profile is not None:
        from collbench.profile.document import Profile

        loaded_profile = Profile.load(profile)
    loaded_topology = None
    if topology is not None:
        from collbench.topology.io import load_topology

        loaded_topology = load_topology(topology)
    rows: list[ResultRow] = load_results(results)
    if not rows:
        raise InputFileError(", ".join(map(str, results)), "no result rows to report on")
    inputs = ReportInputs(
        rows=tuple(rows),
        profile=loaded_profile,
        topology=loaded_topology,
        command=shlex.join(["collbench", *sys.argv[1:]]) if sys.argv[1:2] == ["report"] else "collbench report",
        sources=tuple(str(p) for p in results),
    )
    path = write_report(output, inputs)
    for note in inputs.notes:
        err_console.print(f"[yellow]note[/yellow]: {note}")
    console.print(f"report: [bold]{escape(str(path))}[/bold] ({path.stat().st_size // 1024} KiB, {len(rows)} rows)")
