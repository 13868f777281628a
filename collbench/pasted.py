"""Text a user copied from a terminal, a wiki or an issue tracker, made plain before any parser reads it.

Copies pick up a UTF-8 byte-order mark, CRLF line ends, ANSI colour and cursor codes (a ``script``
capture, ``less -R``) and no-break spaces where a web page kept the alignment. None of them carries
meaning for collbench's parsers; all of them break naive splitting.
"""

from __future__ import annotations

import re

# CSI sequences (colours, cursor moves) and OSC strings (window titles), as terminals emit them.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def clean_pasted_text(text: str) -> str:
    """``text`` without a BOM, CR line ends, ANSI codes and no-break spaces.

    Line numbers stay those of the input: a CRLF pair is one line end, as ``str.splitlines`` counts it.
    """
    text = text.removeprefix("\ufeff")
    text = _ANSI.sub("", text)
    return text.replace("\r\n", "\n").replace("\u00a0", " ")


__all__ = ["clean_pasted_text"]
