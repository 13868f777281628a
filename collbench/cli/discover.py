"""`collbench discover` (being built)."""

from __future__ import annotations

from collbench.errors import UserError


def discover() -> None:
    raise UserError("collbench discover is not built yet")
