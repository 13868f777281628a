"""`collbench export nccl-plugin`: build collbench's NCCL tuner plugin for a profile, or show what it picks."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from collbench.cli.console import console, err_console, print_note
from collbench.cli.render.styles import narrow_table
from collbench.errors import UserError


def run_nccl_plugin(
    profile_path: Path,
    output: Path | None,
    show_picks: bool,
    *,
    from_other_backend: bool = False,
    overwrite: bool = False,
) -> None:
    from collbench.exporters.nccl_plugin import show
    from collbench.exporters.nccl_tuner import NO_LINES
    from collbench.exporters.registry import ExportRequest, export_named
    from collbench.profile.document import Profile

    profile = Profile.load(profile_path)
    if show_picks:
        rows = show(profile, output, from_other_backend=from_other_backend, overwrite=overwrite)
        table = narrow_table(f"collbench tuner plugin, asked as NCCL asks it ({profile_path})", keep=3)
        for column in ("shape", "collective", "bytes", "profile says", "plugin picks", "channels"):
            table.add_column(column, justify="right" if column in ("bytes", "channels") else "left", no_wrap=True)
        for r in rows:
            channels = str(r.channels) if r.channels else "NCCL's"
            table.add_row(r.shape, r.op.spec.nccl_name, str(r.nbytes), r.profile_algo, r.plugin_pick, channels)
        console.print(table)
        return
    if output is not None and str(output) == "-":
        raise UserError("the plugin is a shared library and its config, written into a directory: not --output -")
    request = ExportRequest(from_other_backend=from_other_backend, directory=output, overwrite=overwrite)
    built = export_named("nccl-plugin").function(profile, request)
    for note in built.notes:
        print_note("note", note)
    plugin, config = built.files
    # A config of comments alone changes nothing (the note above says why): not "a job needs" it.
    needs = "NCCL runs as it would without them; to load them anyway:" if NO_LINES in built.notes else "a job needs:"
    err_console.print(f"built [bold]{escape(str(plugin))}[/bold] and [bold]{escape(str(config))}[/bold]; {needs}")
    typer.echo(built.text, nl=False)
