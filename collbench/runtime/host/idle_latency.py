"""Keep idle CPUs polling instead of sleeping while collbench measures (Linux CPU latency QoS).

Why. A collective's ranks wait on each other many times per call, and each wait ends with a wake-up.
On a VM an idle vCPU halts (the development VM's idle driver is haltpoll with guest_halt_poll_ns=0),
and waking it costs tens of microseconds: two processes ping-ponging a socket there took a p25 of
42-43 us per round trip with idle CPUs sleeping, 11-21 us with them polling (5,000 round trips, two
runs each). In gloo sweeps on that VM (2 ranks, 512 B-2 MiB, two sweeps each way), polling took the
mean fraction of stalled iterations (>3x the fastest) from 23% to 8-11% under the normal scheduler
(ring, tree and native), and from 0.9-1.0% to 0.3-0.6% with the ranks at real-time priority
(``rank_priority.py``; ring, tree, native and rabenseifner), which removes most of the rest. A
training job's cores are busy, so its collectives do not pay those wake-ups either: the time without
them is the one to tune for.

How. Linux's CPU latency QoS: a process that writes a 32-bit 0 to ``/dev/cpu_dma_latency`` asks
every CPU's idle governor for states with no exit latency (polling) for as long as it keeps the file
open; the request ends when the file is closed or the process ends, however it ends (the kernel's
admin guide, pm/cpuidle.rst, "Power Management Quality of Service for CPUs"). It costs power while it
is held, which is only while collbench measures. The file is writable by root by default; where it
is not, nothing changes, and a run that stalled says so in its stall summary (:func:`unheld_hint`).
``COLLBENCH_IDLE_POLL=0`` turns it off.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterator
from pathlib import Path

from collbench.runtime.host.switches import env_switch

LATENCY_QOS = Path("/dev/cpu_dma_latency")
ENV = "COLLBENCH_IDLE_POLL"


def _switched_off() -> bool:
    """Whether ``COLLBENCH_IDLE_POLL`` asks collbench to leave idle CPUs as they are."""
    return env_switch(ENV) is False


@contextlib.contextmanager
def idle_cpus_poll(device: Path = LATENCY_QOS) -> Iterator[str]:
    """Hold a zero CPU-latency request for the block; yields one line saying what was done ('' when off)."""
    if _switched_off():
        yield ""
        return
    try:
        fd = os.open(device, os.O_WRONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        yield ""  # Not Linux, or no latency QoS: nothing to do, nothing worth saying.
        return
    except OSError as exc:
        yield (
            f"idle CPUs may sleep during the run ({device}: {exc.strerror or exc}); on a VM waking a sleeping "
            f"core adds tens of microseconds to each wait; root can avoid that ({ENV}=0 hides this line)"
        )
        return
    try:
        os.write(fd, struct.pack("=i", 0))
        yield f"idle CPUs poll instead of sleeping while this runs ({device} = 0; {ENV}=0 turns it off)"
    finally:
        os.close(fd)


def unheld_hint(device: Path = LATENCY_QOS) -> str:
    """One line for a stall summary where idle CPUs could not be kept polling ('' where they could, or
    where the request is switched off or does not exist)."""
    if _switched_off() or not device.exists():
        return ""
    if os.access(device, os.W_OK):
        return ""
    return (
        f"idle CPUs could sleep during the run (no write permission on {device}): on a VM waking a sleeping "
        "core adds tens of microseconds to each wait; run as root, and collbench keeps them polling"
    )
