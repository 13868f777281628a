"""`collbench fit` (being built)."""

from __future__ import annotations

from collbench.errors import UserError


def fit() -> None:
    raise UserError("collbench fit is not built yet")
