"""An export's text and what the terminal should say about it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Exported:
    """The file's text, and one line per rule the consumer cannot follow (also in the file's comments)."""

    text: str
    notes: tuple[str, ...] = ()


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
