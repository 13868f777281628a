"""`collbench report`: results, profile and topology as one HTML page that opens offline."""

from __future__ import annotations

import shlex
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from collbench.cli.console import console, print_note
from collbench.cli.rows import load_results_by_file
from collbench.errors import InputFileError
from collbench.fileio import check_writable
from collbench.filekinds import refuse_replacing, refuse_replacing_record
from collbench.units import counted

if TYPE_CHECKING:
    from collbench.results.row import ResultRow


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
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace a file already at -O (never a profile, results or a topology).")
    ] = False,
) -> None:
    """One self-contained HTML page: the machine, per op charts and tables, the profile, and provenance."""
    from collbench.report.mismatch import mismatches
    from collbench.report.page import ReportInputs, write_report

    if output.suffix.lower() not in (".html", ".htm"):
        raise InputFileError(str(output), "a report is HTML; use a .html name")
    check_writable(output)
    refuse_replacing_record(output, "an HTML page")
    refuse_replacing(output, overwrite)  # a second report into one name replaced the first without a word
    loaded_profile = None
    if profile is not None:
        from collbench.profile.document import Profile

        loaded_profile = Profile.load(profile)
    loaded_topology = None
    if topology is not None:
        from collbench.topology.io import load_topology

        loaded_topology = load_topology(topology)
    by_file = load_results_by_file(results)
    rows: list[ResultRow] = [row for part in by_file for row in part]
    if not rows:
        raise InputFileError(", ".join(map(str, results)), "no result rows to report on")
    warnings = mismatches(
        rows, topology=loaded_topology, topology_name=str(topology), profile=loaded_profile, profile_name=str(profile)
    )
    notes = shared_series(results, by_file)
    inputs = ReportInputs(
        rows=tuple(rows),
        profile=loaded_profile,
        topology=loaded_topology,
        command=shlex.join(["collbench", *sys.argv[1:]]) if sys.argv[1:2] == ["report"] else "collbench report",
        sources=tuple(str(p) for p in results),
        # On the page too: whoever opens it was not there to read the warning.
        notes=[*warnings, *notes],
    )
    path = write_report(output, inputs)
    for warning in warnings:
        print_note("warning", warning)
    for note in notes:
        print_note("note", note)
    size_kib = path.stat().st_size // 1024
    console.print(f"report: [bold]{escape(str(path))}[/bold] ({size_kib} KiB, {counted(len(rows), 'row')})")


def shared_series(paths: list[Path], by_file: list[list[ResultRow]]) -> list[str]:
    """A note for each set of files that hold the same series (op, backend, ranks, algorithm, dtype).

    The page draws one line per series, the fastest row at each size: 'report h100.log p5.log', two
    machines' all_reduce_perf at 16 ranks, drew one 'native' line from both, with no word that it
    mixed two runs."""
    from collbench.report.ops import reduction

    holders: dict[tuple[str, str, int, str, str, str], list[str]] = {}
    for path, rows in zip(paths, by_file, strict=True):
        # Rows of another reduction are a line of their own (report/ops.py): not the same series.
        for key in dict.fromkeys((r.op, r.backend, r.world_size, r.algo, r.dtype, reduction(r)) for r in rows):
            holders.setdefault(key, []).append(str(path))
    shared: dict[tuple[str, ...], list[str]] = {}
    redops = Counter(key[:5] for key in holders)
    for (op, backend, ranks, algo, dtype, redop), held_by in holders.items():
        if len(held_by) > 1:
            # Two reductions of one series are two lines: each named, not the same words twice.
            with_redop = f" {redop}" if redops[(op, backend, ranks, algo, dtype)] > 1 else ""
            shared.setdefault(tuple(held_by), []).append(
                f"{op} {algo} {dtype}{with_redop} at {ranks} ranks over {backend}"
            )
    notes = []
    for files, series in shared.items():
        named = ", ".join(files[:-1]) + f" and {files[-1]}"
        compare = f"`collbench compare {files[0]} {files[1]}`" if len(files) == 2 else "`collbench compare`"
        notes.append(
            f"{named} hold the same series, {'; '.join(series)}: the page draws each as one line, the "
            f"fastest row at each size of them all; {compare} sets two runs side by side"
        )
    return notes
