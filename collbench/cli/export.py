"""`collbench export`: turn a profile into what jobs and libraries consume."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from collbench.cli.console import err_console
from collbench.cli.options import CollbenchCommand, CollbenchGroup
from collbench.errors import UserError
from collbench.fileio import atomic_write_text, check_writable
from collbench.tuning.exporters.exported import Exported

app = typer.Typer(cls=CollbenchGroup, no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})

ProfileArg = Annotated[Path, typer.Argument(help="A profile YAML written by `collbench tune`.", show_default=False)]
OutputOpt = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-O",
        metavar="FILE",
        help="Write to this file (atomically) instead of stdout (- is stdout); never the input profile or an "
        "existing .jsonl/.csv/.parquet file.",
    ),
]
FromOtherBackendOpt = Annotated[
    bool,
    typer.Option(
        "--from-other-backend",
        help="Export a profile measured over another backend than NCCL (gloo) anyway; its lines say which "
        "of collbench's algorithms won there, not what NCCL runs best.",
    ),
]

OmpiFromOtherBackendOpt = Annotated[
    bool,
    typer.Option(
        "--from-other-backend",
        help="Export a profile measured over another backend than Open MPI (gloo, nccl) anyway; its rules say "
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


def _emit(profile_path: Path, output: Path | None, render: Callable[..., str | Exported], what: str) -> None:
    from collbench.profile.document import Profile

    if output is not None and str(output) == "-":
        output = None  # -O - is stdout, as when -O is left out
    if output is not None:
        check_writable(output)
        check_not_measured(output, profile_path)
    rendered = render(Profile.load(profile_path))
    text, notes = (rendered, ()) if isinstance(rendered, str) else (rendered.text, rendered.notes)
    for note in notes:
        # What the consumer cannot follow goes to stderr too, so a user piping stdout still sees it.
        err_console.print(f"[yellow]note:[/yellow] {escape(note)}")
    if output is None:
        typer.echo(text, nl=False)
        return
    atomic_write_text(output, text)
    err_console.print(f"wrote {what} to [bold]{output}[/bold]")


@app.command("nccl-tuner", cls=CollbenchCommand)
def nccl_tuner(profile: ProfileArg, output: OutputOpt = None, from_other_backend: FromOtherBackendOpt = False) -> None:
    """NCCL tuner plugin config lines (NCCL_TUNER_CONFIG_FILE for collbench's or NCCL's example plugin)."""
    from collbench.tuning.exporters.nccl_tuner import build_nccl_tuner

    def render(loaded: Any) -> Exported:
        return build_nccl_tuner(loaded, from_other_backend=from_other_backend)

    _emit(profile, output, render, "NCCL tuner config")


@app.command("ompi-rules", cls=CollbenchCommand)
def ompi_rules(
    profile: ProfileArg, output: OutputOpt = None, from_other_backend: OmpiFromOtherBackendOpt = False
) -> None:
    """Open MPI 4.1 coll/tuned dynamic rules (classic format), one entry per communicator size of the profile."""
    from collbench.tuning.exporters.ompi_rules import build_ompi_rules

    notes: list[str] = []
    unneeded: list[str] = []

    def render(loaded: Any) -> str:
        built = build_ompi_rules(loaded, from_other_backend=from_other_backend)
        notes.extend(built.notes)
        unneeded.extend(built.unneeded)
        return built.text

    _emit(profile, output, render, "Open MPI rules")
    for note in notes:
        err_console.print(f"[yellow]no equivalent[/yellow]: {note}", highlight=False)
    for line in unneeded:
        # The comment already opens with "no rule needed: ...".
        err_console.print(escape(line), highlight=False)
    if output is not None and str(output) != "-":
        err_console.print(
            f"use: mpirun --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename {output} ...",
            highlight=False,
        )


@app.command("ompi-rankfile", cls=CollbenchCommand)
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
    """Open MPI rankfile (mpirun --rankfile): ranks in the order of the profile's ring; the --map-by alternative."""
    from collbench.tuning.exporters.ompi_rankfile import build_ompi_rankfile

    names = None if hosts is None else [h.strip() for h in hosts.split(",")]
    if names is not None and not all(names):
        raise UserError(f"--hosts {hosts!r}: comma-separated host names, none empty")

    topo = None
    if topology is not None:
        from collbench.topology.io import load_topology

        topo = load_topology(topology)

    def render(loaded: Any) -> Exported:
        return build_ompi_rankfile(loaded, world_size=ranks, hosts=names, slots=slots, topology=topo)

    _emit(profile, output, render, "Open MPI rankfile")
    if output is not None and str(output) != "-":
        err_console.print(f"use: mpirun --rankfile {output} ...", highlight=False)


@app.command("env", cls=CollbenchCommand)
def env(profile: ProfileArg, output: OutputOpt = None, from_other_backend: FromOtherBackendOpt = False) -> None:
    """NCCL_ALGO/NCCL_PROTO per collective, where one algorithm wins at every size and shape (else why not)."""
    from collbench.tuning.exporters.nccl_env import build_nccl_env

    def render(loaded: Any) -> Exported:
        return build_nccl_env(loaded, from_other_backend=from_other_backend)

    _emit(profile, output, render, "NCCL_ALGO/NCCL_PROTO setting")


@app.command("nccl-plugin", cls=CollbenchCommand)
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
    """Build collbench's NCCL tuner plugin and config into DIR; print NCCL_TUNER_PLUGIN/NCCL_TUNER_CONFIG_FILE."""
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


@app.command("mpich-json", cls=CollbenchCommand)
def mpich_json(profile: ProfileArg, output: OutputOpt = None, base: BaseOpt = None) -> None:
    """MPICH selection file (MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE): MPICH's own, the profile's choices first."""
    from collbench.tuning.exporters.mpich_json import USE, build_mpich_json, parse_base

    if base is not None:
        try:
            text, source = base.read_text(encoding="utf-8"), str(base)
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"--base {base}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    else:
        from collbench.runtime.mpi.mpich_library import installed_selection

        text, source = installed_selection()
    tree = parse_base(text, source)

    def render(loaded: Any) -> Exported:
        return build_mpich_json(loaded, tree, source)

    _emit(profile, output, render, "MPICH selection")
    if output is not None and str(output) != "-":
        err_console.print(f"use: {USE.replace('<this file>', str(output))}", highlight=False)


@app.command("mpich-env", cls=CollbenchCommand)
def mpich_env(profile: ProfileArg, output: OutputOpt = None) -> None:
    """MPIR_CVAR_<COLL>_INTRA_ALGORITHM per collective, where one algorithm wins at every size and shape."""
    from collbench.tuning.exporters.mpich_env import build_mpich_env

    _emit(profile, output, build_mpich_env, "MPICH algorithm variables")
