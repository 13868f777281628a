"""`collbench layout`: ring orders (channels) and two-trees for a topology, fastest first."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from collbench.cli.console import console, err_console
from collbench.cli.render.layouts import render_layout
from collbench.errors import ConfigError
from collbench.layouts.plan import LayoutPlan, plan
from collbench.topology.io import load_topology
from collbench.topology.model import Topology
from collbench.topology.nccl_xml import read_nccl_xml
from collbench.topology.nvidia_smi import parse_nvidia_smi_topo, read_nvidia_smi_topo
from collbench.topology.sources import discover_topology
from collbench.tuning.nccl_graph import write_nccl_graph


def _source(
    from_nvidia_smi: str | None,
    from_nccl_xml: Path | None,
    from_file: Path | None,
    replay: Path | None,
    ranks: int | None,
) -> Topology:
    chosen = [
        name
        for name, value in (
            ("--from-nvidia-smi", from_nvidia_smi),
            ("--from-nccl-xml", from_nccl_xml),
            ("--from-file", from_file),
            ("--replay", replay),
        )
        if value is not None
    ]
    if len(chosen) > 1:
        raise ConfigError(f"{' and '.join(chosen)} name different sources; give one of them")
    if from_nvidia_smi is not None:
        if from_nvidia_smi == "-":
            return parse_nvidia_smi_topo(sys.stdin.read(), "<stdin>")
        return read_nvidia_smi_topo(Path(from_nvidia_smi))
    if from_nccl_xml is not None:
        return read_nccl_xml(from_nccl_xml)
    if from_file is not None:
        return load_topology(from_file)
    # The live machine: with no GPU, discover makes as many CPU ranks as asked.
    return discover_topology(nvml_replay=replay, ranks=ranks)


def layout_json(result: LayoutPlan) -> dict[str, Any]:
    """The documented ``--json`` document: rings (order, bandwidth), their total, two trees."""
    return {
        "rings": [{"order": list(c.order), "bandwidth_gbps": c.bandwidth_gbps} for c in result.channels],
        "ring_bandwidth_gbps": result.ring_bandwidth_gbps,
        "trees": [{"parent": list(t)} for t in result.layout.trees],
    }


def layout(
    from_nvidia_smi: Annotated[
        str | None,
        typer.Option("--from-nvidia-smi", metavar="FILE", help="Read the text of `nvidia-smi topo -m` ('-': stdin)."),
    ] = None,
    from_nccl_xml: Annotated[
        Path | None, typer.Option("--from-nccl-xml", metavar="FILE", help="Read an NCCL topology XML.")
    ] = None,
    from_file: Annotated[
        Path | None, typer.Option("--from-file", metavar="FILE", help="Read a topology collbench wrote (YAML/JSON).")
    ] = None,
    replay: Annotated[
        Path | None, typer.Option("--replay", metavar="FILE", help="Replay an NVML recording (discover --record).")
    ] = None,
    ranks: Annotated[
        int | None, typer.Option("--ranks", "-n", help="Lay out the first N devices (default: all of them).")
    ] = None,
    channels: Annotated[
        int | None, typer.Option("--channels", "-c", help="Number of rings (default: as many as pay off).")
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print {rings, ring_bandwidth_gbps, trees} as JSON, nothing else.")
    ] = False,
    nccl_graph_xml: Annotated[
        Path | None,
        typer.Option("--nccl-graph-xml", metavar="FILE", help="Write the rings as NCCL graph XML (NCCL_GRAPH_FILE)."),
    ] = None,
) -> None:
    """Ring orders and two-trees for a topology, fastest first."""
    if ranks is not None and ranks < 1:
        raise ConfigError(f"--ranks must be at least 1, got {ranks}")
    topo = _source(from_nvidia_smi, from_nccl_xml, from_file, replay, ranks)
    world_size = ranks if ranks is not None else len(topo.rank_devices)
    result = plan(topo, world_size, channels=channels)
    if nccl_graph_xml is not None:
        write_nccl_graph(nccl_graph_xml, result.topology, result.layout.rings, result.layout.ring_bandwidths_gbps)
        err_console.print(f"wrote NCCL graph XML to {nccl_graph_xml} (use it with NCCL_GRAPH_FILE)")
    if json_out:
        typer.echo(json.dumps(layout_json(result)))
        return
    console.print(render_layout(result))
