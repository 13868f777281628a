"""`collbench predict` (being built)."""

from __future__ import annotations

from collbench.errors import UserError


def predict() -> None:
    raise UserError("collbench predict is not built yet")
