"""The executor's default pipeline segment, apart from the executor so that reading it imports no torch
(``collbench sweep --help`` prints it)."""

from __future__ import annotations

DEFAULT_SEGMENT_BYTES: dict[str, int] = {"cpu": 4 << 20, "cuda": 4 << 20}
"""Segment size per device type: big enough that per-message costs amortise, small enough to overlap.

On CPUs every segment costs a blocking wait, and on a busy machine a wait can cost a scheduler time
slice (4 ms measured on the 2-core development machine), so CPU segments are large."""
