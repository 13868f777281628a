"""A machine without GPUs (or without NVML): the host's CPUs, NUMA nodes and memory, and its CPU ranks.

collbench runs ranks on CPUs over gloo there, so the topology's rank devices are ``CPU0``..``CPU{n-1}``,
each with the cores it would be pinned to, joined pairwise by ``loopback`` links.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from collbench.errors import ConfigError
from collbench.topology.cpu_list import format_cpu_list, parse_cpu_list
from collbench.topology.model import (
    DEFAULT_BANDWIDTH_GBPS,
    Device,
    DeviceKind,
    Link,
    LinkKind,
    Topology,
)

# Two CPU ranks on one host exchange data through shared memory (gloo over loopback TCP here); the
# documented default, 10 GB/s per direction, is a memory-copy bound figure, not a measurement. Run
# `collbench discover --probe` to measure it.
LOOPBACK_GBPS = DEFAULT_BANDWIDTH_GBPS[LinkKind.LOOPBACK]
MIN_RANKS = 2
MAX_HOST_RANKS = 1024
"""The most CPU ranks one host's topology describes: one a hardware thread of the largest two-socket
servers (2 x 192 cores, 768 threads) fits. Every pair of them is a link, n(n-1)/2 of them: 1,024 ranks
are 523,776 links (about 7 s to build and hash), 100,000 would be 5e9 (discover --ranks 3000 ran past
60 s and 1.2 GB before this bound)."""


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What the host is made of."""

    hostname: str
    cpu_model: str | None
    cores: int
    """Logical CPUs this process may run on."""
    numa_nodes: tuple[tuple[int, tuple[int, ...]], ...]
    """(node, its CPUs), from /sys/devices/system/node; one node with every CPU when that is absent."""
    memory_bytes: int | None


def _cpu_model(cpuinfo: Path) -> str | None:
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "Processor") and value.strip():
            return value.strip()
    return None


def _memory_bytes(meminfo: Path) -> int | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _numa_nodes(node_dir: Path, cpus: tuple[int, ...]) -> tuple[tuple[int, tuple[int, ...]], ...]:
    nodes: list[tuple[int, tuple[int, ...]]] = []
    if node_dir.is_dir():
        for path in sorted(node_dir.glob("node[0-9]*")):
            try:
                node_cpus = parse_cpu_list((path / "cpulist").read_text())
                node = int(path.name[4:])
            except (OSError, ValueError):
                continue
            if node_cpus:
                nodes.append((node, node_cpus))
    return tuple(sorted(nodes)) or ((0, cpus),)


def host_facts(root: Path = Path("/")) -> HostFacts:
    """Read the host's CPU model, usable cores, NUMA nodes and memory (``root`` lets tests fake /proc and /sys)."""
    try:
        cpus = tuple(sorted(os.sched_getaffinity(0))) if root == Path("/") else ()
    except AttributeError:  # not on Linux
        cpus = ()
    nodes = _numa_nodes(root / "sys/devices/system/node", cpus)
    if not cpus:
        cpus = tuple(sorted({c for _, node_cpus in nodes for c in node_cpus})) or tuple(range(os.cpu_count() or 1))
        nodes = _numa_nodes(root / "sys/devices/system/node", cpus)
    return HostFacts(
        hostname=socket.gethostname(),
        cpu_model=_cpu_model(root / "proc/cpuinfo"),
        cores=len(cpus),
        numa_nodes=nodes,
        memory_bytes=_memory_bytes(root / "proc/meminfo"),
    )


def _rank_cpus(cpus: tuple[int, ...], ranks: int) -> list[tuple[int, ...]]:
    """Split the cores into ``ranks`` contiguous shares; with more ranks than cores, ranks share cores."""
    if ranks <= len(cpus):
        return [cpus[r * len(cpus) // ranks : (r + 1) * len(cpus) // ranks] for r in range(ranks)]
    return [(cpus[r % len(cpus)],) for r in range(ranks)]


def host_topology(ranks: int | None = None, reason: str | None = None, *, facts: HostFacts | None = None) -> Topology:
    """The host and the CPU ranks collbench would run on it (``ranks`` defaults to the core count, at least 2).

    ``reason`` says why there is no GPU; it becomes the topology's note. Raises ValueError for ``ranks < 1``,
    ConfigError for more than :data:`MAX_HOST_RANKS`.
    """
    facts = facts or host_facts()
    n = ranks if ranks is not None else max(MIN_RANKS, facts.cores)
    if n < 1:
        raise ValueError(f"ranks must be >= 1, got {n}")
    if n > MAX_HOST_RANKS:
        raise ConfigError(
            f"{n} CPU ranks on one host are more than any host runs (collbench describes at most "
            f"{MAX_HOST_RANKS:,}, one a hardware thread of the largest servers); give fewer ranks"
        )
    all_cpus = tuple(sorted({c for _, node_cpus in facts.numa_nodes for c in node_cpus}))
    node_of = {c: node for node, node_cpus in facts.numa_nodes for c in node_cpus}
    shares = _rank_cpus(all_cpus or tuple(range(max(facts.cores, 1))), n)
    # The machine's cores, not this process's: a rank bound to one core (mpirun -np 2's default
    # binding, taskset, a Slurm cgroup) runs on the same machine, and host_cores goes into the
    # machine's fingerprint (profile/document.machine_fingerprint), which profiles merge by. The NUMA
    # nodes list every CPU of the machine whatever the binding; without them, the usable ones.
    machine_cores = len(all_cpus) if all_cpus else facts.cores
    extra = [("host_cores", str(machine_cores)), ("host_numa_nodes", str(len(facts.numa_nodes)))]
    if facts.memory_bytes is not None:
        extra.append(("host_memory_bytes", str(facts.memory_bytes)))
    for node, node_cpus in facts.numa_nodes:
        extra.append((f"numa{node}_cpus", format_cpu_list(node_cpus)))
    devices = tuple(
        Device(
            id=f"CPU{r}",
            kind=DeviceKind.CPU,
            index=r,
            name=facts.cpu_model,
            numa_node=node_of.get(share[0]) if share else None,
            cpus=share,
            host=facts.hostname,
            extra=tuple(extra),
        )
        for r, share in enumerate(shares)
    )
    links = tuple(
        Link(a.id, b.id, LinkKind.LOOPBACK, count=1, bandwidth_gbps=LOOPBACK_GBPS, source="default")
        for a, b in combinations(devices, 2)
    )
    return Topology(host=facts.hostname, devices=devices, links=links, source="host", note=reason)
