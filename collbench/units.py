"""Quantities as people read them, shared by the terminal (collbench/cli) and the report.

It lives in the core because the core may not import collbench/cli; the CLI imports it from here.
"""

from __future__ import annotations

_BINARY_UNITS = (("G", 30), ("M", 20), ("K", 10))


def size_label(size_bytes: float) -> str:
    """Bytes as nccl-tests writes them: ``512B``, ``4K``, ``1.5M`` (powers of 1024, one decimal at most)."""
    for unit, shift in _BINARY_UNITS:
        if size_bytes >= (1 << shift):
            value = size_bytes / (1 << shift)
            # Within float error of a whole number is a whole number: 4K, not 4.0K.
            return f"{value:.0f}{unit}" if abs(value - round(value)) < 1e-9 else f"{value:.1f}{unit}"
    return f"{size_bytes:.0f}B"


def format_bytes(size: int) -> str:
    """``1 KiB``-style: the largest power of 1024 that divides the size exactly, else bytes."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= (1 << shift) and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"
