"""Keep idle CPUs polling instead of sleeping while collbench measures (Linux CPU latency QoS).

Why. A collective's ranks wait on each other many times per call. A core with nothing to run goes
idle, and waking it is not free: on a VM an idle vCPU halts, and its wake-up waits for the host to
run it again, which on the 2-core development VM took up to a host scheduler tick (~4 ms) on a call
of 100-300 us. Measured there with nothing else running (2 gloo ranks; ring, tree and native
all-reduce, 512 B-2 MiB; two sweeps each way): with idle CPUs sleeping, 30 of 42 points stalled (23%
of iterations >3x the fastest, on average) and four ring points' first quartile sat on a ~4 ms stall;
with them polling, 22 and 28 of 42 (8-11%) and none, ring at 165-195 us from 512 B to 128 KiB. A
training job's cores are busy, so its collectives do not pay that wake-up either: the time without it
is the one to tune for.

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

LATENCY_QOS = Path("/dev/cpu_dma_latency")
ENV = "COLLBENCH_IDLE_POLL"


def _switched_off() -> bool:
    """Whether ``COLLBENCH_IDLE_POLL`` asks collbench to leave idle CPUs as they are."""
    return os.environ.get(ENV, "1").strip() in ("0", "no", "off", "false")


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
            f"idle CPUs may sleep during the run ({device}: {exc.strerror or exc}); on a VM a sleeping "
            f"core's wake-up can add milliseconds to a call (stalls); root can avoid that ({ENV}=0 hides this line)"
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
        f"idle CPUs could sleep during the run (no write permission on {device}): on a VM a sleeping "
        "core's wake-up adds milliseconds to a call; run as root, and collbench keeps them polling"
    )
