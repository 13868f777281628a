"""What the renderings share: a colour per kind of link, best (green) to worst (red), and the table
style that fits a 100-column terminal."""

from __future__ import annotations

from collections.abc import Iterable

from rich import box
from rich.table import Table

from collbench.topology.model import LinkKind

LINK_STYLES: dict[LinkKind, str] = {
    LinkKind.NVLINK: "bold green",
    LinkKind.NVSWITCH: "bold green",
    LinkKind.PIX: "cyan",
    LinkKind.PXB: "cyan",
    LinkKind.PHB: "yellow",
    LinkKind.NODE: "yellow",
    LinkKind.SYS: "red",
    LinkKind.LOOPBACK: "blue",
    LinkKind.NET: "magenta",
    LinkKind.MEASURED: "magenta",
}


TERMINAL_COLUMNS = 100
"""The width every table is made to fit without cutting a name: a common terminal, and what the
tests render at."""


def narrow_table(title: str) -> Table:
    """A table with no vertical rules and no padding at its edges: the most columns in 100 characters.

    Columns that hold names (algorithms, ops) and numbers are added with ``no_wrap=True``, so Rich
    shrinks the columns of words (parameters, reasons) to make room instead of cutting a name short.
    """
    return Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True
    )


def one_value(values: Iterable[str]) -> str | None:
    """The one value all rows share (said once in a title rather than in a column), or None."""
    distinct = set(values)
    return next(iter(distinct)) if len(distinct) == 1 else None
