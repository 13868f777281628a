"""Which ranks of a launcher's job share a node: read from the hosts the ranks report, never assumed.

Each rank reports its host as NCCL identifies one (``getHostHash`` in NCCL's ``src/misc/utils.cc``:
the host name and the kernel's boot id): the host name plus ``/proc/sys/kernel/random/boot_id``, a
random UUID the kernel makes at each boot. Two ranks are on one node when both agree: two machines
that share a host name differ in their boot ids, and containers on one machine that differ in their
host names are told apart as NCCL tells them apart.

The rows are gathered once per job, over the first process group the job forms (a fixed-width row
per rank: O(world) bytes on every rank, nothing per pair), so whatever the launcher's mapping
(``mpirun --map-by node``, uneven ranks per node, several jobs on one host, each gathering only its
own ranks) every rank knows each rank's node and its own local rank. Nothing assumes that ranks are
numbered node by node or that every node holds as many.

Test hook: ``COLLBENCH_TEST_BOOT_ID``, when set, stands for this process's boot id. Only tests and
the namespace cluster of ``benchmarks/netns.py`` set it, to make one machine look like several (each
namespace "host" its own boot); nothing a user runs should.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collbench.runtime.host.environment import host_name

BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")
TEST_BOOT_ID_ENV = "COLLBENCH_TEST_BOOT_ID"
"""Tests only: stands for the boot id, so that one machine looks like several (see the module docstring)."""
ROW_BYTES = 128
"""What each rank sends of its host: a host name has at most 64 bytes (HOST_NAME_MAX), a boot id 36."""
_HOST_BYTES = 80


@dataclass(frozen=True, slots=True)
class HostReport:
    """What a rank says of its host."""

    name: str
    boot_id: str


@dataclass(frozen=True, slots=True)
class Membership:
    """Every rank's node and local rank, from the hosts the ranks reported (rank order)."""

    node_of_rank: tuple[int, ...]
    """Node index of each rank; nodes are numbered in the order of their first rank."""
    local_rank_of: tuple[int, ...]
    """Each rank's position among the ranks of its node, in rank order."""
    node_names: tuple[str, ...]
    """Each node's name: its host name, with ``#2``, ``#3`` added where other nodes share it."""
    ranks_on_node: tuple[int, ...]
    """How many ranks each node holds."""

    @property
    def nodes(self) -> int:
        return len(self.node_names)

    def node_name(self, rank: int) -> str:
        return self.node_names[self.node_of_rank[rank]]

    def local_size(self, rank: int) -> int:
        return self.ranks_on_node[self.node_of_rank[rank]]


def boot_id(env: dict[str, str] | None = None, path: Path = BOOT_ID_PATH) -> str:
    """This machine's boot id (``COLLBENCH_TEST_BOOT_ID`` in tests); empty where the kernel has none."""
    env = dict(os.environ) if env is None else env
    if env.get(TEST_BOOT_ID_ENV):
        return env[TEST_BOOT_ID_ENV].strip()
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return ""


def this_host() -> HostReport:
    """This rank's report of its host."""
    return HostReport(host_name(), boot_id())


def encode_report(report: HostReport) -> bytes:
    """``report`` as a fixed-width row of :data:`ROW_BYTES` (name and boot id cut to their fields)."""
    name = report.name.encode("utf-8", "replace")[:_HOST_BYTES].ljust(_HOST_BYTES, b"\0")
    boot = report.boot_id.encode("utf-8", "replace")[: ROW_BYTES - _HOST_BYTES].ljust(ROW_BYTES - _HOST_BYTES, b"\0")
    return name + boot


def decode_report(row: bytes) -> HostReport:
    name, boot = row[:_HOST_BYTES], row[_HOST_BYTES:ROW_BYTES]
    return HostReport(name.rstrip(b"\0").decode("utf-8", "replace"), boot.rstrip(b"\0").decode("utf-8", "replace"))


def membership(reports: Sequence[HostReport]) -> Membership:
    """Each rank's node from every rank's report: one node per distinct (host name, boot id)."""
    index: dict[HostReport, int] = {}
    node_of: list[int] = []
    local: list[int] = []
    counts: list[int] = []
    for report in reports:
        node = index.setdefault(report, len(index))
        if node == len(counts):
            counts.append(0)
        node_of.append(node)
        local.append(counts[node])
        counts[node] += 1
    names: list[str] = []
    seen: dict[str, int] = {}
    for report in index:
        seen[report.name] = seen.get(report.name, 0) + 1
        names.append(report.name if seen[report.name] == 1 else f"{report.name}#{seen[report.name]}")
    return Membership(tuple(node_of), tuple(local), tuple(names), tuple(counts))


def gather_membership(group: Any, world_size: int, device: Any = "cpu") -> Membership:
    """Every rank's node in ``group`` (None: the default group) of ``world_size`` ranks, in its rank order:
    one all-gather of :data:`ROW_BYTES` per rank, in a tensor on ``device`` (the group's backend's: a CUDA
    device on NCCL). Every rank of the group must call it at the same point, as any collective."""
    # torch only here: the rest of the module (what a rank reports, how nodes are told apart) needs none.
    import torch
    import torch.distributed as dist

    mine = torch.tensor(list(encode_report(this_host())), dtype=torch.uint8, device=device)
    gathered = torch.empty(world_size * ROW_BYTES, dtype=torch.uint8, device=device)
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    gather(gathered, mine, group=group)
    data = gathered.cpu().numpy().tobytes()  # not tolist(): 2 MiB at 16,384 ranks would be 2 million ints
    return membership([decode_report(data[r * ROW_BYTES : (r + 1) * ROW_BYTES]) for r in range(world_size)])


class GroupMemberships:
    """Each process group's membership, gathered on its first ask and kept while the group lives.

    Keyed weakly by the group object: a destroyed group's entry goes with it, and a group made again
    (a new object) is gathered again. One lock, so that two threads asking of one group at once (the
    DDP hook in backward, the user's calls) make one gather, not two collectives in parallel. ``gather``
    is :func:`gather_membership` but in tests, which give the reports of nodes this machine is not.
    """

    def __init__(self, gather: Callable[[Any, int, Any], Membership] = gather_membership) -> None:
        self._gather = gather
        self._found: weakref.WeakKeyDictionary[Any, Membership] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def known(self, group: Any) -> bool:
        return group in self._found

    def of(self, group: Any, world_size: int, device: Any = "cpu") -> Membership:
        """``group``'s membership (a group object, not None), gathered (:func:`gather_membership`) on
        the first ask only."""
        with self._lock:
            found = self._found.get(group)
            if found is None:
                found = self._found[group] = self._gather(group, world_size, device)
            return found


GROUPS = GroupMemberships()
"""The process's memberships per process group: module state on purpose, as the plan cache's
(``executor/plan_cache.py``): a group's nodes are the process's fact while the group lives, not one
call's or one hook's, and gathering them again per call would add a collective to every call."""
