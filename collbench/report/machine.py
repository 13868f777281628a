"""The machine in the report: the topology matrix, and a drawing of devices and links with the layout's
rings and trees over it.

Rank devices (GPUs, or CPU ranks) sit on a circle in rank order, NICs on an outer circle; a link's
colour is its kind and its width grows with its bandwidth (log scale: NVLink is 10-50x PCIe). Rings
are closed arrowed paths through the ranks, one colour per channel; trees are dashed arrows from child
to parent, bent towards the centre so they do not hide the links. A NIC is drawn linked only to its
closest devices (its best link kind): on an 8-GPU machine with 10 NICs the SYS paths from every NIC
to every GPU would otherwise hide everything else; the matrix keeps every pair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from collbench.report.assets import table_box
from collbench.topology.model import Device, DeviceKind, Link, LinkKind, NodeLink, Topology

KIND_COLORS = {
    LinkKind.NVLINK: "#2ca02c",
    LinkKind.NVSWITCH: "#17becf",
    LinkKind.PIX: "#1f77b4",
    LinkKind.PXB: "#6baed6",
    LinkKind.PHB: "#9467bd",
    LinkKind.NODE: "#ff7f0e",
    LinkKind.SYS: "#d62728",
    LinkKind.LOOPBACK: "#8c564b",
    LinkKind.NET: "#7f7f7f",
    LinkKind.MEASURED: "#bcbd22",
}
# Saturated and unlike any link kind's colour, so a ring stands out over the links.
RING_COLORS = ("#e6007e", "#0050b5", "#008a00", "#ff8c00", "#6a00a8", "#8b4513")
TREE_COLORS = ("#000000", "#f781bf")

MAX_MATRIX_DEVICES = 40
"""Rows and columns of the matrix: a pair per cell grows with the square of the devices (a thousand
devices would make a page of 100 MB); the devices past this are named in a note, not drawn."""
MAX_DRAWN_RANKS = 64
"""Rank devices on the drawing's circle; past this the boxes overlap and nothing can be read."""
MAX_DRAWN_NICS = 32
MAX_DRAWN_LINKS = 400
"""Links drawn, best kind first: the rest are in the matrix (or its note)."""


def _label(d: Device) -> str:
    base = f"{d.kind.value.upper()}{d.index}"
    return base if not d.host else f"{base}@{d.host}"


def _link_tip(lk: Link) -> str:
    bw = f"{lk.bandwidth_gbps:g} GB/s per direction" if lk.bandwidth_gbps else "bandwidth unknown"
    lat = f", {lk.latency_us:g} us" if lk.latency_us is not None else ""
    return f"{lk.a} - {lk.b}: {lk.kind.value} x{lk.count}, {bw}{lat} ({lk.source})"


def _left_out(what: str, shown: int, total: int) -> str:
    return "" if total <= shown else f"the first {shown} of {total} {what} shown; {total - shown} left out"


def matrix_html(topology: Topology) -> str:
    """The topology matrix as an HTML table (like ``nvidia-smi topo -m``), bandwidth under each code.

    At most :data:`MAX_MATRIX_DEVICES` rows and columns (rank devices first, then NICs): the caption
    says how many were left out."""
    every = [*topology.rank_devices, *topology.nics]
    devs = every[:MAX_MATRIX_DEVICES]
    head = "".join(f"<th>{escape(_label(d))}</th>" for d in devs)
    rows = []
    for a in devs:
        cells = []
        for b in devs:
            if a.id == b.id:
                cells.append('<td class="self">X</td>')
                continue
            lk = topology.link(a.id, b.id)
            if lk is None:
                cells.append('<td class="none">-</td>')
                continue
            # A figure nobody measured (a probe by nodes' median for pairs of nodes it left out) says so.
            guess = lk.source == "inferred"
            bw = f"<br><small>{'~' if guess else ''}{lk.bandwidth_gbps:g}</small>" if lk.bandwidth_gbps else ""
            cells.append(
                f'<td style="background:{KIND_COLORS[lk.kind]}33" title="{escape(_link_tip(lk))}">'
                f"{escape('INF' if guess else lk.matrix_code)}{bw}</td>"
            )
        rows.append(f"<tr><th>{escape(_label(a))}</th>{''.join(cells)}</tr>")
    left_out = _left_out("devices", len(devs), len(every))
    caption = "link kind per pair; GB/s per direction below" + (f" ({left_out})" if left_out else "")
    return table_box(
        f'<table class="matrix"><caption>{escape(caption)}</caption>'
        f"<thead><tr><th></th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def drawing_size(n_boxes: int) -> int:
    """The drawing's width in px for this many boxes on its circles: small for the two or four CPU
    ranks of a laptop, 520 from about eight devices up."""
    return max(240, min(520, 160 + 45 * n_boxes))


def drawing_svg(
    topology: Topology,
    rings: Sequence[Sequence[int]] = (),
    trees: Sequence[Sequence[int]] = (),
    *,
    size: int | None = None,
) -> str:
    """Devices, links (kind by colour, bandwidth by width) and the rings and trees over rank indices.

    At most :data:`MAX_DRAWN_RANKS` rank devices, :data:`MAX_DRAWN_NICS` NICs and
    :data:`MAX_DRAWN_LINKS` links are drawn; a line under the drawing says how many were left out.
    ``size`` (px) defaults to one that suits the number of boxes."""
    ranks = list(topology.rank_devices)[:MAX_DRAWN_RANKS]
    nics = list(topology.nics)[:MAX_DRAWN_NICS]
    size = size or drawing_size(len(ranks) + len(nics))
    left_out = [
        text
        for text in (
            _left_out("rank devices", len(ranks), len(topology.rank_devices)),
            _left_out("NICs", len(nics), len(topology.nics)),
        )
        if text
    ]
    cx = cy = size / 2
    # Without NICs the ranks take the outer circle themselves, so the drawing has no empty ring.
    r_rank = size * (0.30 if nics else 0.40)
    r_nic = size * 0.44
    pos: dict[str, tuple[float, float]] = {}
    for i, d in enumerate(ranks):
        a = -math.pi / 2 + 2 * math.pi * i / max(len(ranks), 1)
        pos[d.id] = (cx + r_rank * math.cos(a), cy + r_rank * math.sin(a))
    for i, d in enumerate(nics):
        a = -math.pi / 2 + 2 * math.pi * (i + 0.5) / max(len(nics), 1)
        pos[d.id] = (cx + r_nic * math.cos(a), cy + r_nic * math.sin(a))
    out = [
        "",  # the <svg> element, written once the legend below says how tall the drawing is
        "<defs>",
        *(
            f'<marker id="arrow-{name}-{i}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
            f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{color}"/></marker>'
            for name, colors in (("ring", RING_COLORS), ("tree", TREE_COLORS))
            for i, color in enumerate(colors)
        ),
        "</defs>",
    ]
    said: list[Link | NodeLink] = [*topology.links, *topology.node_links]
    bws = [lk.bandwidth_gbps for lk in said if lk.bandwidth_gbps > 0]
    lo_bw = min(bws) if bws else 1.0
    drawn = _drawn_links(topology, pos)
    if len(drawn) > MAX_DRAWN_LINKS:
        order = list(LinkKind)
        left_out.append(_left_out("links", MAX_DRAWN_LINKS, len(drawn)))
        drawn = sorted(drawn, key=lambda lk: (order.index(lk.kind), -lk.bandwidth_gbps))[:MAX_DRAWN_LINKS]
    label_links = len(drawn) <= 28 and size >= 400
    for lk in drawn:
        (x1, y1), (x2, y2) = pos[lk.a], pos[lk.b]
        width = 1.0 + 2.0 * math.log2(max(lk.bandwidth_gbps, lo_bw) / lo_bw + 1.0)
        out.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{KIND_COLORS[lk.kind]}" '
            f'stroke-width="{width:.1f}" stroke-opacity="0.45" class="link">'
            f"<title>{escape(_link_tip(lk))}</title></line>"
        )
        if label_links:
            # A figure nobody measured is marked as the matrix marks it (INF, ~ before the figure).
            guess = lk.source == "inferred"
            bw = f" {'~' if guess else ''}{lk.bandwidth_gbps:g}" if lk.bandwidth_gbps else ""
            out.append(
                f'<text x="{(x1 + x2) / 2:.1f}" y="{(y1 + y2) / 2 - 3:.1f}" text-anchor="middle" class="link-label">'
                f"{escape('INF' if guess else lk.matrix_code)}{bw}</text>"
            )
    for c, ring in enumerate(rings):
        out.append(_ring_path(ring, ranks, pos, cx, cy, c))
    for t, parents in enumerate(trees):
        out.extend(_tree_edges(parents, ranks, pos, cx, cy, t))
    for d in ranks + nics:
        x, y = pos[d.id]
        cls = "nic" if d.kind is DeviceKind.NIC else "dev"
        tip = ", ".join(
            v
            for v in (d.id, d.name or "", d.bus_id or "", f"NUMA {d.numa_node}" if d.numa_node is not None else "")
            if v
        )
        out.append(
            f'<g class="{cls}"><rect x="{x - 26:.1f}" y="{y - 12:.1f}" width="52" height="24" rx="4"/>'
            f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle">{escape(_label(d).split("@")[0])}</text>'
            f"<title>{escape(tip)}</title></g>"
        )
    legend, bottom = _legend(topology, rings, trees, size)
    out.extend(legend)
    if left_out:
        bottom += 16
        out.append(f'<text x="8" y="{bottom:.0f}" class="legend">{escape("; ".join(left_out))}</text>')
    out.append("</svg>")
    height = bottom + 8
    out[0] = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="machine" width="{size}" height="{height:.0f}" '
        f'viewBox="0 0 {size} {height:.0f}" role="img" aria-label="devices, links, rings and trees">'
    )
    return "\n".join(out)


def _drawn_links(topology: Topology, pos: dict[str, tuple[float, float]]) -> list[Link]:
    """Links between drawn devices; a NIC's only where they are of its best kind (LinkKind is best first)."""
    order = list(LinkKind)
    nic_ids = {d.id for d in topology.nics}
    best: dict[str, int] = {}
    for lk in topology.links:
        for end in (lk.a, lk.b):
            if end in nic_ids:
                best[end] = min(best.get(end, len(order)), order.index(lk.kind))
    listed = [
        lk
        for lk in topology.links
        if lk.a in pos
        and lk.b in pos
        and all(end not in nic_ids or order.index(lk.kind) == best[end] for end in (lk.a, lk.b))
    ]
    return listed + _between_hosts(topology, pos)


def _between_hosts(topology: Topology, pos: dict[str, tuple[float, float]]) -> list[Link]:
    """Links between drawn rank devices on different hosts that ``node_links`` give (said once per pair
    of hosts, not listed): drawn as a document listing every pair draws them, where the hosts' ranks
    once stood unconnected. O(drawn ranks^2), at most MAX_DRAWN_RANKS of them."""
    if not topology.node_links:
        return []
    listed = {lk.ends for lk in topology.links}
    ranks = [d for d in topology.rank_devices if d.id in pos]
    found = (
        topology.link(a.id, b.id)
        for i, a in enumerate(ranks)
        for b in ranks[i + 1 :]
        if (a.host or topology.host) != (b.host or topology.host) and frozenset((a.id, b.id)) not in listed
    )
    return [lk for lk in found if lk is not None]


def _ring_path(
    ring: Sequence[int], ranks: list[Device], pos: dict[str, tuple[float, float]], cx: float, cy: float, c: int
) -> str:
    # Each channel slightly further inside, so that several rings over the same ranks stay apart.
    shrink = 0.80 - 0.07 * (c % 5)
    color = RING_COLORS[c % len(RING_COLORS)]
    pts = []
    for r in ring:
        if r >= len(ranks):
            return ""
        x, y = pos[ranks[r].id]
        pts.append((cx + (x - cx) * shrink, cy + (y - cy) * shrink))
    segs = []
    for i, (x1, y1) in enumerate(pts):
        x2, y2 = pts[(i + 1) % len(pts)]
        segs.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{color}" stroke-width="2" '
            f'marker-end="url(#arrow-ring-{c % len(RING_COLORS)})"/>'
        )
    order = " -> ".join(str(r) for r in ring)
    return f'<g class="ring"><title>ring {c}: {order} -> {ring[0]}</title>{"".join(segs)}</g>'


def _tree_edges(
    parents: Sequence[int], ranks: list[Device], pos: dict[str, tuple[float, float]], cx: float, cy: float, t: int
) -> list[str]:
    color = TREE_COLORS[t % len(TREE_COLORS)]
    out = [f'<g class="tree"><title>tree {t}: parent of each rank {list(parents)}</title>']
    for child, parent in enumerate(parents):
        if parent < 0 or child >= len(ranks) or parent >= len(ranks):
            continue
        (x1, y1), (x2, y2) = pos[ranks[child].id], pos[ranks[parent].id]
        # Bend towards the centre (the two trees bend by different amounts).
        k = 0.35 + 0.25 * t
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        qx, qy = mx + (cx - mx) * k, my + (cy - my) * k
        out.append(
            f'<path d="M{x1:.1f},{y1:.1f} Q{qx:.1f},{qy:.1f} {x2:.1f},{y2:.1f}" fill="none" stroke="{color}" '
            f'stroke-width="1.5" stroke-dasharray="5,3" marker-end="url(#arrow-tree-{t % len(TREE_COLORS)})"/>'
        )
    out.append("</g>")
    return out


def _legend(
    topology: Topology, rings: Sequence[Sequence[int]], trees: Sequence[Sequence[int]], size: int
) -> tuple[list[str], float]:
    """The legend's marks, wrapped to the drawing's width, and the baseline of its last line."""
    items: list[tuple[str, str, bool]] = []
    said: list[Link | NodeLink] = [*topology.links, *topology.node_links]
    for kind in dict.fromkeys(lk.kind for lk in said):
        items.append((kind.value, KIND_COLORS[kind], False))
    items += [(f"ring {i}", RING_COLORS[i % len(RING_COLORS)], False) for i in range(len(rings))]
    items += [(f"tree {i} (child to parent)", TREE_COLORS[i % len(TREE_COLORS)], True) for i in range(len(trees))]
    out, x, y = [], 8.0, float(size + 14)
    for name, color, dashed in items:
        w = 34 + 6.5 * len(name)
        if x + w > size and x > 8.0:
            x, y = 8.0, y + 18
        dash = ' stroke-dasharray="5,3"' if dashed else ""
        out.append(
            f'<line x1="{x:.0f}" y1="{y - 4:.0f}" x2="{x + 22:.0f}" y2="{y - 4:.0f}" stroke="{color}" '
            f'stroke-width="3"{dash}/>'
        )
        out.append(f'<text x="{x + 26:.0f}" y="{y:.0f}" class="legend">{escape(name)}</text>')
        x += w
    return out, y
