"""The stall summary a sweep or tune prints: how many points stalled, the worst few, and what the
machine did not grant that would have helped (real-time ranks, idle-CPU polling)."""

from __future__ import annotations

from collections.abc import Sequence

from collbench.results.noise import MODE_GAP, STALL_MARK, STALL_MARKER, row_stalled, stall_summary
from collbench.results.row import ResultRow
from collbench.runtime.host import idle_latency, rank_priority

STALL_LINES = 3
"""The summary names this many of the worst stalled points."""


def stall_report(rows: Sequence[ResultRow]) -> list[str]:
    """Summary lines on stalls: how many points, then the worst few (empty when none stalled)."""
    stalled = [r for r in rows if row_stalled(r)]
    if not stalled:
        return []
    from collbench.units import format_bytes

    lines = [
        f"{len(stalled)} of {len(rows)} points stalled (marked {STALL_MARKER}): their times include waits "
        "for the scheduler, and decisions there are less sure"
    ]
    priority = rank_priority.unheld_hint() if any(r.backend == "gloo" for r in stalled) else ""
    lines.extend(hint for hint in (priority, idle_latency.unheld_hint()) if hint)
    worst = sorted(stalled, key=lambda r: (-(r.stall_fraction or 0.0), r.size_bytes, r.algo))[:STALL_LINES]
    for row in worst:
        label = f"at {format_bytes(row.size_bytes)} ({row.algo}, {'in place' if row.in_place else 'out of place'})"
        if (row.stall_fraction or 0.0) >= STALL_MARK:
            lines.append(stall_summary(label, row.stall_fraction or 0.0))
        else:
            lines.append(f"iterations {label} fell into two modes more than {MODE_GAP:g}x apart")
    return lines
