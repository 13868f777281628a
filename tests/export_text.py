"""An export's text with each comment whole again: exports break a comment longer than 80 columns into
lines of their own, continued under its ``#`` and three spaces in (``exporters/exported.wrap_comments``),
so a sentence a test looks for may span lines. Joining them back is what a reader does."""

from __future__ import annotations

import re

_CONTINUED = re.compile(r"\n[ \t]*#   (?=\S)")


def unwrapped(text: str) -> str:
    """``text`` with every continued comment line joined to the line it continues, by one space."""
    return _CONTINUED.sub(" ", text)
