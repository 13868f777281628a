"""Rich rendering of a layout: every ring as a path of hops, every tree drawn as a tree, verdicts."""

from __future__ import annotations

import re
from collections import Counter

from rich.console import Group, RenderableType
from rich.text import Text
from rich.tree import Tree

from collbench.cli.render.styles import LINK_STYLES, Wrapped
from collbench.cli.render.topology import unmeasured_figures
from collbench.layouts.exchange import rank_order_shifts, round_time
from collbench.layouts.multinode import host_groups
from collbench.layouts.plan import LayoutPlan
from collbench.layouts.rings import ring_bandwidth
from collbench.layouts.trees import tree_children, tree_depth
from collbench.topology.model import LinkKind
from collbench.units import counted

# Past these, a ring prints its first hops and a count, a tree its first levels: --json has it all.
MAX_HOPS_SHOWN = 24
MAX_TREE_NODES_SHOWN = 48


def _gbps(x: float) -> str:
    return f"{x:.3g}" if x < 10 else f"{x:.1f}".rstrip("0").rstrip(".")


def _names(plan: LayoutPlan) -> list[str]:
    return [d.id for d in plan.topology.rank_devices]


def _kind_label(plan: LayoutPlan, a: int, b: int) -> str:
    """The hop's link kind, or ``inferred`` where the probe did not measure it but took the median of the
    pairs of nodes it did (``node_links``' default): a figure printed is a claim, and this one is a guess."""
    kind = plan.fabric.kinds[a][b]
    if plan.topology.node_links:
        ranks = plan.topology.rank_devices
        link = plan.topology.link(ranks[a].id, ranks[b].id)
        if link is not None and link.source == "inferred":
            return "inferred"
    return kind.value if kind else "?"


def _hop_text(plan: LayoutPlan, names: list[str], a: int, b: int, slowest: float, uniform: bool) -> Text:
    fabric = plan.fabric
    kind = fabric.kinds[a][b]
    bw = fabric.bandwidth_gbps[a][b]
    label = f"{_kind_label(plan, a, b)} {_gbps(bw)}"
    style = LINK_STYLES.get(kind, "") if kind else ""
    if bw <= slowest * (1 + 1e-9) and not uniform:
        style = f"{style} reverse".strip()
    return Text.assemble(" ─", (label, style), "→ ", names[b])


_HOP = re.compile(r"─\S+ \S+→ \S+|\S+")
"""A hop (``─nvlink 100→ GPU1``) is never broken across lines."""


def render_ring(plan: LayoutPlan, index: int) -> RenderableType:
    """One ring: ``GPU0 ─nvlink 100→ GPU1 ...``, its bandwidth and its slowest hop."""
    fabric, names = plan.fabric, _names(plan)
    channel = plan.channels[index]
    order = channel.order
    n = len(order)
    hops = [(order[k], order[(k + 1) % n]) for k in range(n)] if n > 1 else []
    head = Text.assemble((f"ring {index}", "bold"), f"  {_gbps(channel.bandwidth_gbps)} GB/s")
    if not hops:
        return Group(head, Text(f"  {names[order[0]]} (one rank: nothing to pass)"))
    slowest = min(fabric.bandwidth_gbps[a][b] for a, b in hops)
    uniform = all(fabric.bandwidth_gbps[a][b] <= slowest * (1 + 1e-9) for a, b in hops)
    path = Text("  " + names[order[0]])
    for a, b in hops[:MAX_HOPS_SHOWN]:
        path.append_text(_hop_text(plan, names, a, b, slowest, uniform))
    if len(hops) > MAX_HOPS_SHOWN:
        path.append(f"  … {len(hops) - MAX_HOPS_SHOWN} more hops")
    kinds = Counter(_kind_label(plan, a, b) for a, b in hops)
    mix = ", ".join(f"{c}x {k}" for k, c in sorted(kinds.items(), key=lambda kv: -kv[1]))
    worst = [(a, b) for a, b in hops if fabric.bandwidth_gbps[a][b] <= slowest * (1 + 1e-9)]
    a, b = worst[0]
    kind_label = _kind_label(plan, a, b)
    if len(worst) == len(hops):
        where = f"every hop {_gbps(slowest)} GB/s per direction"
    else:
        more = f" and {len(worst) - 1} more as slow" if len(worst) > 1 else ""
        where = f"slowest hop {names[a]}→{names[b]} ({kind_label}, {_gbps(slowest)} GB/s){more}"
    if channel.bandwidth_gbps < slowest * (1 - 1e-6):
        where += (
            f"; this channel gets {_gbps(channel.bandwidth_gbps)} of it (links and ports shared with other channels)"
        )
    neck = Text(f"  {where}; hops: {mix}", style="dim")
    return Group(head, Wrapped(path, tokens=_HOP), Wrapped(neck))


def _tree_renderable(parent: tuple[int, ...], names: list[str], title: str) -> Tree:
    children = tree_children(parent)
    root = parent.index(-1)
    tree = Tree(Text(title, style="bold"))
    shown = 0
    stack: list[tuple[Tree, int]] = [(tree.add(names[root]), root)]
    while stack:
        node, r = stack.pop(0)
        for c in children[r]:
            if shown >= MAX_TREE_NODES_SHOWN:
                node.add(Text(f"… {len(parent) - shown - 1} more ranks", style="dim"))
                return tree
            shown += 1
            stack.append((node.add(names[c]), c))
    return tree


def verdict_rings(plan: LayoutPlan) -> str:
    """One line: what the rings give, against rank order, and why."""
    fabric = plan.fabric
    n = fabric.n
    total = plan.ring_bandwidth_gbps
    if n == 1:
        return "one rank: no ring to run"
    naive = ring_bandwidth(fabric, tuple(range(n)), list(fabric.capacity_gbps))
    best_single = plan.channels[0].bandwidth_gbps
    parts = [f"{counted(len(plan.channels), 'channel')}, {_gbps(total)} GB/s per direction in all"]
    if naive > 0:
        ratio = best_single / naive
        parts.append(
            f"the best ring is {ratio:.2f}x rank order's ({_gbps(naive)} GB/s)"
            if ratio > 1 + 1e-6
            else "rank order is already a best ring"
        )
    else:
        parts.append("rank order has a hop with no path")
    kinds = {fabric.kinds[a][b] for a in range(n) for b in range(n) if a != b}
    if kinds == {LinkKind.NVSWITCH}:
        parts.append("a ring uses each GPU's full NVSwitch bandwidth; more channels only split it")
    hosts = host_groups(fabric)
    if len(hosts) > 1:
        parts.append(f"{len(hosts)} nodes joined through their NICs")
    else:
        sys_hops = sum(
            1
            for k in range(n)
            if fabric.kinds[plan.channels[0].order[k]][plan.channels[0].order[(k + 1) % n]] == LinkKind.SYS
        )
        if sys_hops:
            parts.append(f"crosses the socket link (sys) {counted(sys_hops, 'time')}")
    return "; ".join(parts)


def verdict_trees(plan: LayoutPlan) -> str:
    """One line on the two trees: depth, and interior ranks shared between them."""
    trees = plan.layout.trees
    if not trees:
        return "no trees"
    n = len(trees[0])
    depths = [tree_depth(t) for t in trees]
    interior = [{r for r, kids in enumerate(tree_children(t)) if kids} for t in trees]
    both = len(interior[0] & interior[1]) if len(interior) == 2 else 0
    hosts = host_groups(plan.fabric)
    shape = (
        f"double binary tree over {len(hosts)} nodes, a chain of GPUs inside each"
        if len(hosts) > 1
        else "double binary tree laid along the best ring"
    )
    return (
        f"{shape}; depths {'/'.join(map(str, depths))} over {n} ranks; {counted(both, 'rank')} interior in both trees"
    )


def verdict_exchange(plan: LayoutPlan) -> str:
    """One line on the all-to-all's exchange rounds (``topo-pairwise``): how many, and their estimated
    time against rank order's shifts (each round as long as its slowest transfer)."""
    rounds = plan.layout.exchange_rounds
    if not rounds:
        return "one rank: nothing to exchange"
    bw = plan.fabric.bandwidth_gbps
    n = len(rounds[0])
    text = f"{counted(len(rounds), 'round')} of disjoint pairs (topo-pairwise's order)"
    if len({bw[a][b] for a in range(n) for b in range(n) if a != b}) <= 1:
        return text + "; every pair is equally fast, so any order is as good"
    ours = round_time(rounds, bw)
    shifts = round_time(rank_order_shifts(n), bw, both_ways=False)
    return (
        text + f"; each round as long as its slowest pair, an estimated {shifts / ours:.2f}x the speed of "
        "rank order's shifts (pairwise) on this fabric (a model, not a measurement)"
    )


def verdict_figures(plan: LayoutPlan) -> str:
    """Where the bandwidths printed come from ("" with no link between ranks): a figure printed is a
    claim, and one nobody measured says so. The host's 10 GB/s between CPU ranks is a default, where a
    probe of the same 2 ranks measured 1.6 GB/s; layout printed both alike."""
    taken, total, kind = unmeasured_figures(plan.topology)
    if not total:
        return ""
    hint = "`collbench discover --probe -O FILE` measures them; then --topology FILE"
    if not taken:
        inferred = any(link.source == "inferred" for link in plan.topology.node_links)
        marked = " (pairs of nodes marked inferred: the median of the pairs measured)" if inferred else ""
        return f"measured by `collbench discover --probe`{marked}"
    if taken == total:
        return f"{kind}, not measured ({hint})"
    return f"{taken} of {counted(total, 'link')} not measured: {kind} ({hint})"


def render_layout(plan: LayoutPlan) -> RenderableType:
    """The whole layout: rings with their hops, the total, the trees, a verdict line for each."""
    names = _names(plan)
    parts: list[RenderableType] = [
        Text(
            f"layout '{plan.layout.name}' for {counted(plan.fabric.n, 'rank')} on {plan.topology.host}",
            style="bold",
        )
    ]
    for i in range(len(plan.channels)):
        parts.append(render_ring(plan, i))
    parts.append(
        Text.assemble(("total ring bandwidth: ", "bold"), f"{_gbps(plan.ring_bandwidth_gbps)} GB/s per direction")
    )
    if figures := verdict_figures(plan):
        parts.append(Wrapped(Text.assemble(("bandwidths: ", "bold"), figures)))
    parts.append(Wrapped(Text.assemble(("rings: ", "bold green"), verdict_rings(plan))))
    for t, parent in enumerate(plan.layout.trees):
        parts.append(_tree_renderable(parent, names, f"tree {t}"))
    parts.append(Wrapped(Text.assemble(("trees: ", "bold green"), verdict_trees(plan))))
    parts.append(Wrapped(Text.assemble(("all-to-all: ", "bold green"), verdict_exchange(plan))))
    return Group(*parts)
