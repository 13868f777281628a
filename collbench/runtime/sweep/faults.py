"""Faults a test injects into a sweep's ranks, as a real failure would happen: a rank that exits, raises,
hangs or is stopped at a chosen point, or while the sweep is being planned (before any point).

``COLLBENCH_FAULT_INJECT=rank=R,point=P,mode=M``: P is the index of the point measured (0 first, in
the plan's order of the points this run measures) or ``plan``; M is ``exit`` (the default: exit code
17), ``raise``, ``hang`` or ``stop`` (SIGSTOP), or ``slow``: every call of the point's collective on
rank R returns ``seconds=S`` late (default 0.5), as on a rank whose host is busy, the other ranks' own
clocks unaware of it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

FAULT_ENV = "COLLBENCH_FAULT_INJECT"
PLANNING = -1
"""The point index of a fault injected while the sweep is planned, before its first point."""


@dataclass(frozen=True, slots=True)
class Fault:
    rank: int
    point: int
    mode: str
    seconds: float = 0.5
    """How late each call returns, for ``slow``."""

    def strike(self, rank: int, point: int) -> None:
        """Fail as told if this is the rank and the point (PLANNING while planning)."""
        if rank != self.rank or point != self.point or self.mode == "slow":
            return
        if self.mode == "hang":
            time.sleep(3600)
        if self.mode == "stop":
            # A real SIGSTOP, as a debugger or `kill -STOP` gives: the rank neither runs nor dies.
            os.kill(os.getpid(), signal.SIGSTOP)
        if self.mode == "raise":
            raise RuntimeError("injected fault")
        os._exit(17)

    def slowed(self, rank: int, point: int, call: Callable[[], None]) -> Callable[[], None]:
        """``call``, returning ``seconds`` late when this is the rank and the point of a ``slow`` fault."""
        if self.mode != "slow" or rank != self.rank or point != self.point:
            return call

        def late() -> None:
            call()
            time.sleep(self.seconds)

        return late


def fault_from_env() -> Fault | None:
    """The fault FAULT_ENV asks for, or None (unset: every real run)."""
    text = os.environ.get(FAULT_ENV, "")
    if not text:
        return None
    fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
    point = fields.get("point", "0")
    return Fault(
        int(fields.get("rank", "0")),
        PLANNING if point == "plan" else int(point),
        fields.get("mode", "exit"),
        float(fields.get("seconds", "0.5")),
    )
