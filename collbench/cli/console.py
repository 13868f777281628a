"""The consoles every command writes to: results on stdout, progress and errors on stderr."""

from __future__ import annotations

import os
import sys

from rich.console import Console, RenderableType

# Off a terminal (a pipe, a file, CI logs) Rich assumes 80 columns and squeezes tables until their
# cells read "GP…"; results are meant to be read and parsed there, so give them room unless the
# user said how wide (COLUMNS).
_PIPE_WIDTH = 160


def _width(stream: object) -> int | None:
    if "COLUMNS" in os.environ:
        return None
    isatty = getattr(stream, "isatty", None)
    return None if callable(isatty) and isatty() else _PIPE_WIDTH


console = Console(width=_width(sys.stdout))
err_console = Console(stderr=True, width=_width(sys.stderr))


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
