"""`collbench sweep` (being built)."""

from __future__ import annotations

from collbench.errors import UserError


def sweep() -> None:
    raise UserError("collbench sweep is not built yet")
