"""The topology model: frozen value objects, units in the field names.

A :class:`Topology` holds devices (GPUs, NICs, CPUs, or CPU ranks on a host without GPUs) and links.
Between every two GPUs there is exactly one link: the best path between them (NVLink when there is
one, otherwise the PCIe level that ``nvidia-smi topo -m`` would print). Links are undirected and
their bandwidth is per direction.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

from collbench.units import MAX_BYTES, MAX_INT_DIGITS, MAX_RANKS

SCHEMA_VERSION = 1

TopologySource = Literal["nvml", "nvidia-smi", "nccl-xml", "file", "host", "probe"]
LinkSource = Literal["spec", "default", "measured"]


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

    def __post_init__(self) -> None:
        if not isinstance(self.kind, LinkKind):
            object.__setattr__(self, "kind", LinkKind(self.kind))
        if self.a == self.b:
            raise ValueError(f"a link joins two different devices, got {self.a} twice")
        if self.count < 0:
            raise ValueError(f"link {self.a}-{self.b}: count must be >= 0")
        # NaN passes a "< 0" test and then breaks whatever ranks links by bandwidth: refuse it here.
        if not math.isfinite(self.bandwidth_gbps) or self.bandwidth_gbps < 0:
            raise ValueError(f"link {self.a}-{self.b}: bandwidth must be a finite number >= 0")
        if self.latency_us is not None and (not math.isfinite(self.latency_us) or self.latency_us < 0):
            raise ValueError(f"link {self.a}-{self.b}: latency must be a finite number >= 0")

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
class Topology:
    """A machine (or several) as collbench sees it."""

    host: str
    devices: tuple[Device, ...]
    links: tuple[Link, ...]
    source: TopologySource = "file"
    note: str | None = None
    """One line on how the topology was obtained (for example why no GPU was found)."""
    _index: dict[frozenset[str], Link] = field(default_factory=dict, init=False, repr=False, compare=False)

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
        return self.gpus or self.cpus

    def device(self, device_id: str) -> Device:
        for d in self.devices:
            if d.id == device_id:
                return d
        raise KeyError(device_id)

    def link(self, a: str, b: str) -> Link | None:
        """The link between two devices, or None."""
        return self._index.get(frozenset((a, b)))

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
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        return digest[:12]

    # -- (de)serialisation ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON/YAML document (schema_version 1)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "host": self.host,
            "fingerprint": self.fingerprint,
            "source": self.source,
            "note": self.note,
            "devices": [_device_to_dict(d) for d in self.devices],
            "links": [_link_to_dict(lk) for lk in self.links],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Topology:
        """Build a topology from :meth:`to_dict`'s document. Raises KeyError/ValueError/TypeError."""
        version = data.get("schema_version", SCHEMA_VERSION)
        if version != SCHEMA_VERSION:
            raise ValueError(f"schema_version {version} is not supported (expected {SCHEMA_VERSION})")
        devices = tuple(_device_from_dict(d) for d in data["devices"])
        links = tuple(_link_from_dict(lk) for lk in data.get("links", []))
        return cls(
            host=str(data.get("host", "unknown")),
            devices=devices,
            links=links,
            source=data.get("source", "file"),
            note=data.get("note"),
        )

    def subset(self, n_ranks: int) -> Topology:
        """The topology restricted to the first ``n_ranks`` rank devices (NICs and CPUs kept)."""
        ranks = self.rank_devices
        if not 1 <= n_ranks <= len(ranks):
            raise ValueError(f"asked for {n_ranks} ranks, the topology has {len(ranks)}")
        dropped = {d.id for d in ranks[n_ranks:]}
        return Topology(
            host=self.host,
            devices=tuple(d for d in self.devices if d.id not in dropped),
            links=tuple(lk for lk in self.links if lk.a not in dropped and lk.b not in dropped),
            source=self.source,
            note=self.note,
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
    }


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
    )


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
