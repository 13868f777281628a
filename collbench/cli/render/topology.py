"""Rich rendering of a topology: a matrix that reads like ``nvidia-smi topo -m``, then a short summary."""

from __future__ import annotations

import statistics
from collections import Counter

from rich.console import Group, RenderableType
from rich.text import Text

from collbench.cli.render.styles import LINK_STYLES, SplitTable
from collbench.profile.document import machine_fingerprint
from collbench.topology.cpu_list import format_cpu_list
from collbench.topology.model import Device, Link, LinkKind, Topology
from collbench.units import counted

# Wider matrices stop being readable in a terminal; --json lists every device.
MAX_MATRIX_DEVICES = 16


def _cell(link: Link | None, bandwidth: bool) -> Text:
    if link is None:
        return Text("")
    label = f"{round(link.bandwidth_gbps, 1):g}" if bandwidth else link.matrix_code
    # A figure the probe did not measure but stands in for (the median of the node pairs it did): a
    # number printed is a claim, and this one is marked as a guess (the summary says so in words).
    if link.source == "inferred":
        label = "~" + label if bandwidth else "INF"
    return Text(label, style=LINK_STYLES.get(link.kind, ""))


def _numa_text(d: Device) -> str:
    if d.numa_node is not None:
        return str(d.numa_node)
    return d.get("numa_affinity") or "N/A"


def unmeasured_figures(topo: Topology) -> tuple[int, int, str]:
    """Of the links between rank devices (and between hosts): how many carry figures nobody measured, how
    many there are, and what those figures are ('documented defaults per link kind' for a pasted
    matrix or the host's CPU ranks, 'nominal figures per link kind' for NVML's and NCCL XML's). A figure
    printed is a claim: discover --bandwidth and layout say which of theirs are measured."""
    ranks = {d.id for d in topo.rank_devices}
    sources = Counter(link.source for link in topo.links if link.a in ranks and link.b in ranks)
    sources.update(link.source for link in topo.node_links)
    what = "documented defaults per link kind" if sources["default"] else "nominal figures per link kind"
    return sources["default"] + sources["spec"], sum(sources.values()), what


def topology_matrix(topo: Topology, *, bandwidth: bool = False) -> SplitTable:
    """The device x device table: link codes (NV#, PIX, ... SYS) or, with ``bandwidth``, GB/s per direction."""
    ranks = list(topo.rank_devices[:MAX_MATRIX_DEVICES])
    nics = list(topo.nics[:MAX_MATRIX_DEVICES])
    cols = ranks + nics
    title = "GB/s per direction" if bandwidth else "link between devices"
    taken, total, what = unmeasured_figures(topo)
    if bandwidth and total:
        # 100 for NV4 read as a measurement; the summary said '(documented default)' of CPU ranks only.
        if not taken:
            title += ", measured"
        else:
            title += f": {what}, not measured" if taken == total else f" ({taken} of {total} links not measured)"
    # Wider than the terminal (8 GPUs and 10 NICs need about 130 columns), the matrix prints in blocks
    # of columns that each repeat the row's device, never a cell cut short.
    table = SplitTable(title=title, box=None, pad_edge=False, header_style="bold", keep=1)
    table.add_column("", no_wrap=True)
    for d in cols:
        table.add_column(d.id, justify="center", no_wrap=True)
    table.add_column("CPU\nAffinity", no_wrap=True)
    table.add_column("NUMA\nAffinity", no_wrap=True)
    for row in cols:
        cells: list[RenderableType] = [Text(row.id, style="bold")]
        for col in cols:
            cells.append(Text("X") if col.id == row.id else _cell(topo.link(row.id, col.id), bandwidth))
        cells.append(format_cpu_list(row.cpus))
        cells.append(_numa_text(row))
        table.add_row(*cells)
    return table


def _links_from_matrix(topo: Topology) -> dict[str, str]:
    """NVLinks per GPU when the source gives only the matrix: NV# summed over peers, or the switch count.

    One pass over the links: a scan per GPU would be cubic in the GPU count."""
    links: dict[str, list[Link]] = {}
    for lk in topo.links:
        if lk.kind.is_nvlink:
            links.setdefault(lk.a, []).append(lk)
            links.setdefault(lk.b, []).append(lk)
    return {
        gpu: str(max(lk.count for lk in its))
        if any(lk.kind == LinkKind.NVSWITCH for lk in its)
        else str(sum(lk.count for lk in its))
        for gpu, its in links.items()
    }


def _gpu_summary(topo: Topology) -> list[str]:
    gpus = topo.gpus
    names = Counter(d.name or "GPU (model unknown)" for d in gpus)
    lines = ["GPUs: " + ", ".join(f"{n} x {name}" for name, n in names.items())]
    from_matrix = _links_from_matrix(topo)
    links_per_gpu = Counter(d.get("nvlink_links") or from_matrix.get(d.id, "0") for d in gpus)
    links_per_gpu.pop("0", None)
    gens = Counter(d.get("nvlink_version") or d.get("nvlink_generation") for d in gpus if d.get("nvlink_links"))
    kinds = {lk.kind for lk in topo.links if lk.a.startswith("GPU") and lk.b.startswith("GPU")}
    if links_per_gpu or any(k.is_nvlink for k in kinds):
        gen = ", ".join(str(g) for g in gens if g) or "unknown"
        per = "/".join(str(n) for n in sorted(links_per_gpu, key=lambda s: int(s or 0))) or "?"
        via = " through NVSwitch" if LinkKind.NVSWITCH in kinds else ""
        lines.append(f"NVLink: version {gen}, {per} links per GPU{via}")
    elif topo.source == "nccl-xml" and len(gpus) > 1:
        # An NCCL XML names NVLink only where someone dumped it with the driver's answers; cloud images'
        # NCCL_TOPO_FILEs leave it out (NCCL asks the driver at run time): absence is not "none".
        lines.append("NVLink: unknown (the XML names none; NCCL asks the driver at run time)")
    else:
        lines.append("NVLink: none (GPUs talk over PCIe)")
    pcie = Counter(
        f"gen{d.get('pcie_gen')} x{d.get('pcie_width')}" for d in gpus if d.get("pcie_gen") and d.get("pcie_width")
    )
    lines.append("PCIe: " + (", ".join(pcie) if pcie else "generation and width unknown"))
    numa = sorted({d.numa_node for d in gpus if d.numa_node is not None})
    affinity = sorted({d.get("numa_affinity") or "" for d in gpus} - {""})
    if numa:
        lines.append(f"NUMA nodes: {len(numa)} ({', '.join(map(str, numa))})")
    elif affinity:
        lines.append(f"NUMA affinity: {', '.join(affinity)}")
    else:
        lines.append("NUMA nodes: unknown")
    mig = [d.id for d in gpus if d.get("mig") == "on"]
    if mig:
        # NVIDIA's MIG user guide, limitations: no GPU-to-GPU P2P (PCIe or NVLink) under MIG.
        which = ", ".join(mig) if len(mig) <= 2 else f"{len(mig)} GPUs"
        lines.append(f"MIG: on for {which}: CUDA and NCCL see MIG instances there,")
        lines.append("  with no peer-to-peer between them: the links above are the whole GPUs'")
    if topo.nics:
        nics = []
        for n in topo.nics:
            speed = n.get("speed_gbps")
            nics.append(n.id + (f"={n.name}" if n.name else "") + (f" ({speed} GB/s)" if speed else ""))
        lines.append(f"NICs: {len(nics)}: " + ", ".join(nics))
    return lines


def _host_summary(topo: Topology) -> list[str]:
    cpus = topo.cpus
    first = cpus[0] if cpus else None
    lines: list[str] = []
    # A probe under a launcher names its devices by rank ('rank 0') and records no host facts (what
    # this process could discover is rank 0's host alone): that is no CPU model, and '? cores' says less
    # than saying nothing was described.
    described = first is not None and any(first.get(k) for k in ("host_cores", "host_numa_nodes", "host_memory_bytes"))
    if first is not None and not described and topo.source == "probe":
        hosts = len({d.host for d in cpus})
        lines.append(f"Host: not described (the probe measured links between ranks only), {counted(hosts, 'host')}")
    elif first is not None:
        cores = first.get("host_cores") or "?"
        nodes = first.get("host_numa_nodes") or "?"
        mem = first.get("host_memory_bytes")
        mem_text = f", {int(mem) / 2**30:.1f} GiB memory" if mem else ""
        # A topology's extra facts are text (host.py stores the count as str): read the number back.
        numa = counted(int(nodes), "NUMA node") if nodes.isdigit() else f"{nodes} NUMA nodes"
        # One core is what a rank bound to a core sees (mpirun -np 2 binds each rank to one): '1 cores'.
        core_text = counted(int(cores), "core") if cores.isdigit() else f"{cores} cores"
        lines.append(f"Host: {first.name or 'CPU model unknown'}, {core_text}, {numa}{mem_text}")
    bw = {lk.bandwidth_gbps for lk in topo.links if lk.kind == LinkKind.LOOPBACK}
    bw_text = f", {'/'.join(f'{b:g}' for b in sorted(bw))} GB/s between ranks (documented default)" if bw else ""
    lines.append(f"CPU ranks: {len(cpus)} (backend gloo){bw_text}")
    return lines


def _range(values: list[float], unit: str) -> str:
    """``1.24 GB/s`` for one value (or several alike), ``1.1-1.3 GB/s (median 1.2)`` for a spread."""
    low, high, mid = (f"{v:.4g}" for v in (min(values), max(values), statistics.median(values)))
    return f"{low} {unit}" if low == high else f"{low}-{high} {unit} (median {mid})"


def _spread(spreads: list[float | None]) -> list[str]:
    """How sure the bandwidths are: the spread of each pair's repeats ((max - min) / median), where the
    probe recorded it (a file from before did not)."""
    known = [s for s in spreads if s is not None]
    if not known:
        return []
    mid, top = statistics.median(known), max(known)
    return [f"  repeats of a pair spread {mid:.1f}% (median), {top:.1f}% at most"]


def _measured_summary(topo: Topology) -> list[str]:
    """What --probe measured between the ranks: its pairs' bandwidth and latency, their range where
    there are several. The matrix says only MEAS per pair (the figures needed --bandwidth or the file)."""
    links = [lk for lk in topo.links if lk.source == "measured"]
    between = [nl for nl in topo.node_links if nl.source == "measured"]
    if not links and not between:
        return []
    lines: list[str] = []
    if links:
        within = " of ranks measured within nodes" if topo.node_links else " measured"
        bandwidth = _range([lk.bandwidth_gbps for lk in links], "GB/s per direction")
        lines.append(f"probe: {counted(len(links), 'pair')}{within}, {bandwidth}")
        lines += _spread([lk.spread_pct for lk in links])
        latencies = [lk.latency_us for lk in links if lk.latency_us is not None]
        if latencies:
            lines.append(f"  latency {_range(latencies, 'us')}")
    if between:
        lines.append(f"probe: {counted(len(between), 'pair')} of nodes measured, one pair of ranks each")
        lines.append("  " + _range([nl.bandwidth_gbps for nl in between], "GB/s per direction"))
        lines += _spread([nl.spread_pct for nl in between])
        latencies = [nl.latency_us for nl in between if nl.latency_us is not None]
        if latencies:
            lines.append(f"  latency {_range(latencies, 'us')}")
    default = topo.default_node_link
    if default is not None and default.source == "inferred":
        hosts = len({d.host or topo.host for d in topo.rank_devices})
        left = hosts * (hosts - 1) // 2 - (len(topo.node_links) - 1)
        pairs = "pair" if left == 1 else "pairs"
        lines.append(
            f"  {left:,} other {pairs} of nodes inferred: {default.bandwidth_gbps:.4g} GB/s (INF, ~ in the matrix)"
        )
    return lines


def topology_summary(topo: Topology) -> list[str]:
    """Short lines: GPU model and count, NVLink, PCIe, NUMA, NICs (or the host and its CPU ranks), and
    what --probe measured."""
    lines = _gpu_summary(topo) if topo.gpus else _host_summary(topo)
    lines += _measured_summary(topo)
    cut = [
        f"{MAX_MATRIX_DEVICES} of {count} {what}"
        for count, what in ((len(topo.rank_devices), "rank devices"), (len(topo.nics), "NICs"))
        if count > MAX_MATRIX_DEVICES
    ]
    if cut:
        lines.append(f"(the matrix shows {' and '.join(cut)}; --json lists all)")
    lines.append(f"source: {topo.source}, host: {topo.host}")
    # Two fingerprints, named for what carries each: result rows name these rank devices, a profile
    # names the machine whatever rank count it was tuned at (profile.document.machine_fingerprint).
    ranks = len(topo.rank_devices)
    lines.append(
        f"fingerprints: topology {topo.fingerprint} ({ranks} rank{'s' if ranks != 1 else ''}; in result rows), "
        f"machine {machine_fingerprint(topo)} (in profiles)"
    )
    return lines


def render_topology(topo: Topology, *, bandwidth: bool = False) -> RenderableType:
    """Everything `collbench discover` prints: the note (why no GPU), the matrix, the summary."""
    parts: list[RenderableType] = []
    if topo.note and topo.source == "host":
        parts.append(Text(topo.note, style="yellow"))
    parts.append(topology_matrix(topo, bandwidth=bandwidth))
    parts.append(Text(""))
    parts.extend(Text(line) for line in topology_summary(topo))
    return Group(*parts)
