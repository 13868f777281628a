"""What the renderings share: a colour per kind of link, best (green) to worst (red), and the table
that fits an 80-column terminal without cutting a value."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.constrain import Constrain
from rich.table import Column, Table
from rich.text import Text

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


TERMINAL_COLUMNS = 80
"""The width every table is made to fit without cutting a value: the smallest common terminal, and
what tests/cli/test_80_columns.py renders every command at."""

_ELLIPSIS = "…"


class SplitTable(Table):
    """A table that never cuts a value to fit: wider than the console, it prints as several tables,
    each with the first ``keep`` columns (the row's names) and as many of the others as fit.

    Rich would otherwise shrink no-wrap columns until their cells read ``97.5…``. Columns of words
    (reasons, parameters) still wrap at word boundaries first; a table is split only where fitting it
    would put an ellipsis into a cell (counted against the table at its natural width, since a few
    cells hold one on purpose: explain's ``a0+…+d0``).
    """

    def __init__(self, *args: object, keep: int = 1, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.keep = keep

    def _part(self, columns: Sequence[Column], *, first: bool, last: bool) -> Table:
        part = Table(
            title=self.title if first else None,
            caption=self.caption if last else None,
            title_justify=self.title_justify,
            title_style=self.title_style,
            box=self.box,
            pad_edge=self.pad_edge,
            show_edge=self.show_edge,
            collapse_padding=self.collapse_padding,
            header_style=self.header_style,
            show_header=self.show_header,
            show_lines=self.show_lines,
            padding=self.padding,
        )
        for c in columns:
            part.add_column(
                c.header,
                justify=c.justify,
                no_wrap=c.no_wrap,
                style=c.style,
                header_style=c.header_style,
                overflow=c.overflow,
                vertical=c.vertical,
                min_width=c.min_width,
                max_width=c.max_width,
                width=c.width,
            )
        cells = [list(c.cells) for c in columns]
        for i, row in enumerate(self.rows):
            part.add_row(*(col[i] for col in cells), style=row.style, end_section=row.end_section)
        return part

    @staticmethod
    def _ellipses(console: Console, options: ConsoleOptions, table: Table, width: int) -> int:
        lines = console.render_lines(table, options.update(width=width, height=None), pad=False)
        return sum(seg.text.count(_ELLIPSIS) for line in lines for seg in line)

    def _fits(self, console: Console, options: ConsoleOptions, columns: Sequence[Column]) -> bool:
        part = self._part(columns, first=True, last=True)
        natural = console.measure(part, options=options.update_width(10_000)).maximum
        if natural <= options.max_width:
            return True
        return self._ellipses(console, options, part, options.max_width) <= self._ellipses(
            console, options, part, natural
        )

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        keep, rest = self.columns[: self.keep], self.columns[self.keep :]
        if not rest or self._fits(console, options, self.columns):
            groups = [list(rest)]
        else:
            groups = [[]]
            for column in rest:
                if groups[-1] and not self._fits(console, options, [*keep, *groups[-1], column]):
                    groups.append([])
                groups[-1].append(column)
        for i, group in enumerate(groups):
            if i:
                yield Text("")
            part = self._part([*keep, *group], first=i == 0, last=i == len(groups) - 1)
            if i == 0:
                yield from self._title_above(console, options, part)
            yield part

    def _title_above(self, console: Console, options: ConsoleOptions, part: Table) -> RenderResult:
        """A title wider than its table, said above it at the console's width (``part`` then has none):
        Rich wraps a title at its table's width, so a table of four narrow columns had its title in
        pieces of 23 characters over two or three lines."""
        if not isinstance(part.title, str):
            return
        title = part.title
        part.title = None
        width = min(console.measure(part, options=options).maximum, options.max_width)
        if cell_len(title) <= width:
            part.title = title
            return
        yield Wrapped(Text(title, style=self.title_style or "table.title"))


def narrow_table(title: str, *, keep: int = 1) -> SplitTable:
    """A table with no vertical rules and no padding at its edges: the most columns in 80 characters.

    Columns that hold names (algorithms, ops) and numbers are added with ``no_wrap=True``, so Rich
    shrinks the columns of words (parameters, reasons) to make room; where that is not enough the
    table prints in parts, each repeating its first ``keep`` columns (SplitTable), never cut short.
    """
    return SplitTable(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        show_edge=False,
        collapse_padding=True,
        keep=keep,
    )


def one_value(values: Iterable[str]) -> str | None:
    """The one value all rows share (said once in a title rather than in a column), or None."""
    distinct = set(values)
    return next(iter(distinct)) if len(distinct) == 1 else None


# A number and its unit ("1.75 MiB", "253.5 us") are one value: a line is never broken between them.
_VALUE = re.compile(
    r"\S+(?: (?:B|KiB|MiB|GiB|TiB|ns|us|ms|s|GB/s|GiB/s|MB/s|Gb/s|ranks?|nodes?|steps?|points?|rows?|GPUs?)"
    r"(?=[\s,;.:)]|$)\S*)?"
)


class Wrapped:
    """Text wrapped at word boundaries to the console's width, a number never parted from its unit, a
    continued line indented two past its first (Rich would break ``1.75 MiB`` after the number)."""

    def __init__(self, text: Text, *, tokens: re.Pattern[str] = _VALUE) -> None:
        self.text = text
        self.tokens = tokens

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        for line in self.text.split("\n", allow_blank=True):
            plain = line.plain
            indent = len(plain) - len(plain.lstrip(" ")) + 2
            offsets: list[int] = []
            start = 0
            for match in self.tokens.finditer(plain):
                room = width - (indent if offsets else 0)
                if match.start() > start and match.end() - start > room:
                    offsets.append(match.start())
                    start = match.start()
            for i, part in enumerate(line.divide(offsets)):
                part.rstrip()
                if i:
                    part = Text(" " * indent) + part
                # A word wider than the line (a log's path) is folded onto lines of its own: with
                # no_wrap Rich crops to the width, and the path's end was lost.
                room = width - indent
                folds = _folds(part.plain, width, room) if room > 0 and cell_len(part.plain) > width else []
                for j, piece in enumerate(part.divide(folds)):
                    if j:
                        piece = Text(" " * indent) + piece
                    piece.no_wrap = True
                    piece.overflow = "fold"
                    yield piece


def _folds(plain: str, width: int, room: int) -> list[int]:
    """Where a line holding one word wider than ``width`` is cut (later pieces get ``room``): after the
    last ``/`` that fits, so a path reads folder by folder, else at the margin. Cut at the margin alone,
    a path of 78 characters and its colon left '  :' on a line of its own."""
    folds: list[int] = []
    start, limit = 0, width
    word = len(plain) - len(plain.lstrip(" "))  # past the indent: a piece is never the indent and '/'
    while len(plain) - start > limit:
        cut = start + limit
        slash = plain.rfind("/", max(start, word) + 1, cut)
        cut = slash + 1 if slash >= 0 else cut
        folds.append(cut)
        start, limit = cut, room
    return folds


def paragraph(text: Text) -> RenderableType:
    """``text`` under a table: wrapped at words to ``TERMINAL_COLUMNS`` (or the console, if narrower)
    with each number kept beside its unit, in a pipe too, where the console is wider (the table's
    notes read as its own lines, not as log lines for grep)."""
    return Constrain(Wrapped(text), TERMINAL_COLUMNS)


def unused_fits(reasons: Iterable[tuple[str, str]]) -> list[RenderableType]:
    """Under a table of fits, one paragraph per fit its ``use`` column marks ``no``: ``<name> not used:
    <why>``. In the table's last column a reason (a sentence or two) made every row as wide as the
    longest: 160 columns in a pipe. ``why`` is data, never markup."""
    return [paragraph(Text.assemble((name, "bold"), (" not used: ", "red"), why)) for name, why in reasons]


ALPHA_AT_ZERO = "0*"
"""An alpha the fit left at its bound: shown so, with :func:`alpha_at_zero_note` under the table."""


def alpha_at_zero_note(alphas_us: Iterable[float]) -> list[RenderableType]:
    """Under a table of fits, what ``0*`` in its alpha column means, where one is: non-negative least
    squares stopped alpha at 0, so the latency is below what the measured sizes resolve; "0.0 us" read
    as a latency measured to be nothing (a cluster's tune at 512 KiB-16 MiB fits six of eight so)."""
    if not any(a == 0 for a in alphas_us):
        return []
    return [
        paragraph(
            Text(
                "0* alpha fitted as 0: the latency is below what the measured sizes resolve (the fit keeps "
                "alpha at 0 or above); measure smaller sizes to fit it",
                style="dim",
            )
        )
    ]


BETA_AT_ZERO = "∞*"
"""A bandwidth of a beta the fit left at 0: shown so, with :func:`beta_at_zero_note` under the table."""


def beta_at_zero_note(bandwidths_gbps: Iterable[float | None]) -> list[RenderableType]:
    """Under a table of fits, what ``∞*`` in its bandwidth column means, where one is: the fit (or the
    segment of it over the largest sizes) kept beta at 0, so no per-byte cost of its own is resolved
    there (gamma, fitted across an op's algorithms, may carry one). It printed ``-``, with no word,
    beside fits marked usable (a quick tune at 1-64 KiB on 3 ranks: three of eight)."""
    if not any(b is None for b in bandwidths_gbps):
        return []
    return [
        paragraph(
            Text(
                "∞* beta fitted as 0 (a fit's beta is that of its largest sizes): no per-byte cost of its own "
                "is resolved there (where gamma is fitted, the cost per byte is gamma's alone); measure larger "
                "sizes to fit it",
                style="dim",
            )
        )
    ]


def r2_text(r2: float) -> str:
    """R^2 in three decimals, ``-`` where there is none; a fit whose R^2 rounds to zero from below
    prints ``0.000``, not ``-0.000`` (the sign of a value printed as zero says nothing)."""
    if math.isnan(r2):
        return "-"
    text = f"{r2:.3f}"
    return "0.000" if text == "-0.000" else text
