"""The root ``collbench`` command: composes one module per command and turns errors into one line."""

from __future__ import annotations

import signal
from typing import Annotated, Any

import typer
from rich.text import Text

from collbench.cli import (
    compare,
    discover,
    explain,
    export,
    fit,
    importer,
    layout,
    predict,
    profile,
    report,
    sweep,
    tune,
)
from collbench.cli.console import err_console
from collbench.cli.options import CollbenchCommand, CollbenchGroup, check_command_line, leaf_command
from collbench.errors import CollbenchError
from collbench.version import __version__


def _one_line(exc: typer.TyperException) -> Exception:
    """A bad option value or a usage mistake Typer found (``--ranks abc``, no such option, a missing
    argument): one ``error:`` line and exit code 2, as collbench's own errors, not Typer's box. Help
    that click raises as an error (a bare group name) is returned to be raised as it is."""
    if type(exc).__name__ == "NoArgsIsHelpError" or not hasattr(exc, "format_message"):
        return exc
    where = getattr(getattr(exc, "ctx", None), "command_path", None) or "collbench"
    message = exc.format_message()
    lists = "commands" if message.startswith("No such command") else "options"
    err_console.print(
        Text.assemble(("error: ", "red"), f"{message} (`{where} -h` lists the {lists})"),
        soft_wrap=True,
        highlight=False,
    )
    return typer.Exit(getattr(exc, "exit_code", 2))


class _CollbenchGroup(CollbenchGroup):
    """Turns collbench's errors, from any command below, into one red line and their exit code."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        # Checked before the command parses them: a flag given "true" would otherwise become a file
        # name, and a letter from another command a bare "no such option".
        path, command, rest = leaf_command(self, args)
        if path:
            check_command_line(path, command, rest)
        return super().resolve_command(ctx, args)

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except typer.TyperException as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except typer.TyperException as exc:
            raise _one_line(exc) from None
        except CollbenchError as exc:
            if isinstance(ctx.obj, dict) and ctx.obj.get("debug"):
                raise
            err_console.print(Text.assemble(("error: ", "red"), str(exc)), soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt as exc:
            err_console.print("[red]interrupted[/red]: what was measured so far is on disk")
            # The shell's convention, 128 + the signal: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP.
            signum = getattr(exc, "signum", signal.SIGINT)
            raise typer.Exit(128 + int(signum)) from None


app = typer.Typer(
    cls=_CollbenchGroup,
    name="collbench",
    help="Discover, measure, model and tune collective communication on this machine.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"collbench {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
) -> None:
    """Discover, measure, model and tune collective communication on this machine."""
    ctx.ensure_object(dict)["debug"] = debug


def _command(name: str, *, help: str) -> Any:
    """Register a command whose flags read as flags in --help (see CollbenchCommand)."""
    return app.command(name, cls=CollbenchCommand, help=help)


_command("discover", help="Describe this machine's GPUs, NVLink, PCIe, NUMA and NICs (or its CPU ranks).")(
    discover.discover
)
_command("layout", help="Ring orders and two-trees for a topology, fastest first.")(layout.layout)
_command("sweep", help="Run and time collectives per algorithm, size and dtype; check every result.")(sweep.sweep)
_command("explain", help="Show an algorithm's schedule step by step, with its cost terms.")(explain.explain)
_command("fit", help="Fit alpha-beta-gamma cost models to measured results.")(fit.fit)
_command("predict", help="Predict times per algorithm at world sizes no one here has.")(predict.predict)
_command("tune", help="Run the whole pipeline and write a profile: which algorithm at which size.")(tune.tune)
_command("report", help="One HTML page that opens offline: machine, charts per op, profile, provenance.")(report.report)
_command("compare", help="Did it get slower? Two result sets point by point, with the noise of each.")(compare.compare)
app.add_typer(export.app, name="export", help="Turn a profile into what jobs consume (NCCL tuner, Open MPI).")
app.add_typer(importer.app, name="import", help="Read results measured by other tools (nccl-tests logs).")
app.add_typer(
    profile.app, name="profile", help="Work on profiles: merge the shapes of several into one, add predicted shapes."
)


def main() -> None:
    """Console entry point."""
    app()


if __name__ == "__main__":
    main()
