"""PCI bus ids as NCCL writes them: the one spelling every topology source (NVML, NCCL's XML,
nvidia-smi) is brought to, so that a device is found by its bus id whichever source named it."""

from __future__ import annotations


def normalize_bus_id(bus_id: str | bytes | None) -> str | None:
    """Return a PCI bus id as NCCL writes it, ``0000:07:00.0`` (lower case, 4-digit domain).

    NVML gives ``00000000:07:00.0`` (8-digit domain) as bytes; NCCL XML ``0000:07:00.0``; nvidia-smi
    sometimes ``07:00.0``. All normalise to the same string.
    """
    if bus_id is None:
        return None
    text = bus_id.decode() if isinstance(bus_id, bytes) else bus_id
    text = text.strip().strip("\x00").lower()
    if not text:
        return None
    parts = text.split(":")
    if len(parts) == 2:  # bus:device.function, no domain
        parts = ["0000", *parts]
    if len(parts) != 3:
        raise ValueError(f"not a PCI bus id: {bus_id!r}")
    domain, bus, devfn = parts
    domain = f"{int(domain, 16):04x}"
    bus = f"{int(bus, 16):02x}"
    return f"{domain}:{bus}:{devfn}"
