"""Rich rendering of a layout planned over nodes (past 2,048 ranks, ``layouts/nodes.py``): every ring as
its order of nodes, its slowest link between nodes, the trees' depths and the all-to-all's rule.

No n x n model exists at that size, so the hops are not drawn rank by rank as ``layouts.py`` draws them:
a ring is the nodes it passes, each node one stretch of its ranks.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from collbench.cli.render.layouts import MAX_HOPS_SHOWN, _gbps
from collbench.cli.render.styles import Wrapped
from collbench.layouts.nodes import NodesPlan, node_links
from collbench.layouts.trees import tree_depth
from collbench.topology.model import Topology
from collbench.units import counted


def _hosts(plan: NodesPlan, topology: Topology) -> list[str]:
    ranks = topology.rank_devices
    return [ranks[node[0]].host or topology.host for node in plan.layout.nodes]


def render_nodes_layout(plan: NodesPlan, topology: Topology) -> RenderableType:
    """The layout over nodes: its rings as orders of nodes, verdict lines for rings, trees, all-to-all."""
    layout = plan.layout
    n = sum(len(node) for node in layout.nodes)
    hosts = _hosts(plan, topology)
    links = node_links(topology, hosts)
    order = plan.node_order
    m = len(order)
    parts: list[RenderableType] = [
        Text(f"layout '{layout.name}' for {counted(n, 'rank')} on {counted(m, 'node')}, planned over nodes", "bold")
    ]
    hops = [(order[k], order[(k + 1) % m]) for k in range(m)]
    speeds = [links.between(a, b) for a, b in hops]
    slowest = min(speeds)
    for index, channel in enumerate(plan.channels):
        path = Text("  " + hosts[order[0]])
        for _, b in hops[:MAX_HOPS_SHOWN]:
            path.append(f" → {hosts[b]}")
        if m > MAX_HOPS_SHOWN:
            path.append(f"  … {m - MAX_HOPS_SHOWN} more nodes")
        parts.append(Text.assemble((f"ring {index}", "bold"), f"  {_gbps(channel.bandwidth_gbps)} GB/s"))
        parts.append(Wrapped(path))
    worst = [hop for hop, speed in zip(hops, speeds, strict=True) if speed <= slowest * (1 + 1e-9)]
    a, b = worst[0]
    where = (
        f"every link between nodes {_gbps(slowest)} GB/s per direction"
        if len(worst) == m
        else f"slowest link between nodes {hosts[a]}→{hosts[b]} ({_gbps(slowest)} GB/s)"
        + (f" and {len(worst) - 1} more as slow" if len(worst) > 1 else "")
    )
    total = sum(c.bandwidth_gbps for c in plan.channels)
    parts.append(Text.assemble(("total ring bandwidth: ", "bold"), f"{_gbps(total)} GB/s per direction"))
    rings = (
        f"{counted(len(plan.channels), 'channel')}, each an order of the nodes times each node's own chain "
        f"(as NCCL joins its rings between nodes); {where}"
        + ("; the channels share it" if len(plan.channels) > 1 else "")
    )
    parts.append(Wrapped(Text.assemble(("rings: ", "bold green"), rings)))
    depths = "/".join(str(tree_depth(t)) for t in layout.trees)
    trees = f"double binary tree over {counted(m, 'node')}, a chain inside each; depths {depths} over {n} ranks"
    parts.append(Wrapped(Text.assemble(("trees: ", "bold green"), trees)))
    if layout.exchange_by_nodes:
        exchange = (
            f"{counted(layout.exchange_round_count, 'round')} of disjoint pairs by nodes: a pair of nodes "
            f"meets in {counted(len(layout.nodes[0]), 'round')}; each rank derives its own partners"
        )
    else:
        exchange = "nodes of different sizes: the round-robin tournament's rounds, each rank its own"
    parts.append(Wrapped(Text.assemble(("all-to-all: ", "bold green"), exchange)))
    return Group(*parts)
