"""What every export returns: its text, the files it wrote itself, and what the terminal should say."""

from __future__ import annotations

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


def comment_lines(text: str, width: int = 200) -> list[str]:
    """``text`` as ``#`` lines of at most ``width`` characters, broken at spaces.

    NCCL's example tuner plugin reads 255 characters a line: the rest of a longer comment would come
    back as a line of its own, no longer starting with ``#``.
    """
    words = text.split(" ")
    lines: list[str] = []
    current = "#"
    for word in words:
        if len(current) + 1 + len(word) > width and current != "#":
            lines.append(current)
            current = "#  "
        current += " " + word
    lines.append(current)
    return [line[:width] for line in lines]
