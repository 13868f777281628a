"""The topology model: frozen value objects, units in the field names.

A :class:`Topology` holds devices (GPUs, NICs, CPUs, or CPU ranks on a host without GPUs) and links.
Between every two GPUs there is exactly one link: the best path between them (NVLink when there is
one, otherwise the PCIe level that ``nvidia-smi topo -m`` would print). Links are undirected and
their bandwidth is per direction. Between rank devices of different hosts a link may instead be said
once per pair of hosts (:class:`NodeLink`, with a default for the pairs no other names): a probe of
thousands of ranks lists O(ranks) links, not O(ranks^2), and :meth:`Topology.link` answers alike.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, get_args

from collbench.topology.cpu_list import MAX_CPU_LIST_ENTRIES
from collbench.units import MAX_BYTES, MAX_INT_DIGITS, MAX_RANKS

SCHEMA_VERSION = 1
NODE_LINKS_SCHEMA_VERSION = 2
"""The version of a document with ``node_links`` (links said per pair of hosts): a reader that knows only
version 1 would drop them and plan on NIC defaults, so it must refuse the file instead."""

TopologySource = Literal["nvml", "nvidia-smi", "nccl-xml", "file", "host", "probe"]
LinkSource = Literal["spec", "default", "measured", "inferred"]
"""Where a link's figures come from: a spec sheet, a documented default for its kind, a measurement, or
(``inferred``) the probe's median of the pairs it measured, standing for a pair it did not measure."""


class DeviceKind(str, Enum):
    GPU = "gpu"
    NIC = "nic"
    CPU = "cpu"

    def __str__(self) -> str:
        return self.value


class LinkKind(str, Enum):
    """How two devices are connected, best first (the order of ``nvidia-smi topo -m``'s legend)."""

    NVLINK = "nvlink"
    NVSWITCH = "nvswitch"
    PIX = "pix"
    PXB = "pxb"
    PHB = "phb"
    NODE = "node"
    SYS = "sys"
    LOOPBACK = "loopback"
    NET = "net"
    MEASURED = "measured"

    def __str__(self) -> str:
        return self.value

    @property
    def is_nvlink(self) -> bool:
        return self in (LinkKind.NVLINK, LinkKind.NVSWITCH)

    @property
    def matrix_code(self) -> str:
        """The code ``nvidia-smi topo -m`` prints for this kind (NV# needs the count: see Link)."""
        return _MATRIX_CODES[self]


_MATRIX_CODES = {
    LinkKind.NVLINK: "NV",
    LinkKind.NVSWITCH: "NV",
    LinkKind.PIX: "PIX",
    LinkKind.PXB: "PXB",
    LinkKind.PHB: "PHB",
    LinkKind.NODE: "NODE",
    LinkKind.SYS: "SYS",
    LinkKind.LOOPBACK: "LOOP",
    LinkKind.NET: "NET",
    LinkKind.MEASURED: "MEAS",
}


# Documented defaults, GB/s per direction, for sources that say the kind of a path but not its speed
# (nvidia-smi text). PCIe figures assume gen4 x16 (~31.5 GB/s raw, less through more bridges and
# through the CPU); SYS crosses the socket interconnect, which NCCL also prices lowest. NVLink per
# link is 25 GB/s (NVLink 2-4); the count multiplies it. The order is the one the issue fixes:
# nvlink/nvswitch > pix > pxb > phb > node > sys.
DEFAULT_BANDWIDTH_GBPS: dict[LinkKind, float] = {
    LinkKind.PIX: 24.0,
    LinkKind.PXB: 22.0,
    LinkKind.PHB: 20.0,
    LinkKind.NODE: 16.0,
    LinkKind.SYS: 10.0,
    LinkKind.LOOPBACK: 10.0,
    LinkKind.NET: 12.5,
}
DEFAULT_NVLINK_GBPS_PER_LINK = 25.0

MAX_MACHINE_DEVICES = 256
"""The most GPUs and NICs one machine's description (``nvidia-smi topo -m``, an NCCL topology XML) may
name. The largest single systems have 16 GPUs and a few dozen NICs; every pair of devices gets a link,
so the work grows with the square of the count: a file naming thousands is refused before it starts."""


@dataclass(frozen=True, slots=True)
class Device:
    """One GPU, NIC or CPU (or CPU rank). ``id`` is what the matrix prints: ``GPU0``, ``NIC1``."""

    id: str
    kind: DeviceKind
    index: int
    name: str | None = None
    bus_id: str | None = None
    """PCI bus id, normalised to ``0000:07:00.0``."""
    numa_node: int | None = None
    cpus: tuple[int, ...] | None = None
    """The CPU cores close to the device (its affinity), or the cores a CPU rank runs on."""
    memory_bytes: int | None = None
    uuid: str | None = None
    host: str | None = None
    """The host the device is in, for topologies that span machines."""
    extra: tuple[tuple[str, str], ...] = ()
    """Facts that do not warrant a field (NIC port name, PCIe generation and width, NVLink version)."""

    def __post_init__(self) -> None:
        if not isinstance(self.kind, DeviceKind):
            object.__setattr__(self, "kind", DeviceKind(self.kind))
        if self.index < 0:
            raise ValueError(f"device {self.id}: index must be >= 0, got {self.index}")
        if self.cpus is not None and not isinstance(self.cpus, tuple):
            object.__setattr__(self, "cpus", tuple(self.cpus))
        if not isinstance(self.extra, tuple):
            object.__setattr__(self, "extra", tuple((str(k), str(v)) for k, v in dict(self.extra).items()))

    def get(self, key: str) -> str | None:
        """Return an ``extra`` fact by name, or None."""
        for k, v in self.extra:
            if k == key:
                return v
        return None


def _check_link_values(
    what: str, bandwidth_gbps: float, latency_us: float | None, source: str, spread_pct: float | None = None
) -> None:
    # A source read from a file is one of the four: 'infered' or 'Measured' taken as a spec link printed
    # a figure nobody measured as a plain one, and moved the fingerprint with every probe.
    if source not in get_args(LinkSource):
        raise ValueError(f"{what}: source {str(source)[:40]!r} is not one of {', '.join(get_args(LinkSource))}")
    # NaN passes a "< 0" test and then breaks whatever ranks links by bandwidth: refuse it here.
    if not math.isfinite(bandwidth_gbps) or bandwidth_gbps < 0:
        raise ValueError(f"{what}: bandwidth must be a finite number >= 0")
    if latency_us is not None and (not math.isfinite(latency_us) or latency_us < 0):
        raise ValueError(f"{what}: latency must be a finite number >= 0")
    if spread_pct is not None and (not math.isfinite(spread_pct) or spread_pct < 0):
        raise ValueError(f"{what}: spread_pct must be a finite number >= 0")


@dataclass(frozen=True, slots=True)
class Link:
    """An undirected connection between devices ``a`` and ``b``; bandwidth is per direction."""

    a: str
    b: str
    kind: LinkKind
    count: int = 1
    """Number of links bonded together (NV# in the matrix); 1 for PCIe levels."""
    bandwidth_gbps: float = 0.0
    """Per direction, in GB/s (10^9 bytes per second)."""
    latency_us: float | None = None
    source: LinkSource = "spec"
    spread_pct: float | None = None
    """A probe's: how far its repeats of a direction lay apart, (max - min) / median in %, the wider
    direction's; None where nothing was repeated (a spec or inferred link, a file from before)."""

    def __post_init__(self) -> None:
        if not isinstance(self.kind, LinkKind):
            object.__setattr__(self, "kind", LinkKind(self.kind))
        if self.a == self.b:
            raise ValueError(f"a link joins two different devices, got {self.a} twice")
        if self.count < 0:
            raise ValueError(f"link {self.a}-{self.b}: count must be >= 0")
        _check_link_values(
            f"link {self.a}-{self.b}", self.bandwidth_gbps, self.latency_us, self.source, self.spread_pct
        )

    @property
    def ends(self) -> frozenset[str]:
        return frozenset((self.a, self.b))

    @property
    def matrix_code(self) -> str:
        """The cell ``nvidia-smi topo -m`` would print: ``NV12``, ``PIX``, ``SYS``..."""
        if self.kind.is_nvlink:
            return f"NV{self.count}"
        return self.kind.matrix_code


@dataclass(frozen=True, slots=True)
class NodeLink:
    """The link between every rank device on host ``a`` and every one on host ``b``, said once for the
    pair of hosts: the ranks of a node share its network, and a probe of 16,384 ranks that listed every
    pair of ranks would write 134 million links. With ``a`` and ``b`` None it is the *default*: the link
    between the rank devices of any two hosts that no other NodeLink names (``source`` ``inferred``
    where the probe did not measure them). A link between two devices listed in ``links`` wins."""

    kind: LinkKind
    bandwidth_gbps: float
    """Per direction, in GB/s (10^9 bytes per second)."""
    latency_us: float | None = None
    source: LinkSource = "measured"
    a: str | None = None
    """A host name (a rank device's ``host``), or None for the default."""
    b: str | None = None
    count: int = 1
    spread_pct: float | None = None
    """As :attr:`Link.spread_pct`: the probe's repeats of the pair of ranks measured."""

    def __post_init__(self) -> None:
        if not isinstance(self.kind, LinkKind):
            object.__setattr__(self, "kind", LinkKind(self.kind))
        if (self.a is None) != (self.b is None):
            raise ValueError(f"a link between hosts names two hosts or none (the default), got {self.a or self.b}")
        if self.a is not None and self.a == self.b:
            raise ValueError(f"a link between hosts joins two different hosts, got {self.a} twice")
        if self.count < 0:
            raise ValueError(f"{self.what}: count must be >= 0")
        _check_link_values(self.what, self.bandwidth_gbps, self.latency_us, self.source, self.spread_pct)

    @property
    def is_default(self) -> bool:
        return self.a is None

    @property
    def what(self) -> str:
        """How a message names it: ``the link between hosts a and b`` or the default's."""
        return "the default link between hosts" if self.a is None else f"the link between hosts {self.a} and {self.b}"

    def between(self, a: str, b: str) -> Link:
        """This link as one between the devices ``a`` and ``b``."""
        return Link(a, b, self.kind, self.count, self.bandwidth_gbps, self.latency_us, self.source, self.spread_pct)


@dataclass(frozen=True, slots=True)
class Topology:
    """A machine (or several) as collbench sees it."""

    host: str
    devices: tuple[Device, ...]
    links: tuple[Link, ...]
    source: TopologySource = "file"
    note: str | None = None
    """One line on how the topology was obtained (for example why no GPU was found)."""
    node_links: tuple[NodeLink, ...] = ()
    """Links between rank devices of different hosts said per pair of hosts (and a default), where
    ``links`` does not list them per pair of devices: O(hosts) in the file rather than O(ranks^2)."""
    _index: dict[frozenset[str], Link] = field(default_factory=dict, init=False, repr=False, compare=False)
    _by_hosts: dict[frozenset[str] | None, NodeLink] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _rank_host: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)
    _ranks: tuple[Device, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.devices, tuple):
            object.__setattr__(self, "devices", tuple(self.devices))
        if not isinstance(self.links, tuple):
            object.__setattr__(self, "links", tuple(self.links))
        ids = [d.id for d in self.devices]
        if len(set(ids)) != len(ids):
            raise ValueError(f"device ids repeat: {sorted(i for i in ids if ids.count(i) > 1)}")
        known = set(ids)
        index: dict[frozenset[str], Link] = {}
        for link in self.links:
            if link.a not in known or link.b not in known:
                raise ValueError(f"link {link.a}-{link.b} names a device that is not in the topology")
            if link.ends in index:
                raise ValueError(f"two links between {link.a} and {link.b}")
            index[link.ends] = link
        object.__setattr__(self, "_index", index)
        # Found once: link() by rank index, a layout's hops and the simulator's transfers ask for them
        # per pair, and sorting every device each time made those O(ranks^2 log ranks).
        object.__setattr__(self, "_ranks", self.gpus or self.cpus)
        if not isinstance(self.node_links, tuple):
            object.__setattr__(self, "node_links", tuple(self.node_links))
        if self.node_links:
            self._index_node_links()

    def _index_node_links(self) -> None:
        rank_host = {d.id: d.host or self.host for d in self.rank_devices}
        hosts = set(rank_host.values())
        by_hosts: dict[frozenset[str] | None, NodeLink] = {}
        for nl in self.node_links:
            key = None if nl.a is None or nl.b is None else frozenset((nl.a, nl.b))
            if key is not None and not key <= hosts:
                raise ValueError(f"{nl.what} names a host that no rank device is on")
            if key in by_hosts:
                raise ValueError(f"{nl.what} is given twice")
            by_hosts[key] = nl
        object.__setattr__(self, "_by_hosts", by_hosts)
        object.__setattr__(self, "_rank_host", rank_host)

    # -- queries ---------------------------------------------------------------------------------

    def devices_of(self, kind: DeviceKind) -> tuple[Device, ...]:
        return tuple(sorted((d for d in self.devices if d.kind == kind), key=lambda d: d.index))

    @property
    def gpus(self) -> tuple[Device, ...]:
        return self.devices_of(DeviceKind.GPU)

    @property
    def nics(self) -> tuple[Device, ...]:
        return self.devices_of(DeviceKind.NIC)

    @property
    def cpus(self) -> tuple[Device, ...]:
        return self.devices_of(DeviceKind.CPU)

    @property
    def rank_devices(self) -> tuple[Device, ...]:
        """The devices ranks run on: the GPUs, or the CPU ranks when there are no GPUs."""
        return self._ranks

    def device(self, device_id: str) -> Device:
        for d in self.devices:
            if d.id == device_id:
                return d
        raise KeyError(device_id)

    def link(self, a: str, b: str) -> Link | None:
        """The link between two devices, or None: the one ``links`` lists, else, between rank devices on
        different hosts, their hosts' :class:`NodeLink` (or the default) as a link between the two."""
        found = self._index.get(frozenset((a, b)))
        if found is not None or not self._by_hosts:
            return found
        host_a, host_b = self._rank_host.get(a), self._rank_host.get(b)
        if host_a is None or host_b is None or host_a == host_b:
            return None
        between = self.node_link(host_a, host_b)
        return between.between(a, b) if between is not None else None

    @property
    def default_node_link(self) -> NodeLink | None:
        """The :class:`NodeLink` between hosts that no other names, or None."""
        return self._by_hosts.get(None)

    def node_link(self, host_a: str, host_b: str) -> NodeLink | None:
        """The :class:`NodeLink` between two hosts (theirs, else the default), or None."""
        return self._by_hosts.get(frozenset((host_a, host_b))) or self._by_hosts.get(None)

    def rank_link(self, i: int, j: int) -> Link | None:
        """The link between the i-th and j-th rank device."""
        ranks = self.rank_devices
        return self.link(ranks[i].id, ranks[j].id)

    def bandwidth_matrix_gbps(self) -> list[list[float]]:
        """Per-direction bandwidth between rank devices; 0 on the diagonal and where unknown."""
        ranks = self.rank_devices
        n = len(ranks)
        out = [[0.0] * n for _ in range(n)]
        for i in range(n):
            for j in range(n):
                if i != j:
                    link = self.link(ranks[i].id, ranks[j].id)
                    out[i][j] = link.bandwidth_gbps if link is not None else 0.0
        return out

    @property
    def fingerprint(self) -> str:
        """A short stable hash of what matters for performance: device kinds and names, links.

        The host name, bus ids and the source are left out, so two identical machines share it. A
        measured link (``discover --probe``) counts by its ends and kind only: its bandwidth and latency
        differ from run to run, and a fingerprint that moved with them would make every probe of one
        machine a new machine (profiles that would not merge). The figures stay in the links.
        """
        payload = {
            "devices": sorted((d.id, d.kind.value, d.name or "") for d in self.devices),
            "links": sorted(
                (
                    min(lk.a, lk.b),
                    max(lk.a, lk.b),
                    lk.kind.value,
                    lk.count,
                    None if lk.source == "measured" else round(lk.bandwidth_gbps, 1),
                )
                for lk in self.links
            ),
        }
        if self.node_links:
            # Only where there are some: a topology without them keeps the fingerprint it always had.
            # Hosts by where their ranks stand (the first rank device of each), as links name devices,
            # and each pair in order: a pair written b-a, or identical clusters with other host names,
            # are one machine, as host names are left out above.
            place: dict[str, int] = {}
            for d in self.rank_devices:
                place.setdefault(d.host or self.host, len(place))
            payload["node_links"] = sorted(
                (
                    *(sorted((place[nl.a], place[nl.b])) if nl.a is not None and nl.b is not None else (-1, -1)),
                    nl.kind.value,
                    nl.count,
                    None if nl.source in ("measured", "inferred") else round(nl.bandwidth_gbps, 1),
                )
                for nl in self.node_links
            )
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        return digest[:12]

    # -- (de)serialisation ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON/YAML document: schema_version 1, or 2 with ``node_links``."""
        out: dict[str, Any] = {
            "schema_version": NODE_LINKS_SCHEMA_VERSION if self.node_links else SCHEMA_VERSION,
            "host": self.host,
            "fingerprint": self.fingerprint,
            "source": self.source,
            "note": self.note,
            "devices": [_device_to_dict(d) for d in self.devices],
            "links": [_link_to_dict(lk) for lk in self.links],
        }
        if self.node_links:
            out["node_links"] = [_node_link_to_dict(nl) for nl in self.node_links]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Topology:
        """Build a topology from :meth:`to_dict`'s document. Raises KeyError/ValueError/TypeError."""
        version = data.get("schema_version", SCHEMA_VERSION)
        if version not in (SCHEMA_VERSION, NODE_LINKS_SCHEMA_VERSION):
            raise ValueError(
                f"schema_version {version} is not supported (expected {SCHEMA_VERSION} or {NODE_LINKS_SCHEMA_VERSION})"
            )
        node_links = tuple(_node_link_from_dict(nl) for nl in data.get("node_links") or [])
        if node_links and version != NODE_LINKS_SCHEMA_VERSION:
            raise ValueError(f"node_links need schema_version {NODE_LINKS_SCHEMA_VERSION}, the file says {version}")
        devices = tuple(_device_from_dict(d) for d in data["devices"])
        links = tuple(_link_from_dict(lk) for lk in data.get("links", []))
        return cls(
            host=str(data.get("host", "unknown")),
            devices=devices,
            links=links,
            source=data.get("source", "file"),
            note=data.get("note"),
            node_links=node_links,
        )

    def subset(self, n_ranks: int) -> Topology:
        """The topology restricted to the first ``n_ranks`` rank devices (NICs and CPUs kept)."""
        ranks = self.rank_devices
        if not 1 <= n_ranks <= len(ranks):
            raise ValueError(f"asked for {n_ranks} ranks, the topology has {len(ranks)}")
        dropped = {d.id for d in ranks[n_ranks:]}
        hosts = {d.host or self.host for d in ranks[:n_ranks]}
        return Topology(
            host=self.host,
            devices=tuple(d for d in self.devices if d.id not in dropped),
            links=tuple(lk for lk in self.links if lk.a not in dropped and lk.b not in dropped),
            source=self.source,
            note=self.note,
            # On one host no link between hosts is left to say: none is kept (nor counted by the fingerprint).
            node_links=tuple(
                nl for nl in self.node_links if len(hosts) > 1 and (nl.a is None or {nl.a, nl.b} <= hosts)
            ),
        )


def _device_to_dict(d: Device) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": d.id,
        "kind": d.kind.value,
        "index": d.index,
        "name": d.name,
        "bus_id": d.bus_id,
        "numa_node": d.numa_node,
        "cpus": list(d.cpus) if d.cpus is not None else None,
        "memory_bytes": d.memory_bytes,
        "uuid": d.uuid,
        "host": d.host,
    }
    if d.extra:
        out["extra"] = dict(d.extra)
    return out


MAX_LINK_COUNT = 1 << 10
"""Links between two devices: NVLink 5 has 18 per GPU, NVSwitch systems report each GPU's to the switch."""


def _whole(value: Any, field: str, high: int, *, low: int = 0, optional: bool = False) -> Any:
    """``value`` as an int in ``[low, high)``: an int, or a string of at most MAX_INT_DIGITS ASCII digits
    (checked before ``int()``); ValueError naming the field otherwise. None passes where ``optional``."""
    if value is None and optional:
        return None
    text = value.strip() if isinstance(value, str) else None
    if text is not None and re.fullmatch(rf"-?[0-9]{{1,{MAX_INT_DIGITS}}}", text):
        value = int(text)
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) < 2**53:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < high:
        shown = repr(value)[:40]
        raise ValueError(f"{field} {shown} is not a whole number from {low} to {high - 1}")
    return value


def _device_from_dict(data: dict[str, Any]) -> Device:
    cpus = data.get("cpus")
    where = f"device {str(data.get('id'))[:40]!r}"
    return Device(
        id=str(data["id"]),
        kind=DeviceKind(data["kind"]),
        index=_whole(data["index"], f"{where} index", MAX_RANKS),
        name=data.get("name"),
        bus_id=data.get("bus_id"),
        # -1: the kernel's "no NUMA node" (sysfs numa_node), as NVML and nvidia-smi report it too.
        numa_node=_whole(data.get("numa_node"), f"{where} numa_node", MAX_RANKS, low=-1, optional=True),
        cpus=tuple(_whole(c, f"{where} cpu", MAX_CPU_LIST_ENTRIES) for c in cpus) if cpus is not None else None,
        memory_bytes=_whole(data.get("memory_bytes"), f"{where} memory_bytes", MAX_BYTES, optional=True),
        uuid=data.get("uuid"),
        host=data.get("host"),
        extra=tuple((str(k), str(v)) for k, v in (data.get("extra") or {}).items()),
    )


def _link_to_dict(lk: Link) -> dict[str, Any]:
    return {
        "a": lk.a,
        "b": lk.b,
        "kind": lk.kind.value,
        "count": lk.count,
        "bandwidth_gbps": lk.bandwidth_gbps,
        "latency_us": lk.latency_us,
        "source": lk.source,
    } | _spread_to_dict(lk.spread_pct)


def _node_link_to_dict(nl: NodeLink) -> dict[str, Any]:
    hosts: dict[str, Any] = {"default": True} if nl.a is None else {"a": nl.a, "b": nl.b}
    return {
        **hosts,
        "kind": nl.kind.value,
        "count": nl.count,
        "bandwidth_gbps": nl.bandwidth_gbps,
        "latency_us": nl.latency_us,
        "source": nl.source,
    } | _spread_to_dict(nl.spread_pct)


def _spread_to_dict(spread_pct: float | None) -> dict[str, Any]:
    """Only where measured: a file without spreads reads, and is written, as before."""
    return {} if spread_pct is None else {"spread_pct": spread_pct}


def _spread_from_dict(data: dict[str, Any]) -> float | None:
    spread = data.get("spread_pct")
    return None if spread is None else float(spread)


def _node_link_from_dict(data: dict[str, Any]) -> NodeLink:
    latency = data.get("latency_us")
    default = data.get("default") is True
    a, b = (None, None) if default else (str(data["a"]), str(data["b"]))
    where = "default node link" if default else f"node link {a[:40] if a else ''}-{b[:40] if b else ''}"
    return NodeLink(
        kind=LinkKind(data["kind"]),
        bandwidth_gbps=float(data.get("bandwidth_gbps", 0.0)),
        latency_us=float(latency) if latency is not None else None,
        source=data.get("source", "measured"),
        a=a,
        b=b,
        count=_whole(data.get("count", 1), f"{where} count", MAX_LINK_COUNT),
        spread_pct=_spread_from_dict(data),
    )


def _link_from_dict(data: dict[str, Any]) -> Link:
    latency = data.get("latency_us")
    return Link(
        a=str(data["a"]),
        b=str(data["b"]),
        kind=LinkKind(data["kind"]),
        count=_whole(data.get("count", 1), f"link {str(data['a'])[:40]}-{str(data['b'])[:40]} count", MAX_LINK_COUNT),
        bandwidth_gbps=float(data.get("bandwidth_gbps", 0.0)),
        latency_us=float(latency) if latency is not None else None,
        source=data.get("source", "spec"),
        spread_pct=_spread_from_dict(data),
    )
