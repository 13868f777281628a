"""`collbench layout`: ring orders (channels) and two-trees for a topology, fastest first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from collbench.cli.console import console, err_console
from collbench.cli.topology_source import (
    FromFile,
    FromNcclXml,
    FromNvidiaSmi,
    Replay,
    TopologyFile,
    one_file,
    read_topology,
)
from collbench.fileio import check_writable
from collbench.filekinds import refuse_replacing, refuse_replacing_record
from collbench.units import check_ranks

if TYPE_CHECKING:
    from collbench.layouts.plan import LayoutPlan
    from collbench.topology.model import Topology


def layout_json(result: LayoutPlan) -> dict[str, Any]:
    """The documented ``--json`` document: rings (order, bandwidth), their total, two trees, and the
    all-to-all's exchange rounds (per round, each rank's partner; the rank itself when idle)."""
    return {
        "rings": [{"order": list(c.order), "bandwidth_gbps": c.bandwidth_gbps} for c in result.channels],
        "ring_bandwidth_gbps": result.ring_bandwidth_gbps,
        "trees": [{"parent": list(t)} for t in result.layout.trees],
        "exchange_rounds": [list(r) for r in result.layout.exchange_rounds],
    }


def layout(
    from_nvidia_smi: FromNvidiaSmi = None,
    from_nccl_xml: FromNcclXml = None,
    from_file: FromFile = None,
    topology: TopologyFile = None,
    replay: Replay = None,
    ranks: Annotated[
        int | None, typer.Option("--ranks", help="Lay out the first N devices (default: all of them).")
    ] = None,
    channels: Annotated[
        int | None, typer.Option("--channels", help="Number of rings (default: as many as pay off).")
    ] = None,
    json_out: Annotated[
        bool,
        typer.Option(
            "--json", help="Print {rings, ring_bandwidth_gbps, trees, exchange_rounds} as JSON, nothing else."
        ),
    ] = False,
    nccl_graph_xml: Annotated[
        Path | None,
        typer.Option("--nccl-graph-xml", metavar="FILE", help="Write the rings as NCCL graph XML (NCCL_GRAPH_FILE)."),
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace a file already at --nccl-graph-xml (never a profile).")
    ] = False,
) -> None:
    """Ring orders and two-trees for a topology, fastest first."""
    file_flag, from_file = one_file(from_file, topology)
    if ranks is not None:
        check_ranks(ranks, 1, "layout")
    if nccl_graph_xml is not None:
        check_writable(nccl_graph_xml)  # a name past 255 bytes was an OSError's traceback, before
        refuse_replacing_record(nccl_graph_xml, "an NCCL graph XML")
        # A job may be reading the graph it replaced (NCCL_GRAPH_FILE), as export nccl-plugin refuses a build.
        refuse_replacing(nccl_graph_xml, overwrite, option="--nccl-graph-xml")
    topo = read_topology(
        from_nvidia_smi=from_nvidia_smi,
        from_nccl_xml=from_nccl_xml,
        from_file=from_file,
        replay=replay,
        ranks=ranks,
        file_flag=file_flag,
    )
    world_size = ranks if ranks is not None else len(topo.rank_devices)
    from collbench.layouts.fabric import MAX_LAYOUT_RANKS

    if world_size > MAX_LAYOUT_RANKS:
        _over_nodes(topo, world_size, channels, json_out, nccl_graph_xml)
        return
    from collbench.cli.render.layouts import render_layout
    from collbench.exporters.nccl_graph import write_nccl_graph
    from collbench.layouts.plan import plan

    result = plan(topo, world_size, channels=channels)
    if nccl_graph_xml is not None:
        write_nccl_graph(nccl_graph_xml, result.topology, result.layout.rings, result.layout.ring_bandwidths_gbps)
        err_console.print(f"wrote NCCL graph XML to {nccl_graph_xml} (use it with NCCL_GRAPH_FILE)")
    if json_out:
        typer.echo(json.dumps(layout_json(result)))
        return
    console.print(render_layout(result))


def _over_nodes(topo: Topology, world_size: int, channels: int | None, json_out: bool, graph: Path | None) -> None:
    """Past 2,048 ranks: the layout planned over nodes (``layouts/nodes.py``), no n x n model. Its
    all-to-all is a rule each rank derives (``exchange_by_nodes``), so ``exchange_rounds`` is empty."""
    from collbench.errors import ConfigError
    from collbench.layouts.nodes import plan_over_nodes
    from collbench.layouts.plan import check_request

    if graph is not None:
        raise ConfigError(
            f"--nccl-graph-xml is written for layouts of at most 2,048 ranks; {world_size} are planned over nodes"
        )
    check_request(topo, world_size, channels)
    sub = topo.subset(world_size) if world_size < len(topo.rank_devices) else topo
    result = plan_over_nodes(sub, channels=channels)
    if json_out:
        typer.echo(
            json.dumps(
                {
                    "rings": [{"order": list(c.order), "bandwidth_gbps": c.bandwidth_gbps} for c in result.channels],
                    "ring_bandwidth_gbps": sum(c.bandwidth_gbps for c in result.channels),
                    "trees": [{"parent": list(t)} for t in result.layout.trees],
                    "exchange_rounds": [],  # the rule by nodes, which each rank derives: no table
                }
            )
        )
        return
    from collbench.cli.render.layouts_nodes import render_nodes_layout

    console.print(render_nodes_layout(result, sub))
