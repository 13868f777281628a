"""`collbench layout` (being built)."""

from __future__ import annotations

from collbench.errors import UserError


def layout() -> None:
    raise UserError("collbench layout is not built yet")
