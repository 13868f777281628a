"""CPU lists as Linux writes them (``0-55,112-167``): a device's affinity, a rank's cores."""

from __future__ import annotations

from collections.abc import Iterable

# Linux builds for at most 8192 CPUs (NR_CPUS); a list naming more is a typo or a garbled paste, and
# expanding ``0-100000000`` would allocate gigabytes before anything could say so.
MAX_CPU_LIST_ENTRIES = 1 << 16


def parse_cpu_list(text: str | None) -> tuple[int, ...] | None:
    """Parse ``0-55,112-167`` into CPU numbers; empty, ``N/A`` or None give None.

    Raises ValueError for text that is not a CPU list, a range that runs backwards, or one naming more
    than :data:`MAX_CPU_LIST_ENTRIES` CPUs (checked before anything is expanded).
    """
    if text is None:
        return None
    text = text.strip()
    if not text or text.upper() == "N/A":
        return None
    spans: list[tuple[int, int]] = []
    total = 0
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo_text, sep, hi_text = part.partition("-")
        if not lo_text.strip().isdigit() or (sep and not hi_text.strip().isdigit()):
            raise ValueError(f"{part!r} is not a CPU number or range")
        lo = int(lo_text)
        hi = int(hi_text) if sep else lo
        if hi < lo:
            raise ValueError(f"{part!r} runs backwards")
        total += hi - lo + 1
        if total > MAX_CPU_LIST_ENTRIES:
            raise ValueError(f"{text!r} names more than {MAX_CPU_LIST_ENTRIES} CPUs")
        spans.append((lo, hi))
    return tuple(cpu for lo, hi in spans for cpu in range(lo, hi + 1))


def format_cpu_list(cpus: Iterable[int] | None) -> str:
    """The inverse of :func:`parse_cpu_list`: ``(0, 1, 2, 5)`` -> ``0-2,5``."""
    if cpus is None:
        return "N/A"
    values = sorted(set(cpus))
    if not values:
        return "N/A"
    ranges: list[str] = []
    start = prev = values[0]
    for v in values[1:]:
        if v == prev + 1:
            prev = v
            continue
        ranges.append(f"{start}-{prev}" if prev > start else str(start))
        start = prev = v
    ranges.append(f"{start}-{prev}" if prev > start else str(start))
    return ",".join(ranges)
