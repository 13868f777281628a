"""The consoles every command writes to: results on stdout, progress and errors on stderr."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from collbench.text import printable

# Off a terminal (a pipe, a file, CI logs) Rich assumes 80 columns and squeezes tables until their
# cells read "GP…"; results are meant to be read and parsed there, so give them room unless the
# user said how wide (COLUMNS).
_PIPE_WIDTH = 160


def _width(stream: object) -> int | None:
    if "COLUMNS" in os.environ:
        return None
    isatty = getattr(stream, "isatty", None)
    return None if callable(isatty) and isatty() else _PIPE_WIDTH


class _DataSafeConsole(Console):
    """A console that shows control characters escaped, whatever renderable carried them.

    Hosts, notes, device names and paths come from files someone else may have written; escaping
    each where it is printed would miss one. Rich's own styling is added after this (and its cursor
    moves are control segments, left alone), so only the text is touched; line breaks are Rich's.
    """

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            text = segment.text
            if segment.control or text.isprintable() or text == "\n":
                yield segment
            else:
                yield Segment(printable(text, keep="\n"), segment.style, segment.control)


console = _DataSafeConsole(width=_width(sys.stdout))
err_console = _DataSafeConsole(stderr=True, width=_width(sys.stderr))


def print_wide(renderable: RenderableType, *, target: Console | None = None) -> None:
    """Print without squeezing: a matrix wider than the terminal keeps its cells whole.

    Rich would otherwise truncate every cell to fit 80 columns (the width it assumes off a terminal),
    and a topology matrix of 8 GPUs and 10 NICs would read ``G…``.
    """
    out = target or console
    needed = out.measure(renderable, options=out.options.update_width(10_000)).maximum
    width = out.width
    if needed <= width:
        out.print(renderable)
        return
    out.width = needed  # Console.print(width=...) cannot exceed the console's own width
    try:
        out.print(renderable)
    finally:
        out.width = width


def print_notes(notes: list[str]) -> None:
    """What a parser assumed where its input was ambiguous: one yellow line each on stderr, never wrapped."""
    from rich.markup import escape

    for note in notes:
        err_console.print(f"[yellow]assumed:[/yellow] {escape(note)}", soft_wrap=True)
