"""The stall summary a sweep or tune prints: how many points stalled, the worst few, and what the
machine did not grant that would have helped (real-time ranks, idle-CPU polling)."""

from __future__ import annotations

from collections.abc import Sequence

from collbench.backends import backend_named
from collbench.results.noise import MODE_GAP, STALL_FACTOR, STALL_MARK, STALL_MARKER, row_stalled
from collbench.results.row import ResultRow
from collbench.runtime.host import idle_latency, rank_priority

STALL_LINES = 3
"""The summary names this many of the worst stalled points (on one line)."""


def _placed(backend: str) -> bool:
    """Whether rows of ``backend`` came from CPU ranks collbench placed (pinned, at real-time priority)."""
    named = backend_named(backend)
    return named is not None and named.places_cpu_ranks


def stall_report(rows: Sequence[ResultRow], *, marked: str = f"marked {STALL_MARKER}") -> list[str]:
    """Summary lines on stalls: how many points, then the worst few (empty when none stalled).

    ``marked`` says where the stalled points are marked, empty where nothing printed marks them: by
    default the tables a sweep prints with the lines (``STALL_MARKER``); a tune prints no table of
    points, and its report rings them."""
    stalled = [r for r in rows if row_stalled(r)]
    if not stalled:
        return []
    lines = [
        f"{len(stalled)} of {len(rows)} points stalled{f' ({marked})' if marked else ''}: their times include "
        "waits for the scheduler, and decisions there are less sure"
    ]
    priority = rank_priority.unheld_hint() if any(_placed(r.backend) for r in stalled) else ""
    lines.extend(hint for hint in (priority, idle_latency.unheld_hint()) if hint)
    # A point measured in several rounds (tune) is named once, at its worst.
    by_point: dict[tuple[object, ...], ResultRow] = {}
    for r in sorted(stalled, key=lambda r: -(r.stall_fraction or 0.0)):
        by_point.setdefault((r.op, r.algo, r.size_bytes, r.in_place, r.segment_bytes, r.layout), r)
    worst = sorted(by_point.values(), key=lambda r: (-(r.stall_fraction or 0.0), r.size_bytes, r.op, r.algo))
    worst = worst[:STALL_LINES]
    # The worst few on one line each kind, each point named by its op: one line per point repeated
    # the same cause word for word.
    fractions = [r for r in worst if (r.stall_fraction or 0.0) >= STALL_MARK]
    modes = [r for r in worst if (r.stall_fraction or 0.0) < STALL_MARK]
    if fractions:
        points = ", ".join(f"{_point(r)}: {100 * (r.stall_fraction or 0.0):.0f}%" for r in fractions)
        lines.append(f"most stalled (share of iterations >{STALL_FACTOR:g}x the fastest): {points}")
    if modes:
        lines.append(f"iterations fell into two modes more than {MODE_GAP:g}x apart: {', '.join(map(_point, modes))}")
    return lines


def _point(row: ResultRow) -> str:
    from collbench.units import format_bytes

    return f"{row.op} {row.algo} at {format_bytes(row.size_bytes)} ({'in place' if row.in_place else 'out of place'})"
