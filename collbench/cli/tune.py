"""`collbench tune` (being built)."""

from __future__ import annotations

from collbench.errors import UserError


def tune() -> None:
    raise UserError("collbench tune is not built yet")
