"""The capacity model ring layouts are searched on (:class:`RingFabric`), built from a topology.

A ring hop ``i -> j`` draws bandwidth from a few *resources*, each with a capacity in GB/s per
direction; a channel (one ring) runs at the smallest share it gets from any resource it uses, and
takes that bandwidth off every resource of every hop (NCCL's search works the same way: followPath in
NVIDIA/nccl src/graph/search.cc), so later channels get what earlier ones left. The resources are:

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
  direction, than it carries. Where the input names no NUMA node and neither the CPU affinities nor
  the paths tell the sockets apart (more than two socket domains on a host), its ``sys`` hops share
  one socket link instead (:func:`_unnamed_socket_hops`).
* a **NIC** port per direction for hops between hosts, the NIC closest to the sending/receiving GPU.

The model is built with array operations over the n x n hops (one pass over the links, none over
pairs in Python), so a fabric of 1,024 ranks takes well under a second; the per-hop resource lists are
made on demand, row by row, for the searches that walk them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np

from collbench.errors import ConfigError
from collbench.topology.model import DEFAULT_BANDWIDTH_GBPS, Device, LinkKind, Topology

MAX_LAYOUT_RANKS = 2048
"""The most ranks a layout is computed for: the model holds n x n hops (about 1 GB at 4,096)."""

_KINDS: tuple[LinkKind, ...] = tuple(LinkKind)
_CODE = {k: i for i, k in enumerate(_KINDS)}
_PCIE_LEVELS = (LinkKind.PIX, LinkKind.PXB, LinkKind.PHB, LinkKind.NODE, LinkKind.SYS)
_DOMAIN_LEVELS = _PCIE_LEVELS[1:]
"""Levels whose paths leave a domain: pxb (switch uplink), phb, node (host bridge), sys (socket)."""
_MEDIA = ("nvswitch", "pcie", "host", "measured")
_PORT_MEDIUM: dict[LinkKind, str] = {
    LinkKind.NVSWITCH: "nvswitch",
    LinkKind.LOOPBACK: "host",
    LinkKind.MEASURED: "measured",
    **{k: "pcie" for k in _PCIE_LEVELS},
}
_NIC_SPEED_KEYS = (("bandwidth_gbps", 1.0), ("speed_gbps", 1.0), ("speed_mbps", 1e-3 / 8), ("speed", 1e-3 / 8))
_NONE = -1
"""Kind code of no path (and of the diagonal)."""


class HopResources(Sequence[tuple[tuple[int, ...], ...]]):
    """``hop_resources[i][j]``: the resource ids hop i -> j draws from, made row by row on demand.

    Backed by an ``(n, n, slots)`` integer array padded with -1; a row becomes a tuple of tuples the
    first time it is read, so small searches that walk every hop many times pay for the conversion once.
    """

    def __init__(self, table: np.ndarray) -> None:
        self.table = table
        self._rows: dict[int, tuple[tuple[int, ...], ...]] = {}
        self._cells: dict[int, tuple[int, ...]] = {}
        self._n = int(table.shape[0])

    def __len__(self) -> int:
        return int(self.table.shape[0])

    @overload
    def __getitem__(self, i: int) -> tuple[tuple[int, ...], ...]: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[tuple[tuple[int, ...], ...]]: ...
    def __getitem__(self, i: int | slice) -> tuple[tuple[int, ...], ...] | Sequence[tuple[tuple[int, ...], ...]]:
        if isinstance(i, slice):
            return [self[k] for k in range(len(self))[i]]
        row = self._rows.get(i)
        if row is None:
            if not -len(self) <= i < len(self):
                raise IndexError(i)
            row = tuple(tuple(r for r in cell if r >= 0) for cell in self.table[i].tolist())
            self._rows[i] = row
        return row

    def hop(self, i: int, j: int) -> tuple[int, ...]:
        """``self[i][j]`` without making row i: large rings touch every row but few cells of each."""
        key = i * self._n + j
        cell = self._cells.get(key)
        if cell is None:
            row = self._rows.get(i)
            cell = row[j] if row is not None else tuple(r for r in self.table[i, j].tolist() if r >= 0)
            self._cells[key] = cell
        return cell


class ResourceNames(Sequence[str]):
    """Names of the resources: ``GPU0->GPU1`` for the pairs (made on demand), then the shared ones."""

    def __init__(self, rank_ids: tuple[str, ...], shared: tuple[str, ...]) -> None:
        self._ids = rank_ids
        self._shared = shared
        self._pairs = len(rank_ids) ** 2

    def __len__(self) -> int:
        return self._pairs + len(self._shared)

    @overload
    def __getitem__(self, r: int) -> str: ...
    @overload
    def __getitem__(self, r: slice) -> Sequence[str]: ...
    def __getitem__(self, r: int | slice) -> str | Sequence[str]:
        if isinstance(r, slice):
            return [self[k] for k in range(len(self))[r]]
        if r < 0:
            r += len(self)
        if not 0 <= r < len(self):
            raise IndexError(r)
        if r >= self._pairs:
            return self._shared[r - self._pairs]
        n = len(self._ids)
        return f"{self._ids[r // n]}->{self._ids[r % n]}"

    def __iter__(self) -> Iterator[str]:
        return (self[r] for r in range(len(self)))


@dataclass(frozen=True, slots=True)
class RingFabric:
    """The capacity model of the ranks of a topology (see the module docstring)."""

    n: int
    bandwidth_gbps: tuple[tuple[float, ...], ...]
    """Per-direction bandwidth of hop i -> j (0 where there is no path)."""
    kinds: tuple[tuple[LinkKind | None, ...], ...]
    """Link kind of hop i -> j (None on the diagonal)."""
    hop_resources: Sequence[tuple[tuple[int, ...], ...]]
    """Resource ids hop i -> j draws from; resource ``i * n + j`` is the directed pair itself."""
    capacity_gbps: tuple[float, ...]
    resource_names: Sequence[str]
    mirror: tuple[int, ...]
    """The resource the reverse hop uses instead (pair j->i for i->j, in-port for out-port, ...)."""
    multi_use: tuple[bool, ...]
    """Whether one ring may use the resource on several hops (domain boundaries, NIC ports)."""
    hosts: tuple[str, ...]
    """The host of every rank (one value on a single machine)."""
    hop_table: np.ndarray = field(compare=False, repr=False)
    """``hop_resources`` as an ``(n, n, slots)`` array padded with -1, for array-based searches."""
    bandwidth_table: np.ndarray = field(compare=False, repr=False)
    """``bandwidth_gbps`` as an ``(n, n)`` array."""
    nic_out: tuple[int, ...] = ()
    """Per rank, the resource of the NIC it leaves its host through (-1: none, or a single host)."""
    nic_in: tuple[int, ...] = ()
    """Per rank, the resource of the NIC it enters its host through (-1: none, or a single host)."""

    def hop(self, i: int, j: int) -> tuple[int, ...]:
        """The resource ids of hop i -> j (``hop_resources[i][j]``, cheaper on large fabrics)."""
        table = self.hop_resources
        return table.hop(i, j) if isinstance(table, HopResources) else table[i][j]

    def hop_bandwidth(self, residual: list[float], i: int, j: int) -> float:
        """What hop i -> j could carry alone given residual capacities (GB/s)."""
        return min(residual[r] for r in self.hop(i, j))

    def hop_bandwidth_matrix(self, residual: list[float]) -> np.ndarray:
        """Every hop's :meth:`hop_bandwidth` at once, as an ``(n, n)`` array (0 on the diagonal)."""
        table = self.hop_table
        # Index -1 (padding) reads the appended +inf, so padding never binds.
        values = np.append(np.asarray(residual, dtype=float), np.inf)
        out = values[table].min(axis=2)
        np.fill_diagonal(out, 0.0)
        return out


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
    nics_of: dict[str | None, list[Device]] = {}
    for nic in topology.nics:
        nics_of.setdefault(nic.host, []).append(nic)
    out: list[Device | None] = []
    used: dict[str, int] = {}
    for dev in ranks:
        best: tuple[int, int, int] | None = None
        pick: Device | None = None
        for nic in nics_of.get(dev.host, ()):
            link = topology.link(dev.id, nic.id)
            rank = _CODE[link.kind] if link is not None else len(_KINDS)
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
    slower NIC's speed; 12.5 GB/s when a NIC's speed is unknown). Raises ValueError for no ranks and
    ConfigError past :data:`MAX_LAYOUT_RANKS` ranks.
    """
    ranks = topology.rank_devices
    n = len(ranks)
    if n == 0:
        raise ValueError("the topology has no GPUs and no CPU ranks to lay out")
    if n > MAX_LAYOUT_RANKS:
        raise ConfigError(
            f"the topology has {n} ranks; layouts are computed for at most {MAX_LAYOUT_RANKS} "
            "(use `collbench predict` for larger world sizes)"
        )
    hosts = tuple(d.host or topology.host for d in ranks)
    position = {d.id: k for k, d in enumerate(ranks)}
    bw = np.zeros((n, n))
    code = np.full((n, n), _NONE, dtype=np.int64)
    for link in topology.links:
        a, b = position.get(link.a), position.get(link.b)
        if a is not None and b is not None:
            bw[a, b] = bw[b, a] = link.bandwidth_gbps
            code[a, b] = code[b, a] = _CODE[link.kind]
    host_names, host_index = np.unique(np.asarray(hosts), return_inverse=True)
    multihost = bool(host_index.max() > 0)
    if topology.node_links:
        _fill_node_links(topology, [str(h) for h in host_names], host_index, bw, code)
    nics = _closest_nics(topology, ranks) if multihost else [None] * n
    nic_speed = np.asarray([nic_bandwidth_gbps(x) if x else DEFAULT_BANDWIDTH_GBPS[LinkKind.NET] for x in nics])
    if multihost:
        net = (code == _NONE) & (host_index[:, None] != host_index[None, :])
        bw[net] = np.minimum.outer(nic_speed, nic_speed)[net]
        code[net] = _CODE[LinkKind.NET]
    np.fill_diagonal(code, _NONE)
    np.fill_diagonal(bw, 0.0)
    both = np.maximum(bw, bw.T)

    shared_names: list[str] = []
    shared_cap: list[float] = []
    shared_multi: list[bool] = []
    shared_mirror: list[int] = []
    first_shared = n * n

    def pair_of_resources(out_name: str, into_name: str, cap: float, multi: bool) -> tuple[int, int]:
        """Two resources that mirror each other (what the reverse hop uses): their ids."""
        k = first_shared + len(shared_names)
        shared_names.extend((out_name, into_name))
        shared_cap.extend((cap, cap))
        shared_multi.extend((multi, multi))
        shared_mirror.extend((k + 1, k))
        return k, k + 1

    pairs = np.arange(n * n).reshape(n, n)
    np.fill_diagonal(pairs, -1)
    slots: list[np.ndarray] = [pairs]
    ids = tuple(d.id for d in ranks)

    # Ports: per medium, a rank's best link of that medium in either direction.
    medium_of = np.full(len(_KINDS) + 1, -1, dtype=np.int64)
    for kind, medium in _PORT_MEDIUM.items():
        medium_of[_CODE[kind]] = _MEDIA.index(medium)
    hop_medium = medium_of[code]  # code -1 reads the last entry, -1
    port_out = np.full(n, -1, dtype=np.int64)
    port_in = np.full(n, -1, dtype=np.int64)
    out_slot = np.full((n, n), -1, dtype=np.int64)
    in_slot = np.full((n, n), -1, dtype=np.int64)
    for m, medium in enumerate(_MEDIA):
        mask = hop_medium == m
        if not mask.any():
            continue
        cap = np.where(mask, both, 0.0).max(axis=1)
        port_out[:] = -1
        port_in[:] = -1
        for i in np.flatnonzero(mask.any(axis=1) | mask.any(axis=0)).tolist():
            port_out[i], port_in[i] = pair_of_resources(
                f"{medium} out of {ids[i]}", f"{medium} into {ids[i]}", float(cap[i]), False
            )
        out_slot = np.where(mask, port_out[:, None], out_slot)
        in_slot = np.where(mask, port_in[None, :], in_slot)
    slots.extend((out_slot, in_slot))

    # Domain boundaries, per PCIe level.
    level_of = np.full(len(_KINDS) + 1, -1, dtype=np.int64)
    for k, kind in enumerate(_PCIE_LEVELS):
        level_of[_CODE[kind]] = k
    hop_level = level_of[code]
    domains = _pcie_domains(ranks, code)
    for lvl_k, (level, domain) in enumerate(zip(_DOMAIN_LEVELS, domains, strict=True)):
        crossed = (hop_level >= lvl_k + 1) & (domain[:, None] != domain[None, :])
        if not crossed.any():
            continue
        reach = np.where(crossed, both, 0.0)
        cap = np.zeros(int(domain.max()) + 1)
        np.maximum.at(cap, domain, np.maximum(reach.max(axis=1), reach.max(axis=0)))
        out_id = np.full(len(cap), -1, dtype=np.int64)
        in_id = np.full(len(cap), -1, dtype=np.int64)
        for d in np.flatnonzero(cap > 0).tolist():
            out_id[d], in_id[d] = pair_of_resources(
                f"{level} out of domain {d}", f"{level} into domain {d}", float(cap[d]), True
            )
        slots.append(np.where(crossed, out_id[domain][:, None], -1))
        slots.append(np.where(crossed, in_id[domain][None, :], -1))

    # Sockets the input does not name: see _unnamed_socket_hops.
    for host, blind in _unnamed_socket_hops(ranks, code, domains[-1], host_index):
        k = first_shared + len(shared_names)
        shared_names.append(f"sys between the sockets of {host or 'the host'} (sockets not named)")
        shared_cap.append(2.0 * float(both[blind].max()))
        shared_multi.append(True)
        shared_mirror.append(k)
        slots.append(np.where(blind, k, -1))

    # NIC ports for hops between hosts.
    nic_out = np.full(n, -1, dtype=np.int64)
    nic_in = np.full(n, -1, dtype=np.int64)
    if multihost:
        net = code == _CODE[LinkKind.NET]
        made: dict[str, tuple[int, int]] = {}
        for i, nic in enumerate(nics):
            if nic is None:
                continue
            key = f"{nic.host}/{nic.id}"
            if key not in made:
                made[key] = pair_of_resources(f"out of {key}", f"into {key}", float(nic_speed[i]), True)
            nic_out[i], nic_in[i] = made[key]
        slots.append(np.where(net, nic_out[:, None], -1))
        slots.append(np.where(net, nic_in[None, :], -1))

    table = np.stack([slots[0], *(s for s in slots[1:] if (s >= 0).any())], axis=2)
    kinds_by_code = (*_KINDS, None)
    pair_mirror = np.arange(n * n).reshape(n, n).T.ravel()
    return RingFabric(
        n=n,
        bandwidth_gbps=tuple(map(tuple, bw.tolist())),
        kinds=tuple(tuple(kinds_by_code[c] for c in row) for row in code.tolist()),
        hop_resources=HopResources(table),
        capacity_gbps=(*bw.ravel().tolist(), *shared_cap),
        resource_names=ResourceNames(ids, tuple(shared_names)),
        mirror=(*pair_mirror.tolist(), *shared_mirror),
        multi_use=(*([False] * (n * n)), *shared_multi),
        hosts=hosts,
        hop_table=table,
        bandwidth_table=bw,
        nic_out=tuple(nic_out.tolist()),
        nic_in=tuple(nic_in.tolist()),
    )


def _fill_node_links(
    topology: Topology, host_names: list[str], host_index: np.ndarray, bw: np.ndarray, code: np.ndarray
) -> None:
    """Fill the hops between hosts that ``links`` leaves open from the topology's links per pair of hosts
    (:class:`~collbench.topology.model.NodeLink`): the same cells a document listing every pair of ranks
    gives, through a hosts x hosts table (one pass over the node links, none over pairs of ranks)."""
    h = len(host_names)
    host_bw = np.zeros((h, h))
    host_code = np.full((h, h), _NONE, dtype=np.int64)
    default = topology.default_node_link
    if default is not None:
        host_bw[:] = default.bandwidth_gbps
        host_code[:] = _CODE[default.kind]
    position = {name: k for k, name in enumerate(host_names)}
    for nl in topology.node_links:
        if nl.a is not None and nl.b is not None and nl.a in position and nl.b in position:
            a, b = position[nl.a], position[nl.b]
            host_bw[a, b] = host_bw[b, a] = nl.bandwidth_gbps
            host_code[a, b] = host_code[b, a] = _CODE[nl.kind]
    apart = (code == _NONE) & (host_index[:, None] != host_index[None, :])
    rows, cols = np.nonzero(apart)
    bw[rows, cols] = host_bw[host_index[rows], host_index[cols]]
    code[rows, cols] = host_code[host_index[rows], host_index[cols]]


def _unnamed_socket_hops(
    ranks: tuple[Device, ...], code: np.ndarray, socket: np.ndarray, host_index: np.ndarray
) -> Iterator[tuple[str | None, np.ndarray]]:
    """Per host whose sockets the input leaves open, the mask of its ``sys`` hops that share one link.

    Without a NUMA node for a GPU, the socket level of :func:`_pcie_domains` knows it only by its CPU
    affinity and its PCIe paths, and both can say nothing: a DGX-1 quoted without its affinity columns
    prints only ``NV#`` and ``SYS`` (NVLink hides the PCIe paths), an old one gives every GPU the same
    affinity (``1-1``) with ``SOC`` between them. Every GPU is then a "socket" of its own, each ``sys``
    hop looks like a link of its own, and a ring crossing the sockets 8 times seemed to get the full
    socket bandwidth. When a host's ``sys`` hops touch a GPU with no NUMA node and its socket level
    has more than two domains, those hops share one resource: the socket link, with its per-direction
    capacity counted twice, as a ring that crosses from one socket to the other comes back as often.
    That is exact on two sockets (the GPU machines this reads) and conservative on more.
    """
    unknown = np.asarray([d.numa_node is None for d in ranks])
    if not unknown.any():
        return
    candidates = (code == _CODE[LinkKind.SYS]) & (unknown[:, None] | unknown[None, :])
    # A sys path never leaves its host (hosts are joined by net hops), so a row picks its host's hops.
    for h in np.unique(host_index[candidates.any(axis=1)]).tolist():
        on_host = host_index == h
        if len(np.unique(socket[on_host])) > 2:
            yield ranks[int(np.flatnonzero(on_host)[0])].host, candidates & on_host[:, None]


def _pcie_domains(ranks: tuple[Device, ...], code: np.ndarray) -> list[np.ndarray]:
    """Per level of :data:`_DOMAIN_LEVELS`, every rank's domain number; see the module docstring.

    A domain at ``level`` is a connected group under PCIe paths strictly better than ``level``. NVLink
    does not count (it says nothing of the PCIe tree: ``nvidia-smi`` prints ``NV#`` where a PCIe path
    also exists). At the socket level, ranks on the same NUMA node, or with the same CPU affinity when
    the node is unknown, share a domain too, unless the matrix puts a ``sys`` path between two of them.
    """
    level_of = np.full(len(_KINDS) + 1, len(_PCIE_LEVELS), dtype=np.int64)
    for k, kind in enumerate(_PCIE_LEVELS):
        level_of[_CODE[kind]] = k
    hop_level = level_of[code]
    sys_code = _CODE[LinkKind.SYS]
    out: list[np.ndarray] = []
    for lvl_k in range(1, len(_PCIE_LEVELS)):
        adjacency = hop_level < lvl_k
        if lvl_k == len(_PCIE_LEVELS) - 1:
            # Same NUMA node (or CPU affinity) means same socket, unless the matrix itself says a
            # path between two of them crosses the sockets: machines that report every CPU as every
            # GPU's affinity exist (one of the shared fixtures), and SYS is then the better witness.
            adjacency = adjacency.copy()
            groups: dict[object, list[int]] = {}
            for i, dev in enumerate(ranks):
                socket: object = dev.numa_node if dev.numa_node is not None else dev.cpus
                if socket is not None:
                    groups.setdefault(socket, []).append(i)
            for members in groups.values():
                idx = np.asarray(members)
                if not (code[np.ix_(idx, idx)] == sys_code).any():
                    adjacency[idx[0], idx] = True
        # Imported when first needed: scipy costs CPU time that the CLI's --help, which imports
        # this module, must not spend.
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import connected_components

        _, labels = connected_components(csr_matrix(adjacency), directed=False)
        out.append(np.asarray(labels, dtype=np.int64))
    return out
