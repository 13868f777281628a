"""A topology from NVML answers (real or replayed): GPUs, NVLink, PCIe levels, NUMA and CPU affinity.

NVML does not list NICs, so a topology from NVML has GPUs only; `--from-nvidia-smi` and
`--from-nccl-xml` describe NICs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import combinations

from collbench.errors import HardwareError
from collbench.topology.bandwidth import (
    NVML_NVLINK_VERSIONS,
    NVML_TOPOLOGY_LEVELS,
    nvlink_gbps,
    pcie_gbps,
)
from collbench.topology.bus_id import normalize_bus_id
from collbench.topology.device_order import cuda_view
from collbench.topology.model import (
    DEFAULT_BANDWIDTH_GBPS,
    Device,
    DeviceKind,
    Link,
    LinkKind,
    LinkSource,
    Topology,
)
from collbench.topology.nvml import Gpu, Nvml, NvmlUnavailableError, nvml_error_type

log = logging.getLogger(__name__)

# How many 64-bit words to ask for in the affinity masks: 16 words = 1024 CPUs, 2 words = 128 NUMA
# nodes. Fixed (not the local CPU count) so that a recording replays with the same call arguments.
CPU_SET_WORDS = 16
NODE_SET_WORDS = 2
# The NvLink loop stops at the first InvalidArgument/NotSupported; this only bounds a broken driver.
MAX_NVLINK_PROBE = 64
MAX_NVML_GPUS = 256
"""The most GPUs NVML may count on one host: the largest hosts hold 16; more is a broken driver or an
edited recording, whose every GPU and pair would be asked about."""
NVLINK_STATE_ACTIVE = 1
NVLINK_REMOTE_GPU = 0
NVLINK_REMOTE_SWITCH = 2
P2P_STATUS_OK = 0
MIG_MODE_ENABLED = 1
"""nvmlDeviceGetMigMode's current mode when on (pynvml's NVML_DEVICE_MIG_ENABLE)."""
# nvmlDeviceGetP2PStatus's read index; pynvml's NVML_P2P_CAPS_INDEX_READ is a one-element tuple by mistake.
P2P_CAPS_INDEX_READ = 0


@dataclass(slots=True)
class _GpuFacts:
    index: int
    bus_id: str | None
    name: str | None = None
    uuid: str | None = None
    memory_bytes: int | None = None
    numa_node: int | None = None
    cpus: tuple[int, ...] | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    nvlink_generation: int | None = None
    nvlink_version: str | None = None
    gpu_links: dict[str, int] = field(default_factory=dict)
    """Active links per remote GPU bus id."""
    switch_links: int = 0
    active_links: int = 0
    mig_on: bool = False


def mask_to_ids(words: list[int] | tuple[int, ...] | None) -> tuple[int, ...] | None:
    """Set bits of 64-bit mask words (word 0 = ids 0..63) as ids; None for no mask or no bits."""
    if words is None:
        return None
    ids = [w * 64 + bit for w, word in enumerate(words) for bit in range(64) if int(word) >> bit & 1]
    return tuple(ids) or None


def _gpu_facts(nvml: Nvml, i: int) -> _GpuFacts:
    g = Gpu(i)
    bus = nvml.field("nvmlDeviceGetPciInfo", g, attr="busId")
    facts = _GpuFacts(index=i, bus_id=normalize_bus_id(bus) if bus else None)
    facts.name = nvml.call("nvmlDeviceGetName", g)
    facts.uuid = nvml.call("nvmlDeviceGetUUID", g)
    total = nvml.field("nvmlDeviceGetMemoryInfo", g, attr="total")
    facts.memory_bytes = int(total) if total is not None else None
    facts.cpus = mask_to_ids(nvml.call("nvmlDeviceGetCpuAffinity", g, CPU_SET_WORDS))
    nodes = mask_to_ids(nvml.call("nvmlDeviceGetMemoryAffinity", g, NODE_SET_WORDS, 0))
    facts.numa_node = nodes[0] if nodes else None
    facts.pcie_gen = nvml.call("nvmlDeviceGetMaxPcieLinkGeneration", g)
    facts.pcie_width = nvml.call("nvmlDeviceGetMaxPcieLinkWidth", g)
    # [current, pending] (nvidia-ml-py's nvmlDeviceGetMigMode); NotSupported on GPUs without MIG (None).
    # Under MIG, CUDA and NCCL see MIG instances, not this GPU, with no peer-to-peer between them.
    mode = nvml.call("nvmlDeviceGetMigMode", g)
    facts.mig_on = isinstance(mode, list | tuple) and len(mode) > 0 and mode[0] == MIG_MODE_ENABLED
    _nvlinks(nvml, g, facts)
    return facts


def _nvlinks(nvml: Nvml, g: Gpu, facts: _GpuFacts) -> None:
    # NVML_NVLINK_MAX_LINKS is 6/12/18 by pynvml version and 36 in newer headers: ask until the driver
    # says InvalidArgument (no such link) or NotSupported (no NVLink on this GPU), both read as None.
    for link in range(MAX_NVLINK_PROBE):
        state = nvml.call("nvmlDeviceGetNvLinkState", g, link, none_on=frozenset({"INVALID_ARGUMENT"}))
        if state is None:
            break
        if state != NVLINK_STATE_ACTIVE:
            continue
        facts.active_links += 1
        version = nvml.call("nvmlDeviceGetNvLinkVersion", g, link)
        if version in NVML_NVLINK_VERSIONS:
            gen, label = NVML_NVLINK_VERSIONS[version]
            facts.nvlink_generation, facts.nvlink_version = gen, label
        remote = normalize_bus_id(nvml.field("nvmlDeviceGetNvLinkRemotePciInfo", g, link, attr="busId"))
        kind = nvml.call("nvmlDeviceGetNvLinkRemoteDeviceType", g, link)
        if kind == NVLINK_REMOTE_SWITCH:
            facts.switch_links += 1
        elif remote is not None and kind in (NVLINK_REMOTE_GPU, None):
            # Old drivers lack the remote type: a bus id that is not a GPU's is resolved later.
            facts.gpu_links[remote] = facts.gpu_links.get(remote, 0) + 1


def _pcie_link(nvml: Nvml, a: _GpuFacts, b: _GpuFacts) -> Link | None:
    level = nvml.call("nvmlDeviceGetTopologyCommonAncestor", Gpu(a.index), Gpu(b.index))
    kind = NVML_TOPOLOGY_LEVELS.get(level) if level is not None else None
    if kind is None:
        return None
    gens = [g for g in (a.pcie_gen, b.pcie_gen) if g]
    widths = [w for w in (a.pcie_width, b.pcie_width) if w]
    bw = pcie_gbps(min(gens) if gens else None, min(widths) if widths else None, kind)
    source: LinkSource = "spec"
    if bw is None:
        bw, source = DEFAULT_BANDWIDTH_GBPS[kind], "default"
    p2p = nvml.call("nvmlDeviceGetP2PStatus", Gpu(a.index), Gpu(b.index), P2P_CAPS_INDEX_READ)
    if p2p is not None and p2p != P2P_STATUS_OK:
        # Without peer-to-peer reads the data bounces through host memory and crosses the CPU whatever
        # the level says: price it like SYS on the same link.
        sys_bw = pcie_gbps(min(gens) if gens else None, min(widths) if widths else None, LinkKind.SYS)
        bw = min(bw, sys_bw if sys_bw is not None else DEFAULT_BANDWIDTH_GBPS[LinkKind.SYS])
        log.info("GPU%d-GPU%d: no P2P read (status %s); priced as a path through host memory", a.index, b.index, p2p)
    return Link(f"GPU{a.index}", f"GPU{b.index}", kind, count=1, bandwidth_gbps=bw, source=source)


def _nvlink_link(a: _GpuFacts, b: _GpuFacts, gpu_bus_ids: set[str]) -> Link | None:
    direct = a.gpu_links.get(b.bus_id or "", 0) if b.bus_id else 0
    direct = max(direct, b.gpu_links.get(a.bus_id or "", 0) if a.bus_id else 0)
    # Links to a bus id that is no GPU's (old drivers give no remote type) go to a switch.
    a_switch = a.switch_links + sum(n for bus, n in a.gpu_links.items() if bus not in gpu_bus_ids)
    b_switch = b.switch_links + sum(n for bus, n in b.gpu_links.items() if bus not in gpu_bus_ids)
    gens = [g for g in (a.nvlink_generation, b.nvlink_generation) if g]
    gen = min(gens) if gens else None
    # Through NVSwitches every pair gets the bandwidth of a GPU's switch links (the smaller side's).
    switched = min(a_switch, b_switch)
    if switched > direct:
        return Link(f"GPU{a.index}", f"GPU{b.index}", LinkKind.NVSWITCH, switched, nvlink_gbps(gen, switched))
    if direct > 0:
        return Link(f"GPU{a.index}", f"GPU{b.index}", LinkKind.NVLINK, direct, nvlink_gbps(gen, direct))
    return None


def _device(f: _GpuFacts, host: str) -> Device:
    extra: list[tuple[str, str]] = []
    if f.pcie_gen is not None:
        extra.append(("pcie_gen", str(f.pcie_gen)))
    if f.pcie_width is not None:
        extra.append(("pcie_width", str(f.pcie_width)))
    if f.active_links:
        extra.append(("nvlink_links", str(f.active_links)))
        if f.nvlink_version is not None:
            extra.append(("nvlink_version", f.nvlink_version))
        if f.nvlink_generation is not None:
            extra.append(("nvlink_generation", str(f.nvlink_generation)))
    if f.switch_links:
        extra.append(("nvswitch_links", str(f.switch_links)))
    if f.mig_on:
        extra.append(("mig", "on"))
    return Device(
        id=f"GPU{f.index}",
        kind=DeviceKind.GPU,
        index=f.index,
        name=f.name,
        bus_id=f.bus_id,
        numa_node=f.numa_node,
        cpus=f.cpus,
        memory_bytes=f.memory_bytes,
        uuid=f.uuid,
        host=host,
        extra=tuple(extra),
    )


def topology_from_nvml(nvml: Nvml, host: str) -> Topology:
    """Describe the GPUs NVML sees: devices, and one link per GPU pair (NVLink, NVSwitch or PCIe level).

    Returns a topology with no devices when NVML counts no GPU. Raises NvmlUnavailableError when
    NVML cannot be initialised, and pynvml.NVMLError when the driver fails in an unexpected way.
    """
    count = nvml.call("nvmlDeviceGetCount") or 0
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_NVML_GPUS:
        # Asked of every GPU and pair in turn: a count of 10^30 (an edited recording) never ended.
        raise HardwareError(f"NVML counts {count!r} GPUs; one host holds 0 to {MAX_NVML_GPUS}")
    facts = [_gpu_facts(nvml, i) for i in range(count)]
    gpu_bus_ids = {f.bus_id for f in facts if f.bus_id}
    links: list[Link] = []
    for a, b in combinations(facts, 2):
        link = _nvlink_link(a, b, gpu_bus_ids) or _pcie_link(nvml, a, b)
        if link is not None:
            links.append(link)
        else:
            log.info("GPU%d-GPU%d: NVML gives neither NVLink nor a PCIe level; no link", a.index, b.index)
    driver = nvml.call("nvmlSystemGetDriverVersion")
    note = f"NVML, driver {driver}" if driver else "NVML"
    return Topology(
        host=host,
        devices=tuple(_device(f, host) for f in facts),
        links=tuple(links),
        source="nvml",
        note=note,
    )


def _local_nvml() -> Nvml | None:
    """This machine's NVML through pynvml, or None where pynvml is not installed."""
    from collbench.topology import nvml as nvml_seam  # looked up when called, so a test's fake backend is used

    try:
        return Nvml(nvml_seam.PynvmlBackend())
    except ImportError:
        return None


def driver_version() -> str:
    """The NVIDIA driver's version (``570.86.15``), or empty where NVML cannot say."""
    nvml = _local_nvml()
    if nvml is None:
        return ""
    try:
        return str(nvml.call("nvmlSystemGetDriverVersion") or "")
    except NvmlUnavailableError:
        return ""
    except nvml_error_type():  # a driver that cannot report its version is not worth failing a run
        log.debug("NVML gave no driver version", exc_info=True)
        return ""
    finally:
        nvml.shutdown()


def free_memory_bytes(env: Mapping[str, str]) -> list[int]:
    """Free memory of each GPU CUDA would number 0, 1, ... under ``env`` (CUDA_VISIBLE_DEVICES), via NVML.

    Empty where NVML cannot say. NVML, not CUDA: asking CUDA would create a context in the calling
    process on a GPU that ranks started later need. Raises ConfigError (through ``cuda_view``) for a
    CUDA_VISIBLE_DEVICES that names no GPU here.
    """
    nvml = _local_nvml()
    if nvml is None:
        return []
    try:
        count = int(nvml.call("nvmlDeviceGetCount") or 0)
        gpus = [
            Device(
                id=f"GPU{i}",
                kind=DeviceKind.GPU,
                index=i,
                name=nvml.call("nvmlDeviceGetName", Gpu(i)),
                bus_id=normalize_bus_id(nvml.field("nvmlDeviceGetPciInfo", Gpu(i), attr="busId")),
                uuid=nvml.call("nvmlDeviceGetUUID", Gpu(i)),
            )
            for i in range(count)
        ]
        free = [nvml.field("nvmlDeviceGetMemoryInfo", Gpu(d.index), attr="free") for d in cuda_view(gpus, env).devices]
    except (NvmlUnavailableError, nvml_error_type()):
        return []
    finally:
        nvml.shutdown()
    return [int(f) for f in free if f is not None]
