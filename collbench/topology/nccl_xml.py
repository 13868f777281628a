"""A topology from an NCCL topology XML (the format of NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE).

``<system>`` holds ``<cpu numaid affinity>`` elements; under each, nested ``<pci busid link_speed
link_width>`` elements form the PCIe tree, and a ``<pci>`` holds a ``<gpu dev sm rank>`` (with
``<nvlink target count tclass>`` children) or a ``<nic>`` (with ``<net name dev speed>`` children, speed
in Mb/s). PCIe levels follow ``nvidia-smi topo -m``'s legend, read off the tree:

* PIX: the path crosses at most one PCIe bridge (both ends hang directly off one ``<pci>``);
* PXB: several bridges, not the host bridge (the ends share a ``<pci>`` ancestor);
* PHB: the ends share only their ``<cpu>`` (the XML does not say whether two root ports sit on one host
  bridge, so NODE is never derived; NCCL itself calls such paths PHB);
* SYS: the ends are under different ``<cpu>`` elements.

Cloud images ship files for ``NCCL_TOPO_FILE`` that name each GPU and NIC only by a ``<pci busid
class>`` leaf, with no ``<gpu>``/``<nic>`` element and no ``<nvlink>``: NCCL fills those in from the
driver at run time. NCCL's ``kvDictPciClass`` (src/graph/xml.cc) reads a class starting ``0x03`` as a
GPU and ``0x02`` as a NIC; so does this reader. Such GPUs are numbered in bus-id order (what
``nvidia-smi`` and ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` show), their NVLinks are unknown, and each pair gets
its PCIe path; the caller's ``notes`` receives one line saying so.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from collbench.errors import InputFileError
from collbench.fileio import check_number_lengths, read_text_file
from collbench.filekinds import NCCL_XML_KIND, misfiled
from collbench.topology.bandwidth import nvlink_gbps, nvlink_generation_for_sm, pcie_gbps, pcie_generation_for_speed
from collbench.topology.bus_id import normalize_bus_id
from collbench.topology.model import (
    DEFAULT_BANDWIDTH_GBPS,
    MAX_CPU_LIST_ENTRIES,
    MAX_MACHINE_DEVICES,
    Device,
    DeviceKind,
    Link,
    LinkKind,
    LinkSource,
    Topology,
)
from collbench.units import counted

# PCI classes of an <nvlink tclass=...> target: 0x0680xx "other bridge" is an NVSwitch, 0x03xxxx a GPU.
_NVSWITCH_CLASS_PREFIX = "0x0680"
_GPU_CLASS_PREFIX = "0x03"
# A <pci class> that NCCL's kvDictPciClass maps to a NIC (0x0200xx Ethernet, 0x0207xx InfiniBand).
_NIC_CLASS_PREFIX = "0x02"
MBPS_PER_GBPS = 8000.0  # NCCL's net speed is in Mb/s (10^6 bits/s); GB/s is 10^9 bytes/s.


@dataclass(slots=True)
class _Endpoint:
    cpu: int
    chain: tuple[ET.Element, ...]
    """The <pci> elements from the top of the CPU's tree down to the device's own <pci>."""


@dataclass(slots=True)
class _Gpu:
    dev: int
    bus_id: str | None
    sm: int | None
    rank: int | None
    at: _Endpoint
    gpu_links: dict[str, int] = field(default_factory=dict)
    switch_links: int = 0
    by_class: bool = False
    """Known only by its <pci class> (no <gpu> element): numbered later, in bus-id order."""


@dataclass(slots=True)
class _Nic:
    dev: int
    name: str | None
    bus_id: str | None
    speed_mbps: float | None
    at: _Endpoint
    by_class: bool = False


@dataclass(slots=True)
class _Cpu:
    numa: int | None
    cpus: tuple[int, ...] | None
    attrs: dict[str, str]


def _describe(el: ET.Element) -> str:
    attrs = " ".join(f'{k}="{v}"' for k, v in list(el.attrib.items())[:3])
    return f"<{el.tag}{' ' + attrs if attrs else ''}>"


def affinity_to_cpus(mask: str | None) -> tuple[int, ...] | None:
    """``"00000000,ffffffff,00000000,ffffffff"`` (32-bit words, most significant first) as CPU numbers."""
    if not mask:
        return None
    digits = mask.replace(",", "").strip().lstrip("0")
    if len(digits) > MAX_CPU_LIST_ENTRIES // 4:
        raise ValueError(f"names more than {MAX_CPU_LIST_ENTRIES} CPUs")
    value = int(digits or "0", 16)
    cpus = tuple(bit for bit in range(value.bit_length()) if value >> bit & 1)
    return cpus or None


class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path
        self.cpus: list[_Cpu] = []
        self.gpus: list[_Gpu] = []
        self.nics: list[_Nic] = []
        # The numbers taken, so a file of many devices is checked for repeats in one pass.
        self.gpu_devs: set[int] = set()
        self.nic_devs: set[int] = set()

    def error(self, el: ET.Element, problem: str) -> InputFileError:
        return InputFileError(self.path, f"element {_describe(el)}: {problem}")

    def _int(self, el: ET.Element, attr: str, base: int = 10) -> int | None:
        text = el.get(attr)
        if text is None or text == "":
            return None
        try:
            return int(text, 0) if base == 0 else int(text, base)
        except ValueError:
            raise self.error(el, f"attribute {attr}={text!r} is not a number") from None

    def read(self, root: ET.Element) -> None:
        if root.tag != "system":
            raise self.error(root, "the root element is not <system> (expected an NCCL topology: NCCL_TOPO_DUMP_FILE)")
        for cpu_el in root.iter("cpu"):
            try:
                cpus = affinity_to_cpus(cpu_el.get("affinity"))
            except ValueError:
                raise self.error(cpu_el, "affinity is not a hex CPU mask (expected like 0000ffff,ffffffff)") from None
            self.cpus.append(_Cpu(self._int(cpu_el, "numaid"), cpus, dict(cpu_el.attrib)))
            self._walk(cpu_el, len(self.cpus) - 1, ())
        if not self.gpus:
            raise self.error(
                root,
                "holds no <gpu> and no <pci> of a GPU class (0x03...) inside <cpu>: it leaves the GPUs to"
                " NCCL's run-time detection; dump the whole topology with NCCL_TOPO_DUMP_FILE, or use"
                " --from-nvidia-smi",
            )
        if len(self.gpus) + len(self.nics) > MAX_MACHINE_DEVICES:
            raise self.error(
                root,
                f"names {len(self.gpus)} GPUs and {len(self.nics)} NICs; one machine's topology holds at most"
                f" {MAX_MACHINE_DEVICES} (NCCL writes one file per machine)",
            )
        self._number_by_class()

    def _number_by_class(self) -> None:
        """Give GPUs and NICs known only by class the first free numbers, in bus-id order."""
        for devices in (self.gpus, self.nics):
            taken = {d.dev for d in devices if not d.by_class}
            free = (n for n in range(len(devices) + len(taken)) if n not in taken)
            for d in sorted((d for d in devices if d.by_class), key=lambda d: d.bus_id or ""):
                d.dev = next(free)

    def _walk(self, el: ET.Element, cpu: int, chain: tuple[ET.Element, ...]) -> None:
        for child in el:
            if child.tag == "pci":
                if not child.get("busid"):
                    raise self.error(child, "has no busid attribute")
                self._walk(child, cpu, (*chain, child))
                self._by_class(child, cpu, (*chain, child))
            elif child.tag == "gpu":
                self._gpu(child, cpu, chain)
            elif child.tag == "nic":
                self._nic(child, cpu, chain)

    def _bus(self, chain: tuple[ET.Element, ...], el: ET.Element) -> str | None:
        if not chain:
            return None
        try:
            return normalize_bus_id(chain[-1].get("busid"))
        except ValueError:
            raise self.error(chain[-1], "busid is not a PCI bus id (expected like 0000:07:00.0)") from None

    def _by_class(self, el: ET.Element, cpu: int, chain: tuple[ET.Element, ...]) -> None:
        """A GPU or NIC that a <pci> names only by its class, as cloud images' topology files do."""
        if any(child.tag in ("gpu", "nic", "pci") for child in el):
            return
        pci_class = (el.get("class") or "").lower()
        if pci_class.startswith(_GPU_CLASS_PREFIX):
            at = _Endpoint(cpu, chain)
            self.gpus.append(_Gpu(dev=-1, bus_id=self._bus(chain, el), sm=None, rank=None, at=at, by_class=True))
        elif pci_class.startswith(_NIC_CLASS_PREFIX):
            at = _Endpoint(cpu, chain)
            self.nics.append(_Nic(-1, None, self._bus(chain, el), None, at, by_class=True))

    def _gpu(self, el: ET.Element, cpu: int, chain: tuple[ET.Element, ...]) -> None:
        if not chain:
            raise self.error(el, "is not inside a <pci busid=...> (the GPU's bus id comes from it)")
        dev = self._int(el, "dev")
        gpu = _Gpu(
            dev=dev if dev is not None else len(self.gpus),
            bus_id=self._bus(chain, el),
            sm=self._int(el, "sm"),
            rank=self._int(el, "rank"),
            at=_Endpoint(cpu, chain),
        )
        if gpu.dev in self.gpu_devs:
            raise self.error(el, f"a second GPU with dev={gpu.dev}")
        self.gpu_devs.add(gpu.dev)
        for nv in el.iter("nvlink"):
            count = self._int(nv, "count") or 1
            tclass = (nv.get("tclass") or "").lower()
            try:
                target = normalize_bus_id(nv.get("target"))
            except ValueError:
                raise self.error(nv, "target is not a PCI bus id") from None
            if tclass.startswith(_NVSWITCH_CLASS_PREFIX):
                gpu.switch_links += count
            elif tclass.startswith(_GPU_CLASS_PREFIX) and target:
                gpu.gpu_links[target] = gpu.gpu_links.get(target, 0) + count
        self.gpus.append(gpu)

    def _nic(self, el: ET.Element, cpu: int, chain: tuple[ET.Element, ...]) -> None:
        for net in el.iter("net"):
            dev = self._int(net, "dev")
            speed = self._int(net, "speed")
            nic = _Nic(
                dev=dev if dev is not None else len(self.nics),
                name=net.get("name"),
                bus_id=self._bus(chain, net),
                speed_mbps=float(speed) if speed is not None else None,
                at=_Endpoint(cpu, chain),
            )
            if nic.dev in self.nic_devs:
                raise self.error(net, f"a second NIC with dev={nic.dev}")
            self.nic_devs.add(nic.dev)
            self.nics.append(nic)


def _level(a: _Endpoint, b: _Endpoint) -> tuple[LinkKind, tuple[ET.Element, ...]]:
    """The PCIe level between two endpoints and the <pci> elements on the path."""
    if a.cpu != b.cpu:
        return LinkKind.SYS, a.chain + b.chain
    common = 0
    while common < min(len(a.chain), len(b.chain)) and a.chain[common] is b.chain[common]:
        common += 1
    if common == 0:
        return LinkKind.PHB, a.chain + b.chain
    path = a.chain[common - 1 :] + b.chain[common:]
    # Bridges crossed: the shared ancestor plus those strictly between it and each end's own <pci>.
    bridges = 1 + max(0, len(a.chain) - common - 1) + max(0, len(b.chain) - common - 1)
    if len(a.chain) == common or len(b.chain) == common:  # one end is the shared <pci> itself
        bridges -= 1
    return (LinkKind.PIX if bridges <= 1 else LinkKind.PXB), path


def _pcie_of(el: ET.Element) -> tuple[int | None, int | None]:
    gen = pcie_generation_for_speed(el.get("link_speed"))
    try:
        width = int(el.get("link_width") or "")
    except ValueError:
        width = None
    return gen, (width or None)


def _pcie_link(a_id: str, b_id: str, a: _Endpoint, b: _Endpoint) -> Link:
    kind, path = _level(a, b)
    gens, widths = [], []
    for el in path:
        gen, width = _pcie_of(el)
        if gen:
            gens.append(gen)
        if width:
            widths.append(width)
    bw = pcie_gbps(min(gens) if gens else None, min(widths) if widths else None, kind)
    source: LinkSource = "spec"
    if bw is None:
        bw, source = DEFAULT_BANDWIDTH_GBPS[kind], "default"
    return Link(a_id, b_id, kind, count=1, bandwidth_gbps=bw, source=source)


def _gpu_pair(a: _Gpu, b: _Gpu) -> Link:
    direct = max(a.gpu_links.get(b.bus_id or "", 0), b.gpu_links.get(a.bus_id or "", 0))
    switched = min(a.switch_links, b.switch_links)
    gens = [g for g in (nvlink_generation_for_sm(a.sm), nvlink_generation_for_sm(b.sm)) if g]
    gen = min(gens) if gens else None
    ida, idb = f"GPU{a.dev}", f"GPU{b.dev}"
    if switched > direct:
        return Link(ida, idb, LinkKind.NVSWITCH, switched, nvlink_gbps(gen, switched))
    if direct:
        return Link(ida, idb, LinkKind.NVLINK, direct, nvlink_gbps(gen, direct))
    return _pcie_link(ida, idb, a.at, b.at)


def _extra_pcie(at: _Endpoint) -> list[tuple[str, str]]:
    if not at.chain:
        return []
    gen, width = _pcie_of(at.chain[-1])
    out = []
    if gen:
        out.append(("pcie_gen", str(gen)))
    if width:
        out.append(("pcie_width", str(width)))
    return out


MAX_XML_DEPTH = 64
"""NCCL's own dumps nest about ten deep (system, cpu, a few PCI switches, gpu, nvlink); the reader
walks the tree recursively, so a file nested thousands deep is refused before it is walked."""


def _check_depth(root: ET.Element, path: str) -> None:
    stack = [(root, 1)]
    while stack:
        el, depth = stack.pop()
        if depth > MAX_XML_DEPTH:
            where = _describe(el)
            raise InputFileError(path, f"elements nest deeper than {MAX_XML_DEPTH} (at {where}); not an NCCL topology")
        stack.extend((child, depth + 1) for child in el)


def parse_nccl_xml(text: str, path: str = "<input>", notes: list[str] | None = None) -> Topology:
    """Build a topology from NCCL topology XML text.

    ``notes``, when given, receives one line for what was assumed (GPUs and NICs known only by their
    PCI class, GPUs without any <nvlink>). Raises InputFileError (naming the file and the element) for
    empty input, XML that does not parse, and XML that is not an NCCL topology.
    """
    if not text.strip():
        raise InputFileError(path, "the file is empty (expected an NCCL topology XML)")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        line = exc.position[0] if exc.position else None
        raise InputFileError(path, f"not XML: {exc.msg if hasattr(exc, 'msg') else exc}", line=line) from None
    _check_depth(root, path)
    r = _Reader(path)
    r.read(root)
    if notes is not None:
        notes.extend(_assumptions(r, path))
    devices: list[Device] = []
    for g in sorted(r.gpus, key=lambda g: g.dev):
        cpu = r.cpus[g.at.cpu]
        extra = _extra_pcie(g.at)
        if g.sm is not None:
            extra.append(("sm", str(g.sm)))
        if g.rank is not None:
            extra.append(("nccl_rank", str(g.rank)))
        links = g.switch_links + sum(g.gpu_links.values())
        if links:
            extra.append(("nvlink_links", str(links)))
            gen = nvlink_generation_for_sm(g.sm)
            if gen:
                extra.append(("nvlink_generation", str(gen)))
        if g.switch_links:
            extra.append(("nvswitch_links", str(g.switch_links)))
        devices.append(
            Device(
                f"GPU{g.dev}",
                DeviceKind.GPU,
                g.dev,
                bus_id=g.bus_id,
                numa_node=cpu.numa,
                cpus=cpu.cpus,
                extra=tuple(extra),
            )
        )
    for n in sorted(r.nics, key=lambda n: n.dev):
        cpu = r.cpus[n.at.cpu]
        extra = _extra_pcie(n.at)
        if n.speed_mbps is not None:
            extra.append(("speed_gbps", f"{n.speed_mbps / MBPS_PER_GBPS:g}"))
        devices.append(
            Device(
                f"NIC{n.dev}",
                DeviceKind.NIC,
                n.dev,
                name=n.name,
                bus_id=n.bus_id,
                numa_node=cpu.numa,
                cpus=cpu.cpus,
                extra=tuple(extra),
            )
        )
    gpus = sorted(r.gpus, key=lambda g: g.dev)
    nics = sorted(r.nics, key=lambda n: n.dev)
    out_links = [_gpu_pair(a, b) for a, b in combinations(gpus, 2)]
    out_links += [_pcie_link(f"GPU{g.dev}", f"NIC{n.dev}", g.at, n.at) for g in gpus for n in nics]
    return Topology(
        host="unknown",
        devices=tuple(devices),
        links=tuple(out_links),
        source="nccl-xml",
        note=f"NCCL topology XML from {path}",
    )


def _assumptions(r: _Reader, path: str) -> list[str]:
    """What the file left open and the reader assumed, one line each."""
    gpus = sum(g.by_class for g in r.gpus)
    nics = sum(n.by_class for n in r.nics)
    out: list[str] = []
    if gpus or nics:
        named = " and ".join(counted(n, kind) for n, kind in ((gpus, "GPU"), (nics, "NIC")) if n)
        out.append(
            f"{path}: {named} named only by PCI class and bus id (no <gpu>/<nic>,"
            " as cloud images ship NCCL_TOPO_FILE): numbered in bus-id order"
        )
    if len(r.gpus) > 1 and not any(g.gpu_links or g.switch_links for g in r.gpus):
        out.append(
            f"{path}: no <nvlink> in the file (NCCL asks the driver at run time): NVLink unknown,"
            " GPU pairs read as their PCIe path"
        )
    return out


def read_nccl_xml(path: Path, notes: list[str] | None = None) -> Topology:
    """Read an NCCL topology XML file. Raises InputFileError (see :func:`parse_nccl_xml`; one naming what the
    file is where it is another kind collbench knows: a topology YAML, an nvidia-smi paste, a graph XML)."""
    text = read_text_file(path, "an NCCL topology XML")
    try:
        check_number_lengths(text, path)
        return parse_nccl_xml(text, str(path), notes)
    except InputFileError as exc:
        raise misfiled(path, text, NCCL_XML_KIND) or exc from None
