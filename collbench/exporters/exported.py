"""What every export returns: its text, the files it wrote itself, and what the terminal should say."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Exported:
    """The export's text (what ``-O`` or stdout receives), one note per rule the consumer cannot follow
    (also in the file's comments), said before the text is written, and what is said after it."""

    text: str
    notes: tuple[str, ...] = ()
    after: tuple[tuple[str, str], ...] = field(default=(), kw_only=True)
    """(label, line) said once the text is written, in order (Open MPI's "no equivalent" and "no rule
    needed" lines); an empty label says the line alone."""
    files: tuple[Path, ...] = field(default=(), kw_only=True)
    """Files the export wrote itself (the NCCL plugin's library and config): its text is then what a job
    needs, and nothing else is written."""


TEXT_COLUMNS = 80
"""The widest line an export writes where its format lets a line break (a comment): what a terminal shows
whole when the export goes to stdout, and what an editor shows of the file without scrolling."""

NCCL_LINE_CHARS = 200
"""The longest line an NCCL tuner config holds: NCCL's example plugin reads 255 characters a line, and
the rest of a longer comment would come back as a line of its own, no longer starting with ``#``."""

_COMMENT = re.compile(r"(?P<lead>\s*)#")
_TRAILING = "  # "


def comment_lines(text: str, width: int = TEXT_COLUMNS) -> list[str]:
    """``text`` as ``#`` lines of at most ``width`` characters, broken at spaces (a word longer than a
    line is cut at :data:`NCCL_LINE_CHARS`, the most NCCL's example plugin reads whole)."""
    return [line[:NCCL_LINE_CHARS] for line in _broken(f"# {text}", width, trailing=False)]


def wrap_comments(text: str, *, trailing: bool = False, width: int = TEXT_COLUMNS) -> str:
    """``text`` with every comment longer than ``width`` broken at spaces into comment lines of its own,
    continued under its ``#`` and three spaces in: a comment line (``#`` first, after any indent), and
    where ``trailing`` (formats whose ``#`` starts a comment anywhere: Open MPI's rules file, its
    rankfile) a comment after an entry (``ENTRY  # ...``), the entry kept whole on the first line.

    Other lines are kept as they are, however long: a rule's or a variable's line has no place to break.
    Exports to stdout printed comments of up to 166 columns, one line each on an 80-column terminal.
    """
    return "\n".join(wrapped for line in text.split("\n") for wrapped in _broken(line, width, trailing=trailing))


def _broken(line: str, width: int, *, trailing: bool) -> list[str]:
    if len(line) <= width:
        return [line]
    found = _COMMENT.match(line)
    if found is not None:
        hash_at = found.end() - 1
    elif trailing and _TRAILING in line:
        hash_at = line.index(_TRAILING) + len(_TRAILING) - 2
    else:
        return [line]
    rest = line[hash_at + 1 :]
    first = line[: hash_at + 1] + rest[: len(rest) - len(rest.lstrip(" "))]
    words = rest.split()
    if not words:
        return [line]
    lines: list[str] = []
    current = first + words[0]
    more = " " * hash_at + "#   "
    for word in words[1:]:
        if len(current) + 1 + len(word) > width:
            lines.append(current)
            current = more + word
        else:
            current += " " + word
    lines.append(current)
    return lines
