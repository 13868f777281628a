"""Text that came from data (a file, a log, a profile, the wire) made safe to print.

A host name or a note in someone else's profile may hold terminal escapes (``ESC ]0;...BEL`` sets the
window title, ``ESC ]52;c;...`` the clipboard, ``ESC [2J`` clears the screen) or a carriage return
that overwrites a verdict already printed. Whatever prints such text (the terminal, an export's
comment, an error) passes it through :func:`printable` first: the control characters are shown
escaped, as ``repr`` shows them, and everything else is left as written.
"""

from __future__ import annotations

import re

# C0 controls, DEL and the C1 controls (U+009B is a one-byte CSI for terminals that read 8-bit), and
# the Unicode bidirectional overrides that make a line read differently from its bytes.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, *, keep: str = "") -> str:
    """``text`` with every control character escaped (``\\x1b``, ``\\u202e``), but those in ``keep``.

    ``keep="\\n"`` leaves line breaks for text whose lines are collbench's own (a rendered table);
    the default escapes them too, so a string from data stays on its one line.
    """
    if keep:
        return _CONTROL.sub(lambda m: m.group() if m.group() in keep else _escaped(m), text)
    return _CONTROL.sub(_escaped, text)
