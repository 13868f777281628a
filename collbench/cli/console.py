"""The consoles every command writes to: results on stdout, progress and errors on stderr."""

from __future__ import annotations

import codecs
import io
import os
import sys
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleDimensions, ConsoleOptions, RenderableType
from rich.segment import Segment

from collbench.text import printable

# Off a terminal (a pipe, a file, CI logs) Rich assumes 80 columns; results are meant to be read and
# parsed there, so give them room unless the user said how wide (COLUMNS).
_PIPE_WIDTH = 160
# Below this no table of collbench's reads, and Rich cannot lay out one whose columns are all kept
# whole (no_wrap) in fewer columns than it has: sweep's table at COLUMNS=10 failed an assertion in
# Rich's ratio_distribute, a traceback after the points were measured. Narrower is drawn this wide, and
# the terminal wraps it.
_NARROWEST = 40


class _DataSafeConsole(Console):
    """A console that shows control characters escaped, whatever renderable carried them, and whose
    width is decided at each print, not once at import: COLUMNS where set (a test's CliRunner sets it
    per call), the terminal's, or _PIPE_WIDTH off a terminal.

    Hosts, notes, device names and paths come from files someone else may have written; escaping
    each where it is printed would miss one. Rich's own styling is added after this (and its cursor
    moves are control segments, left alone), so only the text is touched; line breaks are Rich's.
    """

    @property
    def is_terminal(self) -> bool:
        terminal = super().is_terminal
        decided = self._force_terminal is not None or self._environ.get("TTY_COMPATIBLE") in ("0", "1")
        if not terminal or decided or self._environ.get("FORCE_COLOR") is not None:
            return terminal
        # Open MPI's mpirun gives every rank's stdout a pty of its own that no terminal is behind (its
        # size is never set: 0 x 0) and copies it to mpirun's stdout, a file as often as not: rank 0's
        # tables reached `mpirun ... > out.txt` in colour escapes, wrapped at Rich's 80 columns.
        return not _unsized_pty(self.file)

    @property
    def size(self) -> ConsoleDimensions:
        dimensions = super().size
        if self._width is None and "COLUMNS" not in os.environ and not self.is_terminal:
            return ConsoleDimensions(_PIPE_WIDTH, dimensions.height)
        if dimensions.width < 1:
            # COLUMNS=0 is Rich's width 0: every line was drawn 0 wide, and commands printed nothing at
            # all, their error line neither. Rich takes a terminal's size of 0 as 80.
            return ConsoleDimensions(80 if self.is_terminal else _PIPE_WIDTH, dimensions.height)
        if dimensions.width < _NARROWEST:
            return ConsoleDimensions(_NARROWEST, dimensions.height)
        return dimensions

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            text = segment.text
            if segment.control or text.isprintable() or text == "\n":
                yield segment
            else:
                yield Segment(printable(text, keep="\n"), segment.style, segment.control)


def _unsized_pty(file: object) -> bool:
    """Whether ``file`` is a terminal whose window size was never set (0 x 0): a pty a program made to
    copy output from, not one a person reads."""
    fileno = getattr(file, "fileno", None)
    try:
        return fileno is not None and tuple(os.get_terminal_size(fileno())) == (0, 0)
    except (OSError, ValueError):
        return False


class OutputWriteError(Exception):
    """A write to stdout or stderr failed: a full disk behind ``> out.txt``, a reader gone from the pipe
    (``| head -1``).

    Not an OSError, so that nothing between the write and the root command takes it for the failure of
    a file it reads or writes (a read's OSError carries no file name either), and so that Typer's own
    handling of a broken pipe (exit 1, without a word) does not take it first."""

    def __init__(self, stream: str, errno: int | None, strerror: str) -> None:
        super().__init__(f"{stream}: {strerror}")
        self.stream = stream
        self.errno = errno
        self.strerror = strerror


class _GuardedStream(io.FileIO):
    """A file descriptor of the process's own output whose failed writes are OutputWriteError."""

    stream = "stdout"

    def write(self, data: Any, /) -> int:
        try:
            return super().write(data)
        except OSError as exc:
            raise OutputWriteError(self.stream, exc.errno, exc.strerror or str(exc)) from None


_ESCAPE = "collbench.escape"


def _escape(exc: UnicodeError) -> tuple[str | bytes, int]:
    """The output streams' error handler: a file name's bytes that are not UTF-8 (kept as surrogates)
    go out as they came in, and a character the encoding lacks as its escape (R\\xb2).

    Tables say R², ∞ and ·: on an ASCII or Latin-1 stdout (LANG=C on an older system,
    PYTHONIOENCODING=ascii) Python's strict and surrogateescape handlers raised UnicodeEncodeError, a
    traceback after the work was done, and a report's non-UTF-8 path did on any stdout."""
    try:
        return codecs.lookup_error("surrogateescape")(exc)
    except UnicodeError:
        return codecs.backslashreplace_errors(exc)


def guard_output() -> None:
    """Make a failed write to stdout or stderr an OutputWriteError (the root command ends on it), and a
    character the stream's encoding lacks an escape, not a UnicodeEncodeError.

    Called once by the console entry point; a stream that is no file descriptor (a test's capture) is
    left as it is."""
    codecs.register_error(_ESCAPE, _escape)
    for name in ("stdout", "stderr"):
        old = getattr(sys, name)
        try:
            fd = old.fileno()
            old.flush()
        except (AttributeError, OSError, ValueError):
            continue
        raw = _GuardedStream(fd, "wb", closefd=False)
        raw.stream = name
        setattr(
            sys,
            name,
            io.TextIOWrapper(
                io.BufferedWriter(raw),
                encoding=old.encoding,
                errors=_ESCAPE,
                line_buffering=old.line_buffering,
                write_through=getattr(old, "write_through", False),
            ),
        )


def stdout_name() -> str | None:
    """The file stdout writes to (``/dev/full``, ``out.txt``), where it is one (not a pipe); else None."""
    try:
        target = os.readlink("/proc/self/fd/1")
    except OSError:
        return None
    return target if target.startswith("/") else None


console = _DataSafeConsole()
err_console = _DataSafeConsole(stderr=True)


def whole_lines(target: Console) -> bool:
    """``soft_wrap`` for a note, legend or warning printed to ``target``: one line each in a pipe or file
    with no COLUMNS (grep and scripts read it whole), wrapped at word boundaries where the width is
    known (a terminal, or COLUMNS)."""
    return "COLUMNS" not in os.environ and not target.is_terminal


def print_note(label: str, text: str, target: Console | None = None, *, style: str = "yellow") -> None:
    """``label: text`` on ``target`` (stderr by default), the label in ``style``: one line where
    whole_lines, else wrapped at words with a number kept beside its unit (Rich's own wrapping put
    ``12.3`` at the end of a line and ``GB/s`` at the start of the next). ``text`` is data, never
    markup: a ``[`` in a note is printed as written."""
    from rich.text import Text

    from collbench.cli.render.styles import Wrapped

    out = err_console if target is None else target
    line = Text.assemble((label, style), ": ", text)
    whole = whole_lines(out)
    out.print(line if whole else Wrapped(line), soft_wrap=whole)


def print_notes(notes: list[str]) -> None:
    """What a parser assumed where its input was ambiguous: one yellow note each on stderr (whole_lines)."""
    for note in notes:
        print_note("assumed", note)
