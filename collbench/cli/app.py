"""The root ``collbench`` command: composes one module per command and turns errors into one line.

Each command's module is imported when that command runs or shows its own help, not before:
``collbench --help`` lists the commands from :data:`COMMANDS` and :data:`GROUPS` alone, and
``collbench fit --help`` imports the fit module's chain and no other command's (the commands import
numpy, scipy, torch where they need them; tests/cli/test_help_imports.py checks which).
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import signal
import sys
from typing import Annotated, Any

import typer
from rich.text import Text

from collbench.cli.console import OutputWriteError, err_console, guard_output, print_note, stdout_name
from collbench.cli.options import CollbenchCommand, CollbenchGroup, check_command_line, leaf_command
from collbench.errors import CollbenchError
from collbench.version import collbench_version

_PATH = "collbench_command_path"
"""ctx.meta key: the command a command line names (``collbench sweep``), for errors that carry no context."""


def _one_line(exc: typer.TyperException, ctx: Any = None) -> Exception:
    """A bad option value or a usage mistake Typer found (``--ranks abc``, no such option, a missing
    argument): one ``error:`` line and exit code 2, as collbench's own errors, not Typer's box. Help
    that click raises as an error (a bare group name) is returned to be raised as it is."""
    if type(exc).__name__ == "NoArgsIsHelpError" or not hasattr(exc, "format_message"):
        return exc
    # The parser's "Option '--op' requires an argument" carries no context: it named `collbench -h`.
    code = getattr(exc, "exit_code", 2)
    # Typer's and click's usage errors come from argv alone, the same on every rank of a job.
    if _another_rank_says_it():
        return typer.Exit(code)
    named = getattr(ctx, "meta", {}).get(_PATH) if ctx is not None else None
    where = getattr(getattr(exc, "ctx", None), "command_path", None) or named or "collbench"
    message = exc.format_message()
    lists = "commands" if message.startswith("No such command") else "options"
    err_console.print(
        Text.assemble(("error: ", "red"), f"{message} (`{where} -h` lists the {lists})"),
        soft_wrap=True,
        highlight=False,
    )
    return typer.Exit(code)


def _another_rank_says_it() -> bool:
    """Whether this process is a rank other than 0 of a launcher's job (torchrun, mpirun, srun), so
    that an error every rank finds alike is left to rank 0 to print: the others end with its status
    and no line, and a job of 16,000 ranks says it once, not 16,000 times."""
    from collbench.runtime.launch.launchers import launched_rank

    rank = launched_rank()
    return rank is not None and rank != 0


def _end_before_joining() -> None:
    """Rank 0 of an srun step or a Hydra job ending on an error of its own before the job's store started
    tells the ranks waiting for it (session.end_before_joining); torch is imported only then."""
    from collbench.runtime.launch.launchers import detect_job

    try:
        job = detect_job()
    except CollbenchError:  # a launcher's variable that is no number: the job never began
        return
    if job is None or job.rank != 0 or not job.rendezvous:
        return
    from collbench.runtime.launch.session import end_before_joining

    end_before_joining()


COMMANDS: dict[str, tuple[str, str]] = {
    "discover": ("discover", "Describe this machine's GPUs, NVLink, PCIe, NUMA and NICs (or its CPU ranks)."),
    "layout": ("layout", "Ring orders and two-trees for a topology, fastest first."),
    "sweep": ("sweep", "Run and time collectives per algorithm, size and dtype; check every result."),
    "explain": ("explain", "Show an algorithm's schedule step by step, with its cost terms."),
    "fit": ("fit", "Fit alpha-beta-gamma cost models to measured results."),
    "predict": ("predict", "Predict times per algorithm at world sizes no one here has."),
    "tune": ("tune", "Run the whole pipeline and write a profile: which algorithm at which size."),
    "report": ("report", "One HTML page that opens offline: machine, charts per op, profile, provenance."),
    "compare": ("compare", "Did it get slower? Two result sets point by point, with the noise of each."),
}
"""Each command: the module of collbench.cli holding its function (of the command's name), its help line."""

GROUPS: dict[str, tuple[str, str]] = {
    "export": ("export", "Turn a profile into what jobs read: NCCL tuner, Open MPI, MPICH."),
    "import": ("importer", "Read results measured by other tools (nccl-tests logs)."),
    "profile": ("profile", "Work on profiles: merge the shapes of several into one, add predicted shapes."),
}
"""Each group of commands: the module of collbench.cli holding its ``app``, its help line."""


def _load(name: str) -> Any:
    """The click command ``name`` names, built from its module (imported now); None for no such name."""
    if name in COMMANDS:
        module, help_line = COMMANDS[name]
        one = typer.Typer(add_completion=False)
        function = getattr(importlib.import_module(f"collbench.cli.{module}"), name)
        one.command(name, cls=CollbenchCommand, help=help_line)(function)
        return typer.main.get_command(one)
    if name in GROUPS:
        module, help_line = GROUPS[name]
        group = typer.main.get_group(importlib.import_module(f"collbench.cli.{module}").app)
        group.name, group.help = name, help_line
        return group
    return None


MEASURING = frozenset({"sweep", "tune"})
"""The commands that stream the rows they measure to disk as they go, so that a stop loses none."""


class _CollbenchGroup(CollbenchGroup):
    """Turns collbench's errors, from any command below, into one red line and their exit code;
    loads each command's module when the command is first asked for."""

    listing = False
    """True while the root's own help is written: it shows the help lines, loading no command."""

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *GROUPS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands:
            if self.listing and cmd_name in {**COMMANDS, **GROUPS}:
                return typer.core.TyperCommand(cmd_name, help={**COMMANDS, **GROUPS}[cmd_name][1])
            loaded = _load(cmd_name)
            if loaded is None:
                return None
            self.commands[cmd_name] = loaded
        return self.commands[cmd_name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        # Checked before the command parses them: a flag given "true" would otherwise become a file
        # name, and a letter from another command a bare "no such option".
        if args:
            self.get_command(ctx, args[0])  # loaded, so that leaf_command finds it among self.commands
        path, command, rest = leaf_command(self, args)
        ctx.meta[_PATH] = " ".join(["collbench", *path])
        if path:
            check_command_line(path, command, rest)
        return super().resolve_command(ctx, args)

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except typer.TyperException as exc:
            raise _one_line(exc) from None

    def main(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().main(*args, **kwargs)
        except OutputWriteError as exc:
            sys.exit(_output_failed(exc))

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except typer.TyperException as exc:
            raise _one_line(exc, ctx) from None
        except CollbenchError as exc:
            if isinstance(ctx.obj, dict) and ctx.obj.get("debug"):
                raise
            # One that may differ by rank or node (a file, a device, a peer) is said by every rank.
            if exc.same_on_every_rank and _another_rank_says_it():
                raise typer.Exit(exc.exit_code) from None
            if not exc.same_on_every_rank:
                _end_before_joining()
            err_console.print(Text.assemble(("error: ", "red"), str(exc)), soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt as exc:
            # A command that knows where its rows are says so (sweep: the stream and --resume).
            detail = getattr(exc, "detail", None)
            if not detail and ctx.invoked_subcommand in MEASURING:
                detail = "what was measured so far is on disk"
            # report, fit, import...: nothing was being measured (report said it was on disk).
            # As a note: one line in a log however long (a path cut at 80 columns was two), and at a
            # terminal's width (or COLUMNS) wrapped at words, where it ran past 80 columns.
            if detail:
                print_note("interrupted", detail, err_console, style="red")
            else:
                err_console.print(Text("interrupted", "red"))
            # The shell's convention, 128 + the signal: 130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP.
            signum = getattr(exc, "signum", signal.SIGINT)
            raise typer.Exit(128 + int(signum)) from None


def _output_failed(exc: OutputWriteError) -> int:
    """Say why the output could not be written, where that can be said, and give the exit status.

    A reader that went away (``collbench report ... | head -1``, ``| true``) is no error: the command
    ends as ``ls`` and ``seq`` do, without a word, in 128 + SIGPIPE (141), the status the shell shows
    for them (Python ignores SIGPIPE, so it cannot die of it as they do). Typer's own handling ended it
    in 1 without a word, and a write to a full disk in a traceback. What was measured is in files, never
    on stdout alone."""
    where = stdout_name() if exc.stream == "stdout" else None
    _quiet_output(exc.stream)
    if exc.errno == errno.EPIPE:
        return 128 + int(signal.SIGPIPE)
    if exc.stream == "stdout":
        # `collbench export nccl-tuner P > tuner.conf` on a full disk (or > /dev/full).
        with contextlib.suppress(OutputWriteError, OSError):
            err_console.print(
                Text.assemble(
                    ("error: ", "red"),
                    f"cannot write the output to {where} (stdout)" if where else "cannot write the output (stdout)",
                    f": {exc.strerror}",
                ),
                soft_wrap=True,
            )
    return 2


def _quiet_output(failed: str) -> None:
    """Point the ``failed`` stream (and the other, where it is a pipe whose reader went too: ``2>&1 |
    head``) at /dev/null, so that the interpreter's last flush of what is still buffered does not fail a
    second time ("Exception ignored ... OSError") after the one error line."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        for name in ("stdout", "stderr"):
            fd = getattr(sys, name).fileno()
            if name == failed or _reader_gone(fd):
                os.dup2(devnull, fd)
        os.close(devnull)


def _reader_gone(fd: int) -> bool:
    """Whether ``fd`` is a pipe whose reader has closed it (poll reports POLLERR for it: pipe(7))."""
    import select

    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(event & select.POLLERR for _, event in poller.poll(0))


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
        typer.echo(f"collbench {collbench_version()}")
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


def main() -> None:
    """Console entry point."""
    guard_output()
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) == 0:
        # Rich reads COLUMNS=0 as a width of 0: Typer's help came out blank (collbench's own consoles
        # take such a width as none given, console._DataSafeConsole.size).
        del os.environ["COLUMNS"]
    app()


if __name__ == "__main__":
    main()
