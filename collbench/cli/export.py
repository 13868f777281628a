"""`collbench export`: turn a profile into what jobs and libraries consume."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from collbench.cli.console import err_console
from collbench.fileio import atomic_write_text, check_writable

app = typer.Typer(no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]})

ProfileArg = Annotated[Path, typer.Argument(help="A profile YAML written by `collbench tune`.", show_default=False)]
OutputOpt = Annotated[
    Path | None, typer.Option("--output", "-o", help="Write to this file (atomically) instead of stdout.")
]


def _emit(profile_path: Path, output: Path | None, render: Callable[..., str], what: str) -> None:
    from collbench.tuning.profile import Profile

    if output is not None:
        check_writable(output)
    text = render(Profile.load(profile_path))
    if output is None:
        typer.echo(text, nl=False)
        return
    atomic_write_text(output, text)
    err_console.print(f"wrote {what} to [bold]{output}[/bold]")


@app.command("nccl-tuner")
def nccl_tuner(profile: ProfileArg, output: OutputOpt = None) -> None:
    """NCCL tuner plugin config lines (for NCCL_TUNER_CONFIG_FILE with NCCL's example tuner plugin)."""
    from collbench.tuning.exporters.nccl_tuner import export_nccl_tuner

    _emit(profile, output, export_nccl_tuner, "NCCL tuner config")


@app.command("ompi-rules")
def ompi_rules(profile: ProfileArg, output: OutputOpt = None) -> None:
    """Open MPI 4.1 coll/tuned dynamic rules (classic format), one entry per communicator size of the profile."""
    from collbench.tuning.exporters.ompi_rules import build_ompi_rules

    notes: list[str] = []

    def render(loaded: Any) -> str:
        built = build_ompi_rules(loaded)
        notes.extend(built.notes)
        return built.text

    _emit(profile, output, render, "Open MPI rules")
    for note in notes:
        err_console.print(f"[yellow]no equivalent[/yellow]: {note}", highlight=False)
    if output is not None:
        err_console.print(
            f"use: mpirun --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename {output} ...",
            highlight=False,
        )


@app.command("env")
def env(profile: ProfileArg, output: OutputOpt = None) -> None:
    """The NCCL_ALGO setting per collective, where one algorithm wins at every size (else why not)."""
    from collbench.tuning.exporters.nccl_env import export_nccl_env

    _emit(profile, output, export_nccl_env, "NCCL_ALGO setting")
