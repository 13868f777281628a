"""Ring orders from a topology: which order of ranks carries the most data, channel by channel.

The capacity model (:class:`RingFabric`)
-----------------------------------------
A ring hop ``i -> j`` draws bandwidth from a few *resources*, each with a capacity in GB/s per
direction; a channel (one ring) runs at the smallest share it gets from any resource it uses, and
takes that bandwidth off every resource of every hop (NCCL's search works the same way, REFERENCE.md),
so later channels get what earlier ones left. The resources are:

* the **directed pair** ``i -> j``: the link's bandwidth in that direction. Dedicated cables
  (point-to-point NVLink, measured links) have only this resource, so a ring and its reverse both run
  at full speed: the two directions of a cable are independent.
* a **port** per rank and direction for shared media: an NVSwitch fabric (``nvswitch``), PCIe
  (``pix`` .. ``sys``), host memory (``loopback``) and measured links. Its capacity is the rank's best
  link of that medium. Through a switch every pair *looks* like a full-speed link, but all of a GPU's
  traffic leaves through the same NVLink ports: the port resource is what stops two channels from each
  claiming the whole fabric. A ring uses every rank's out-port and in-port exactly once, so on an
  NVSwitch machine one ring gets the GPU's full fabric bandwidth and further channels only split it.
* a **domain boundary** per PCIe level and direction, shared like the physical link it stands for:
  a PCIe switch's uplink (a ``pxb`` or ``phb`` path leaves the switch through it), a host bridge's
  link to the CPU (``node``), and the socket interconnect (``sys``). Domains at a level are the groups
  of ranks joined by PCIe paths better than that level; for the socket level, ranks on one NUMA node
  (or with the same CPU affinity) also share a domain. NVLink never joins domains: two GPUs on
  different sockets stay on different sockets when a cable joins them. A hop that leaves domain A for
  domain B at a level takes its bandwidth off "out of A" and "into B" at that level and at every level
  below it (a ``sys`` hop also climbs its switch uplinks), as NCCL's topology graph charges a path to
  every PCIe and inter-CPU link it crosses. A ring may cross the same boundary several times; each
  crossing takes its share, so all channels together never put more over the socket link, in either
  direction, than it carries.
* a **NIC** port per direction for hops between hosts, the NIC closest to the sending/receiving GPU.

At equal bandwidth the search prefers the ring whose hops are faster on the whole (lowest sum of
1/bandwidth over its hops), which penalises every slow hop: on two PCIe switch trees joined by SYS it
picks the ring that crosses SYS twice, not four times.

Exact search (:func:`best_ring`) up to :data:`EXACT_MAX_RANKS` ranks: a depth-first search over orders
that starts at rank 0 (rotations are the same ring), skips mirror images when the residual capacities
are symmetric, tries widest hops first and prunes any prefix that cannot beat the best ring found
(which starts as the heuristic's). Larger machines use a greedy widest-next-hop construction followed
by 2-opt improvement (:func:`heuristic_ring`); several hosts use the node-chain heuristic of
:mod:`collbench.layouts.multinode`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from collbench.topology.model import DEFAULT_BANDWIDTH_GBPS, Device, LinkKind, Topology

EXACT_MAX_RANKS = 10
"""Rings over at most this many ranks are searched exactly."""
MAX_CHANNELS = 32
"""NCCL's MAXCHANNELS: the most rings a layout holds."""
MIN_CHANNEL_SHARE = 0.1
"""With no channel count given, a further channel must add at least this share of the first one's
bandwidth to pay off (a thin channel still costs a kernel block and a latency)."""

_EPS = 1e-9
RingSearch = Callable[["RingFabric", list[float], float], tuple[tuple[int, ...], float]]
"""Finds one ring on residual capacities with a bandwidth cap: (order, bandwidth GB/s)."""
_PCIE_LEVELS = (LinkKind.PIX, LinkKind.PXB, LinkKind.PHB, LinkKind.NODE, LinkKind.SYS)
_PORT_MEDIUM: dict[LinkKind, str] = {
    LinkKind.NVSWITCH: "nvswitch",
    LinkKind.LOOPBACK: "host",
    LinkKind.MEASURED: "measured",
    **{k: "pcie" for k in _PCIE_LEVELS},
}
_NIC_SPEED_KEYS = (("bandwidth_gbps", 1.0), ("speed_gbps", 1.0), ("speed_mbps", 1e-3 / 8), ("speed", 1e-3 / 8))


@dataclass(frozen=True, slots=True)
class RingFabric:
    """The capacity model of the ranks of a topology (see the module docstring)."""

    n: int
    bandwidth_gbps: tuple[tuple[float, ...], ...]
    """Per-direction bandwidth of hop i -> j (0 where there is no path)."""
    kinds: tuple[tuple[LinkKind | None, ...], ...]
    """Link kind of hop i -> j (None on the diagonal)."""
    hop_resources: tuple[tuple[tuple[int, ...], ...], ...]
    """Resource ids hop i -> j draws from; resource ``i * n + j`` is the directed pair itself."""
    capacity_gbps: tuple[float, ...]
    resource_names: tuple[str, ...]
    mirror: tuple[int, ...]
    """The resource the reverse hop uses instead (pair j->i for i->j, in-port for out-port, ...)."""
    multi_use: tuple[bool, ...]
    """Whether one ring may use the resource on several hops (domain boundaries, NIC ports)."""
    hosts: tuple[str, ...]
    """The host of every rank (one value on a single machine)."""

    def hop_bandwidth(self, residual: list[float], i: int, j: int) -> float:
        """What hop i -> j could carry alone given residual capacities (GB/s)."""
        return min(residual[r] for r in self.hop_resources[i][j])


@dataclass(frozen=True, slots=True)
class Channel:
    """One ring: the order of ranks and the bandwidth it was given (GB/s per direction)."""

    order: tuple[int, ...]
    bandwidth_gbps: float


def nic_bandwidth_gbps(nic: Device) -> float:
    """A NIC's speed per direction in GB/s from its ``extra`` facts; 12.5 (100 Gbit/s) when unknown."""
    for key, scale in _NIC_SPEED_KEYS:
        value = nic.get(key)
        if value is not None:
            try:
                speed = float(value) * scale
            except ValueError:
                continue
            if speed > 0:
                return speed
    return DEFAULT_BANDWIDTH_GBPS[LinkKind.NET]


def _closest_nics(topology: Topology, ranks: tuple[Device, ...]) -> list[Device | None]:
    """For every rank device, the NIC on its host with the best link (ties spread round-robin)."""
    order = {k: i for i, k in enumerate(LinkKind)}
    out: list[Device | None] = []
    used: dict[str, int] = {}
    for dev in ranks:
        best: tuple[int, int, int] | None = None
        pick: Device | None = None
        for nic in topology.nics:
            if nic.host != dev.host:
                continue
            link = topology.link(dev.id, nic.id)
            rank = order[link.kind] if link is not None else len(order)
            key = (rank, used.get(nic.id, 0), nic.index)
            if best is None or key < best:
                best, pick = key, nic
        if pick is not None:
            used[pick.id] = used.get(pick.id, 0) + 1
        out.append(pick)
    return out


def fabric_from_topology(topology: Topology) -> RingFabric:
    """Build the capacity model over ``topology.rank_devices`` (see the module docstring).

    Ranks on different hosts with no link between them are joined through their closest NICs (the
    slower NIC's speed; 12.5 GB/s when a NIC's speed is unknown). Raises ValueError for no ranks.
    """
    ranks = topology.rank_devices
    n = len(ranks)
    if n == 0:
        raise ValueError("the topology has no GPUs and no CPU ranks to lay out")
    hosts = tuple(d.host or topology.host for d in ranks)
    bw = [[0.0] * n for _ in range(n)]
    kinds: list[list[LinkKind | None]] = [[None] * n for _ in range(n)]
    nics = _closest_nics(topology, ranks) if len(set(hosts)) > 1 else [None] * n
    nic_speed = [nic_bandwidth_gbps(nic) if nic else DEFAULT_BANDWIDTH_GBPS[LinkKind.NET] for nic in nics]
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            link = topology.link(ranks[i].id, ranks[j].id)
            if link is not None:
                bw[i][j], kinds[i][j] = link.bandwidth_gbps, link.kind
            elif hosts[i] != hosts[j]:
                speed_a = nic_speed[i]
                speed_b = nic_speed[j]
                bw[i][j], kinds[i][j] = min(speed_a, speed_b), LinkKind.NET
    names = [f"{ranks[i].id}->{ranks[j].id}" for i in range(n) for j in range(n)]
    capacity = [bw[i][j] for i in range(n) for j in range(n)]
    mirror = [j * n + i for i in range(n) for j in range(n)]
    multi = [False] * (n * n)
    extra: dict[str, int] = {}

    def resource(name: str, back: str, cap: float, multi_use: bool) -> int:
        """A resource and its other direction (what the reverse hop uses), created together."""
        if name not in extra:
            for nm in (name, back):
                extra[nm] = len(names)
                names.append(nm)
                capacity.append(cap)
                multi.append(multi_use)
                mirror.append(-1)
            mirror[extra[name]], mirror[extra[back]] = extra[back], extra[name]
        return extra[name]

    # Port capacity of a medium: the rank's best link of that medium.
    port_cap: dict[tuple[str, int], float] = {}
    for i in range(n):
        for j in range(n):
            kind = kinds[i][j]
            medium = _PORT_MEDIUM.get(kind) if kind is not None else None
            if medium is not None:
                port_cap[(medium, i)] = max(port_cap.get((medium, i), 0.0), bw[i][j], bw[j][i])
    domains = _pcie_domains(ranks, kinds)
    # A boundary's capacity: the fastest hop that crosses it (the uplink is at least that fast).
    boundary_cap: dict[tuple[LinkKind, int], float] = {}
    for i in range(n):
        for j in range(n):
            for level in _crossed_levels(domains, kinds[i][j], i, j):
                for key in ((level, domains[level][i]), (level, domains[level][j])):
                    boundary_cap[key] = max(boundary_cap.get(key, 0.0), bw[i][j], bw[j][i])
    hop_res: list[list[tuple[int, ...]]] = [[() for _ in range(n)] for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            res = [i * n + j]
            kind = kinds[i][j]
            medium = _PORT_MEDIUM.get(kind) if kind is not None else None
            if medium is not None:
                a_id, b_id = ranks[i].id, ranks[j].id
                res.append(resource(f"{medium} out of {a_id}", f"{medium} into {a_id}", port_cap[(medium, i)], False))
                res.append(resource(f"{medium} into {b_id}", f"{medium} out of {b_id}", port_cap[(medium, j)], False))
            for level in _crossed_levels(domains, kind, i, j):
                src, dst = domains[level][i], domains[level][j]
                out_name, into_name = f"{level} out of domain {src}", f"{level} into domain {dst}"
                res.append(resource(out_name, f"{level} into domain {src}", boundary_cap[(level, src)], True))
                res.append(resource(into_name, f"{level} out of domain {dst}", boundary_cap[(level, dst)], True))
            if kind == LinkKind.NET:
                a_nic, b_nic = nics[i], nics[j]
                if a_nic is not None:
                    name, back = f"out of {a_nic.host}/{a_nic.id}", f"into {a_nic.host}/{a_nic.id}"
                    res.append(resource(name, back, nic_speed[i], True))
                if b_nic is not None:
                    name, back = f"into {b_nic.host}/{b_nic.id}", f"out of {b_nic.host}/{b_nic.id}"
                    res.append(resource(name, back, nic_speed[j], True))
            hop_res[i][j] = tuple(res)
    return RingFabric(
        n=n,
        bandwidth_gbps=tuple(tuple(row) for row in bw),
        kinds=tuple(tuple(row) for row in kinds),
        hop_resources=tuple(tuple(row) for row in hop_res),
        capacity_gbps=tuple(capacity),
        resource_names=tuple(names),
        mirror=tuple(mirror),
        multi_use=tuple(multi),
        hosts=hosts,
    )


_DOMAIN_LEVELS = _PCIE_LEVELS[1:]
"""Levels whose paths leave a domain: pxb (switch uplink), phb, node (host bridge), sys (socket)."""


def _pcie_domains(ranks: tuple[Device, ...], kinds: list[list[LinkKind | None]]) -> dict[LinkKind, list[int]]:
    """Per level, the domain (a representative rank) of every rank; see the module docstring.

    A domain at ``level`` is a connected group under PCIe paths strictly better than ``level``. NVLink
    does not count (it says nothing of the PCIe tree: ``nvidia-smi`` prints ``NV#`` where a PCIe path
    also exists). At the socket level, ranks on the same NUMA node, or with the same CPU affinity when
    the node is unknown, share a domain too, unless the matrix puts a ``sys`` path between two of them.
    """
    n = len(ranks)
    order = {k: i for i, k in enumerate(LinkKind)}
    out: dict[LinkKind, list[int]] = {}
    for level in _DOMAIN_LEVELS:
        parent = list(range(n))
        for i in range(n):
            for j in range(i + 1, n):
                kind = kinds[i][j]
                if kind in _PCIE_LEVELS and order[kind] < order[level]:
                    _union(parent, i, j)
        if level == LinkKind.SYS:
            # Same NUMA node (or CPU affinity) means same socket, unless the matrix itself says a
            # path between two of them crosses the sockets: machines that report every CPU as every
            # GPU's affinity exist (one of the shared fixtures), and SYS is then the better witness.
            groups: dict[object, list[int]] = {}
            for i, dev in enumerate(ranks):
                socket: object = dev.numa_node if dev.numa_node is not None else dev.cpus
                if socket is not None:
                    groups.setdefault(socket, []).append(i)
            for members in groups.values():
                if all(kinds[a][b] != LinkKind.SYS for a in members for b in members if a != b):
                    for m in members[1:]:
                        _union(parent, m, members[0])
        out[level] = [_find(parent, i) for i in range(n)]
    return out


def _find(parent: list[int], x: int) -> int:
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def _union(parent: list[int], a: int, b: int) -> None:
    parent[_find(parent, a)] = _find(parent, b)


def _crossed_levels(domains: dict[LinkKind, list[int]], kind: LinkKind | None, i: int, j: int) -> list[LinkKind]:
    """The levels at which a hop of ``kind`` from rank i to rank j leaves one domain for another."""
    if kind not in _PCIE_LEVELS:
        return []
    top = _DOMAIN_LEVELS.index(kind) if kind in _DOMAIN_LEVELS else -1
    return [lvl for lvl in _DOMAIN_LEVELS[: top + 1] if domains[lvl][i] != domains[lvl][j]]


# -- evaluating rings ------------------------------------------------------------------------------


def ring_bandwidth(fabric: RingFabric, order: tuple[int, ...] | list[int], residual: list[float]) -> float:
    """The bandwidth a ring gets from the residual capacities: its worst share of any resource."""
    uses: dict[int, int] = {}
    n = len(order)
    for k in range(n):
        for r in fabric.hop_resources[order[k]][order[(k + 1) % n]]:
            uses[r] = uses.get(r, 0) + 1
    if n < 2:
        return 0.0
    return min(residual[r] / c for r, c in uses.items())


def take(fabric: RingFabric, order: tuple[int, ...], bandwidth_gbps: float, residual: list[float]) -> None:
    """Take a channel's bandwidth off every resource of every hop of ``order`` (in place)."""
    n = len(order)
    for k in range(n):
        for r in fabric.hop_resources[order[k]][order[(k + 1) % n]]:
            residual[r] = max(0.0, residual[r] - bandwidth_gbps)


def link_loads(fabric: RingFabric, channels: list[Channel] | tuple[Channel, ...]) -> list[float]:
    """Bandwidth the channels draw from every resource (GB/s), indexed like ``capacity_gbps``."""
    load = [0.0] * len(fabric.capacity_gbps)
    for ch in channels:
        n = len(ch.order)
        for k in range(n):
            for r in fabric.hop_resources[ch.order[k]][ch.order[(k + 1) % n]]:
                load[r] += ch.bandwidth_gbps
    return load


def _inv(bw: float) -> float:
    return 1.0 / bw if bw > 0 else 1e9


RingKey = tuple[float, float, float, float]


def ring_key(fabric: RingFabric, order: tuple[int, ...] | list[int], residual: list[float], cap: float) -> RingKey:
    """How good a ring is, larger is better: (bandwidth capped at ``cap``, bandwidth uncapped,
    -sum of 1/bandwidth over its hops, sum of what its hops have left).

    The uncapped term and the headroom matter for equal-speed packing: among rings that all reach
    the cap, take the one that uses the least loaded links, so later channels still fit.
    """
    n = len(order)
    hops = [(order[k], order[(k + 1) % n]) for k in range(n)]
    inv = sum(_inv(fabric.bandwidth_gbps[i][j]) for i, j in hops)
    room = sum(fabric.hop_bandwidth(residual, i, j) for i, j in hops)
    bw = ring_bandwidth(fabric, order, residual)
    return (min(cap, bw), bw, -inv, room)


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= _EPS * max(1.0, abs(a), abs(b))


def _better(a: RingKey, b: RingKey) -> bool:
    for x, y in zip(a, b, strict=True):
        if not _same(x, y):
            return x > y
    return False


# -- searching one ring ------------------------------------------------------------------------------


def best_ring(
    fabric: RingFabric,
    residual: list[float],
    *,
    ranks: tuple[int, ...] | None = None,
    cap_gbps: float = math.inf,
) -> tuple[tuple[int, ...], float]:
    """The best ring over ``ranks`` (default: all) on the residual capacities: (order, bandwidth GB/s).

    Exact up to :data:`EXACT_MAX_RANKS` ranks, heuristic above. ``cap_gbps`` caps the bandwidth a
    channel may take (for equal-speed packing). The order starts at the smallest rank.
    """
    members = tuple(range(fabric.n)) if ranks is None else tuple(sorted(ranks))
    if len(members) <= 2:
        return members, (min(cap_gbps, ring_bandwidth(fabric, members, residual)) if len(members) == 2 else 0.0)
    seed = heuristic_ring(fabric, residual, members, cap_gbps)
    if len(members) > EXACT_MAX_RANKS:
        return seed, ring_key(fabric, seed, residual, cap_gbps)[0]
    order = _exact_ring(fabric, residual, members, cap_gbps, seed)
    return order, ring_key(fabric, order, residual, cap_gbps)[0]


def _exact_ring(
    fabric: RingFabric, residual: list[float], members: tuple[int, ...], cap: float, seed: tuple[int, ...]
) -> tuple[int, ...]:
    n = len(members)
    hop_res = fabric.hop_resources
    multi = fabric.multi_use
    pairs = [(i, j) for i in members for j in members if i != j]
    # Single-use resources (the pair, ports: a ring leaves and enters every rank once) fold into one
    # number per hop; only domain boundaries and NIC ports can be used twice by one ring, so only
    # they are counted along the path.
    single = {(i, j): min(residual[r] for r in hop_res[i][j] if not multi[r]) for i, j in pairs}
    shared = {(i, j): tuple(r for r in hop_res[i][j] if multi[r]) for i, j in pairs}
    inv = {(i, j): _inv(fabric.bandwidth_gbps[i][j]) for i, j in pairs}
    min_inv = min(inv.values())
    max_room = max(fabric.hop_bandwidth(residual, i, j) for i, j in pairs)
    # A mirror image uses the reverse of every hop; it is the same ring when every resource has as
    # much left as its reverse (and the static bandwidths agree), so only one of the two is searched.
    used = {r for i, j in pairs for r in hop_res[i][j]}
    symmetric = all(abs(residual[r] - residual[fabric.mirror[r]]) <= _EPS for r in used) and all(
        abs(inv[(i, j)] - inv[(j, i)]) < 1e-12 for i, j in pairs
    )
    neighbours = {i: sorted((j for j in members if j != i), key=lambda j: -single[(i, j)]) for i in members}
    start = members[0]
    best_key: list[float] = list(ring_key(fabric, seed, residual, cap))
    best_order = list(seed)
    path = [start]
    visited = {start}
    counts: dict[int, int] = {}

    def worse(cb: float, ub: float) -> bool:
        """Whether a prefix with capped/uncapped bottlenecks cb/ub is already beaten."""
        if not _same(cb, best_key[0]):
            return cb < best_key[0]
        return not _same(ub, best_key[1]) and ub < best_key[1]

    def dfs(ub: float, inv_sum: float, room_sum: float) -> None:
        last = path[-1]
        if len(path) == n:
            if symmetric and path[1] > path[-1]:
                return
            b = min(ub, single[(last, start)])
            for r in shared[(last, start)]:
                b = min(b, residual[r] / (counts.get(r, 0) + 1))
            room = room_sum + fabric.hop_bandwidth(residual, last, start)
            key = (min(cap, b), b, -(inv_sum + inv[(last, start)]), room)
            if _better(key, (best_key[0], best_key[1], best_key[2], best_key[3])):
                best_key[:] = key
                best_order[:] = path
            return
        remaining = n - len(path)
        for j in neighbours[last]:
            if j in visited:
                continue
            b = min(ub, single[(last, j)])
            if min(cap, b) < best_key[0] and not _same(min(cap, b), best_key[0]):
                break  # neighbours are sorted widest first: the rest are no better
            for r in shared[(last, j)]:
                b = min(b, residual[r] / (counts.get(r, 0) + 1))
            if worse(min(cap, b), b):
                continue
            s = inv_sum + inv[(last, j)]
            tie = _same(min(cap, b), best_key[0]) and (_same(b, best_key[1]) or b <= best_key[1])
            if tie:
                bound = s + remaining * min_inv
                if bound > -best_key[2] and not _same(bound, -best_key[2]):
                    continue
                room = room_sum + fabric.hop_bandwidth(residual, last, j)
                if _same(bound, -best_key[2]) and room + remaining * max_room <= best_key[3] * (1 + _EPS):
                    continue
            else:
                room = room_sum + fabric.hop_bandwidth(residual, last, j)
            path.append(j)
            visited.add(j)
            for r in shared[(last, j)]:
                counts[r] = counts.get(r, 0) + 1
            dfs(b, s, room)
            for r in shared[(last, j)]:
                counts[r] -= 1
            visited.discard(j)
            path.pop()

    dfs(math.inf, 0.0, 0.0)
    return tuple(best_order)


def heuristic_ring(
    fabric: RingFabric, residual: list[float], members: tuple[int, ...], cap_gbps: float = math.inf
) -> tuple[int, ...]:
    """A good ring fast: widest-next-hop from a few starts, then 2-opt moves while they improve."""
    n = len(members)
    if n <= 3:
        return tuple(members)
    best: tuple[int, ...] = tuple(members)
    best_key = ring_key(fabric, best, residual, cap_gbps)
    starts = members[: min(n, 4)]
    for s in starts:
        order = [s]
        left = set(members) - {s}
        while left:
            last = order[-1]
            nxt = max(
                left,
                key=lambda j: (
                    min(cap_gbps, fabric.hop_bandwidth(residual, last, j)),
                    -_inv(fabric.bandwidth_gbps[last][j]),
                    -j,
                ),
            )
            order.append(nxt)
            left.discard(nxt)
        key = ring_key(fabric, order, residual, cap_gbps)
        if _better(key, best_key):
            best, best_key = tuple(order), key
    order = list(best)
    improved = True
    rounds = 0
    while improved and rounds < 4:
        improved, rounds = False, rounds + 1
        for a in range(1, n - 1):
            for b in range(a + 1, n):
                cand = order[:a] + order[a : b + 1][::-1] + order[b + 1 :]
                key = ring_key(fabric, cand, residual, cap_gbps)
                if _better(key, best_key):
                    order, best_key, improved = cand, key, True
    pos = order.index(min(order))
    return tuple(order[pos:] + order[:pos])


# -- several channels ------------------------------------------------------------------------------


def pack_channels(
    fabric: RingFabric,
    *,
    channels: int | None = None,
    ring_search: RingSearch | None = None,
) -> list[Channel]:
    """Rings (channels) maximising their total bandwidth, fastest first.

    Two packings are compared and the larger total wins (fewer channels at a tie, unless ``channels``
    asks for more): greedy (every channel takes the most it can from what earlier ones left) and
    equal-speed (NCCL's: as many channels as fit at a speed ``b1 / m``, b1 the best single ring's).
    ``channels=None`` stops when a channel adds less than :data:`MIN_CHANNEL_SHARE` of the first one.
    Raises ValueError for ``channels < 1``.
    """
    if channels is not None and channels < 1:
        raise ValueError(f"channels must be >= 1, got {channels}")
    search = ring_search or _flat_search
    limit = channels or MAX_CHANNELS
    greedy = _pack(fabric, search, limit, math.inf, channels is None)
    options = [greedy]
    if greedy:
        first = greedy[0].bandwidth_gbps
        for m in range(2, min(limit, 4 if channels is None else limit) + 1):
            options.append(_pack(fabric, search, limit, first / m, False))

    def score(chs: list[Channel]) -> tuple[float, int]:
        total = sum(c.bandwidth_gbps for c in chs)
        count = len(chs) if channels is not None else -len(chs)
        return (round(total, 6), count)

    best = max(options, key=score)
    return sorted(best, key=lambda c: -c.bandwidth_gbps)


def _flat_search(fabric: RingFabric, residual: list[float], cap: float) -> tuple[tuple[int, ...], float]:
    return best_ring(fabric, residual, cap_gbps=cap)


def _pack(fabric: RingFabric, search: RingSearch, limit: int, cap: float, stop_thin: bool) -> list[Channel]:
    residual = list(fabric.capacity_gbps)
    out: list[Channel] = []
    while len(out) < limit:
        order, bw = search(fabric, residual, cap)
        if bw <= _EPS:
            break
        if math.isfinite(cap) and bw < cap * (1 - 1e-6):
            break  # equal-speed packing: a slower channel does not fit
        if stop_thin and out and bw < MIN_CHANNEL_SHARE * out[0].bandwidth_gbps:
            break
        take(fabric, order, bw, residual)
        out.append(Channel(order=tuple(order), bandwidth_gbps=bw))
    return out
