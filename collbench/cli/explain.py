"""`collbench explain` (being built)."""

from __future__ import annotations

from collbench.errors import UserError


def explain() -> None:
    raise UserError("collbench explain is not built yet")
