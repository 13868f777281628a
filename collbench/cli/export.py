"""`collbench export`: turn a profile into what jobs and libraries consume.

One command per entry of the exporters' registry (``collbench.exporters.registry.EXPORTS``), in its order
and with its help: each command here only parses its options into an ``ExportRequest``; the export itself
is the entry's function, and what it returns is written and said by :func:`_emit`.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from collbench.cli.console import err_console, print_note, whole_lines
from collbench.cli.options import CollbenchCommand, CollbenchGroup
from collbench.errors import UserError
from collbench.exporters.registry import EXPORTS, ExportRequest, export_named
from collbench.fileio import atomic_write_text, check_writable
from collbench.filekinds import refuse_replacing_record
from collbench.units import check_ranks

app = typer.Typer(cls=CollbenchGroup, no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})

ProfileArg = Annotated[Path, typer.Argument(help="A profile YAML written by `collbench tune`.", show_default=False)]
OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-O",
        metavar="FILE",
        help="Write to this file (atomically) instead of stdout (- is stdout); never the input profile, an "
        "existing .jsonl/.csv/.parquet file, or one holding a profile, results or a topology.",
    ),
]
FromOtherBackendOpt = Annotated[
    bool,
    typer.Option(
        "--from-other-backend",
        help="Export a profile measured over a backend other than NCCL (gloo) anyway; its lines say which "
        "of collbench's algorithms won there, not what NCCL runs best.",
    ),
]

OmpiFromOtherBackendOpt = Annotated[
    bool,
    typer.Option(
        "--from-other-backend",
        help="Export a profile measured over a backend other than Open MPI (gloo, nccl) anyway; its rules say "
        "which of collbench's algorithms won there, mapped to Open MPI's nearest, not what Open MPI runs best.",
    ),
]


RESULT_SUFFIXES = (".jsonl", ".csv", ".parquet")


def check_not_measured(output: Path, profile_path: Path) -> None:
    """Refuse an -O that would replace what was measured: the input profile itself, or an existing
    results file (named .jsonl, .csv or .parquet, the formats collbench writes rows in; no export is
    one of them). Raises UserError naming the file and the rule."""
    with contextlib.suppress(OSError):
        if output.exists() and profile_path.exists() and output.samefile(profile_path):
            raise UserError(f"-O {output} is the input profile; write the export to another file")
    if output.suffix.lower() in RESULT_SUFFIXES and output.exists():
        raise UserError(
            f"-O {output}: an existing {output.suffix.lower()} file may hold measured results, and export never "
            "overwrites one; name a new file"
        )


def _emit(name: str, profile_path: Path, output: Path | None, request: ExportRequest) -> None:
    """Check ``-O``, load the profile, run the export ``name`` and write or print what it returns."""
    from collbench.profile.document import Profile

    entry = export_named(name)
    if output is not None and str(output) == "-":
        output = None  # -O - is stdout, as when -O is left out
    if output is not None:
        check_writable(output)
        check_not_measured(output, profile_path)
        refuse_replacing_record(output, f"the {entry.what}")
    exported = entry.function(Profile.load(profile_path), request)
    for note in exported.notes:
        # What the consumer cannot follow goes to stderr too, so a user piping stdout still sees it;
        # wrapped as every note is (continued lines indented, a number kept with its unit).
        print_note("note", note)
    if output is None:
        typer.echo(exported.text, nl=False)
    else:
        # An export is derived from the profile, so a file there is replaced (as report's page and fit's
        # plot are; records of another kind were refused above), but said: it was replaced without a word.
        replacing = output.is_file() and output.stat().st_size > 0
        atomic_write_text(output, exported.text)
        where = f"[bold]{escape(str(output))}[/bold]"
        err_console.print(
            f"wrote {entry.what} to {where}" + (" (replaced the file that was there)" if replacing else ""),
            soft_wrap=True,
        )
    for label, line in exported.after:
        if label:
            print_note(label, line)
        else:
            # Wrapped as notes are, continued lines indented: Open MPI's 'no rule needed' ranges ran on
            # at the margin, one range's three lines read as three.
            from rich.text import Text

            from collbench.cli.render.styles import Wrapped

            whole = whole_lines(err_console)
            err_console.print(Text(line) if whole else Wrapped(Text(line)), soft_wrap=whole, highlight=False)
    if output is not None and entry.use is not None:
        # A command to copy: one line whatever the width (the terminal wraps it; a newline Rich put
        # between "--mca" and its value broke the command pasted from it). The file by its full path:
        # every rank opens it in its own working directory, and Open MPI given a name it cannot open
        # there runs its fixed decisions without a word (a job script started elsewhere).
        where = shlex.quote(str(output.resolve()))
        err_console.print(escape(f"use: {entry.use.format(output=where)}"), highlight=False, soft_wrap=True)


def nccl_tuner(profile: ProfileArg, output: OutputOpt = None, from_other_backend: FromOtherBackendOpt = False) -> None:
    _emit("nccl-tuner", profile, output, ExportRequest(from_other_backend=from_other_backend))


def ompi_rules(
    profile: ProfileArg, output: OutputOpt = None, from_other_backend: OmpiFromOtherBackendOpt = False
) -> None:
    _emit("ompi-rules", profile, output, ExportRequest(from_other_backend=from_other_backend))


def ompi_rankfile(
    profile: ProfileArg,
    output: OutputOpt = None,
    ranks: Annotated[
        int | None,
        typer.Option(
            "--ranks",
            metavar="N",
            help="The communicator size whose layout to follow (default: the one measured with a ring).",
            show_default=False,
        ),
    ] = None,
    hosts: Annotated[
        str | None,
        typer.Option(
            "--hosts",
            metavar="H0,H1,...",
            help="The tuned job's hosts, one per node, in the order its ranks filled them (default: localhost on one "
            "node, else +n0,+n1,... of a resource manager's allocation).",
            show_default=False,
        ),
    ] = None,
    slots: Annotated[
        str | None,
        typer.Option(
            "--slots",
            metavar="LIST",
            help="One Open MPI slot list for every rank (0-15, 1:0-3); default: each rank's position on its node.",
            show_default=False,
        ),
    ] = None,
    topology: Annotated[
        Path | None,
        typer.Option(
            "--topology",
            metavar="FILE",
            help="Plan the ring on this topology (`collbench discover -O`, or --probe across the job's hosts) "
            "instead of the layout the profile recorded (a profile of Open MPI's own collectives records none).",
            show_default=False,
        ),
    ] = None,
) -> None:
    if ranks is not None:
        # A profile holds shapes of 2 ranks or more (tune's least): 0 was looked up and "no rules for 0
        # ranks ... (run `collbench tune --ranks 0`)".
        check_ranks(ranks, 2, "export ompi-rankfile")
    names = None if hosts is None else tuple(h.strip() for h in hosts.split(","))
    if names is not None and not all(names):
        raise UserError(f"--hosts {hosts!r}: comma-separated host names, none empty")

    topo = None
    if topology is not None:
        from collbench.topology.io import load_topology

        topo = load_topology(topology)
    request = ExportRequest(ranks=ranks, hosts=names, slots=slots, topology=topo)
    _emit("ompi-rankfile", profile, output, request)


def env(profile: ProfileArg, output: OutputOpt = None, from_other_backend: FromOtherBackendOpt = False) -> None:
    _emit("env", profile, output, ExportRequest(from_other_backend=from_other_backend))


def nccl_plugin(
    profile: ProfileArg,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-O", metavar="DIR", help="Directory for libnccl-tuner-collbench.so and its config."),
    ] = None,
    show: Annotated[
        bool, typer.Option("--show", help="Build it (in a temporary directory without -O) and print what it picks.")
    ] = False,
    from_other_backend: FromOtherBackendOpt = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace a plugin or config already in DIR (else refused).")
    ] = False,
) -> None:
    from collbench.cli.nccl_plugin import run_nccl_plugin

    run_nccl_plugin(profile, output, show, from_other_backend=from_other_backend, overwrite=overwrite)


BaseOpt = Annotated[
    Path | None,
    typer.Option(
        "--base",
        metavar="FILE",
        help="MPICH's own selection (its maint/tuning/coll/mpir/generic.json) to write the choices into; "
        "default: the one built into the installed MPICH's library (mpicc.mpich's).",
        show_default=False,
    ),
]


def mpich_json(profile: ProfileArg, output: OutputOpt = None, base: BaseOpt = None) -> None:
    from collbench.exporters.mpich_json import load_base

    tree, source = load_base(base)
    _emit("mpich-json", profile, output, ExportRequest(base=tree, base_source=source))


def mpich_env(profile: ProfileArg, output: OutputOpt = None) -> None:
    _emit("mpich-env", profile, output, ExportRequest())


# Each command's options, by the registry's name: a new export adds its entry there and its options here.
COMMANDS: dict[str, Callable[..., None]] = {
    "nccl-tuner": nccl_tuner,
    "ompi-rules": ompi_rules,
    "ompi-rankfile": ompi_rankfile,
    "env": env,
    "nccl-plugin": nccl_plugin,
    "mpich-json": mpich_json,
    "mpich-env": mpich_env,
}
for _entry in EXPORTS:
    app.command(_entry.name, cls=CollbenchCommand, help=_entry.help)(COMMANDS[_entry.name])
