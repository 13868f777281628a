"""`collbench import`: results measured by other tools, as collbench result rows."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.text import Text

from collbench.cli.console import console, err_console, print_note, print_notes
from collbench.cli.options import CollbenchCommand, CollbenchGroup, one_value
from collbench.errors import InputFileError, UnknownNameError
from collbench.fileio import check_writable
from collbench.filekinds import refuse_replacing
from collbench.importers.nccl_tests import read_nccl_tests
from collbench.importers.nodes import check_nodes_option, settle_log_nodes
from collbench.models.stored import nvlink_domain_note
from collbench.nccl.variants import is_native, parse_native_variant
from collbench.results.io import write_rows
from collbench.results.row import NODES_UNKNOWN
from collbench.schedules.registry import algorithm_names
from collbench.units import check_ranks, counted, format_bytes

app = typer.Typer(cls=CollbenchGroup, no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})


def _checked_algo(name: str) -> str:
    """``name`` as rows are filed under it: a registered algorithm, ``native`` or ``native:<variant>``.

    Raises UnknownNameError for anything else: rows under a made-up name would match nothing later.
    """
    key = name.strip().lower()
    if is_native(key):
        return parse_native_variant(key).name
    known = algorithm_names()
    if key not in known:
        # known names native too: listed once ("native, native:<nccl algorithm>, ring, ..., native" before).
        raise UnknownNameError(
            "algorithm", name, ["native", "native:<nccl algorithm>", *(k for k in known if k != "native")]
        )
    return key


# help= rather than a docstring: Typer keeps a later paragraph's line breaks as they are, so the
# docstring's second paragraph printed broken after "alltoall," in --help.
@app.command(
    "nccl-tests",
    cls=CollbenchCommand,
    help="Read nccl-tests or rccl-tests output (text table or -J JSON) into collbench result rows.\n\n"
    "Every program they print: all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, "
    "scatter, gather, sendrecv and hypercube (an all-gather by recursive doubling).",
)
def nccl_tests(
    log: Annotated[Path, typer.Argument(metavar="LOG", help="nccl-tests output: the text table or its -J JSON.")],
    algo: Annotated[
        str,
        typer.Option(
            "--algo",
            metavar="ALGO",
            help="Algorithm to file the rows under (native, or what was forced; hypercube's: recursive-doubling).",
        ),
    ] = "native",
    op: Annotated[
        str | None,
        typer.Option(
            "--op", metavar="OP", help="The collective, when the log does not name it (scatter and gather print alike)."
        ),
    ] = None,
    ranks: Annotated[
        int | None, typer.Option("--ranks", metavar="N", help="The rank count, when the log does not say it.")
    ] = None,
    nodes: Annotated[
        int | None,
        typer.Option("--nodes", metavar="N", help="The node count, when the log does not say it (else its devices')."),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-O", metavar="FILE", help="Write rows to .jsonl, .csv or .parquet.")
    ] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace an -O file that holds rows already.")] = False,
) -> None:
    """Read nccl-tests or rccl-tests output into collbench result rows (the command's help says more)."""
    if output is not None and output.suffix.lower() not in (".jsonl", ".csv", ".parquet"):
        raise InputFileError(str(output), "unknown results format; use .jsonl, .csv or .parquet")
    if ranks is not None:
        # Checked here in the words of every command's --ranks (Typer's min=1 said "Input should be
        # greater than or equal to 1").
        check_ranks(ranks, 1, "import nccl-tests")
    algo = _checked_algo(algo)
    check_nodes_option(nodes, ranks, "import nccl-tests")
    op = one_value(op, "--op", "collective")
    # The options first, then the file: a mistyped option says so, not what is wrong with -O.
    if output is not None:
        check_writable(output)
        # As sweep refuses a stream with rows: -O naming a sweep's results must not replace what it measured.
        refuse_replacing(output, overwrite)
    notes: list[str] = []
    rows = read_nccl_tests(log, algo=algo, op=op, ranks=ranks, notes=notes)
    # As fit settles a log's node count, so that fitting the rows written here gives the same fit.
    rows = settle_log_nodes(log, rows, nodes, notes)
    print_notes(notes)
    if nodes is None:
        # A GB200 log's hosts are the trays of one NVLink domain, which NCCL counts as one node.
        for op_name, world, device, hosts in dict.fromkeys((r.op, r.world_size, r.device_name, r.nodes) for r in rows):
            said = nvlink_domain_note(f"{op_name}, {world} ranks", world, device, hosts, "`--nodes {racks}` says so")
            if said is not None:
                print_note("note", said)
    ops = ", ".join(dict.fromkeys(r.op for r in rows))
    algos = ", ".join(dict.fromkeys(r.algo for r in rows))
    # A paste may hold several runs: each shape is said, not the first run's alone.
    shapes = " and ".join(
        f"{counted(ranks, 'rank')} on "
        + ("an unknown number of nodes" if nodes == NODES_UNKNOWN else counted(nodes, "node"))
        for ranks, nodes in dict.fromkeys((r.world_size, r.nodes) for r in rows)
    )
    summary = (
        f"{counted(len(rows), 'row')}: {ops}, {shapes}, "
        # In K/M/G, as every table says a size: '8589934592-17179869184 bytes' asked the reader to count digits.
        f"{format_bytes(min(r.size_bytes for r in rows))} to {format_bytes(max(r.size_bytes for r in rows))}, "
        f"algo {algos}"
    )
    failed = sum(1 for r in rows if r.wrong > 0)
    if failed:
        # Kept (they were measured) but marked: fit and tune skip rows with wrong data.
        summary += f"; {counted(failed, 'row')} failed validation (wrong > 0): kept, never fitted or selected"
    if output is None:
        from collbench.results.journal import json_line

        for row in rows:
            # Each line as a .jsonl file holds it, so the output redirected is a results file.
            typer.echo(json_line(row.to_dict()), nl=False)
        err_console.print(summary)
        return
    write_rows(output, rows)
    console.print(escape(summary), highlight=False)
    # After the summary, 80 columns broke between 'wrote' and the path. The path is never cut: beside its
    # words where they fit, else on a line of its own, never wrapped by Rich (a path wider than the
    # terminal was folded; the terminal wraps it whole, to copy as it is).
    wrote = Text.assemble("wrote rows to ", str(output))
    if wrote.cell_len > console.width:
        console.print("wrote rows to")
        wrote = Text(str(output))
    console.print(wrote, soft_wrap=True, highlight=False)
