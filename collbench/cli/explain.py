"""`collbench explain ALGO`: an algorithm's schedule on a whiteboard, step by step, and its cost terms."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from collbench.cli.console import console
from collbench.cli.options import one_value
from collbench.cli.render.schedules import render_explain
from collbench.errors import ConfigError
from collbench.layouts.model import Layout
from collbench.models.costs import cost_terms
from collbench.models.crossover import time_crossings
from collbench.schedules.algorithms.hierarchical import hierarchical_terms
from collbench.schedules.analysis import ScheduleStats, schedule_stats
from collbench.schedules.ops import DTYPE_SIZES, Op, parse_dtype
from collbench.schedules.registry import get_algorithm
from collbench.schedules.spec import MAX_SEGMENTS
from collbench.schedules.whiteboard import Whiteboard, build_whiteboard, rank_letter
from collbench.units import MAX_BYTES, check_nodes, check_ranks, parse_size

MAX_BOARD_RANKS = 32
MAX_BOARD_PIECES = 64
MAX_EXPLAIN_RANKS = 256
"""The largest world explain builds: schedules grow with ranks squared, and --ranks 1000 runs for minutes."""
MAX_ALPHA_US = 1e6
"""The largest illustrative --alpha-us: a second a step."""
MIN_LINK_GBPS, MAX_LINK_GBPS = 1e-3, 1e4
"""The illustrative --link-gbps: from 1 MB/s to 10 TB/s a port."""


def _stats_dict(stats: ScheduleStats, size_bytes: int, cost: Estimate) -> dict[str, Any]:
    return {
        "size_bytes": size_bytes,
        "steps": stats.steps,
        "max_steps_per_rank": stats.max_steps_per_rank,
        "bytes_sent_per_rank": list(stats.bytes_sent_per_rank),
        "max_bytes_sent_per_rank": stats.max_bytes_sent_per_rank,
        "busiest_link_bytes": stats.busiest_link_bytes,
        "busiest_link": list(stats.busiest_link) if stats.busiest_link else None,
        "busiest_port_bytes": stats.busiest_port_bytes,
        "total_bytes": stats.total_bytes,
        "cost_steps": cost.steps,
        "cost_port_bytes": cost.port_bytes,
        "estimate_us": round(cost.time_us, 3),
    }


@dataclass(frozen=True, slots=True)
class Estimate:
    """An algorithm's closed-form cost at one size (its spec's formula, the one ``fit`` and ``predict``
    use): steps and bytes through the busiest port, step by step along the critical path, and their
    time at explain's illustrative latency and port bandwidth (reductions free)."""

    steps: float
    port_bytes: float
    time_us: float


def estimate(
    op: Op,
    algo: str,
    world_size: int,
    size_bytes: float,
    segments: int,
    alpha_us: float,
    link_gbps: float,
    *,
    nodes: int | None = None,
) -> Estimate:
    """``algo`` doing ``op`` at ``size_bytes`` with ``alpha_us`` per step and one full-duplex port of
    ``link_gbps`` (GB/s) per rank. An algorithm that needs nodes is priced on ``nodes`` equal nodes,
    its steps inside and across them added at explain's one latency and port (one link class)."""
    spec = get_algorithm(algo)
    if spec.needs_nodes and nodes is not None and world_size > 1:
        inside, across = hierarchical_terms(op, nodes, world_size // nodes, size_bytes)
        terms = inside + across
    else:
        segs = segments if spec.segmented else 1
        terms = cost_terms(op, algo, world_size, size_bytes, segments=segs)
    return Estimate(terms.alpha, terms.beta, terms.time_us(alpha_us, 1.0 / (link_gbps * 1e3), 0.0))


CROSSOVER_SEARCH_BYTES = (1.0, float(1 << 40))
"""The sizes explain searches for a crossover with ``direct``: a byte to a TiB."""


def baseline_for(op: Op, algo: str) -> str | None:
    """The simplest algorithm explain sets ``algo`` beside: ``direct`` (all through one root) where it
    does the op, else ``linear`` (every block straight to its rank) for the block ops; None for the
    others (send/recv, barrier) and for the baseline itself."""
    for name in ("direct", "linear"):
        if op in get_algorithm(name).ops:
            return None if name == algo else name
    return None


def crossover_with_direct(
    op: Op,
    algo: str,
    world_size: int,
    segments: int,
    alpha_us: float,
    link_gbps: float,
    *,
    baseline: str = "direct",
    nodes: int | None = None,
) -> tuple[int, bool] | None:
    """Where ``algo`` and ``baseline`` (``direct`` unless given) cost the same, and whether ``algo`` is
    the faster one above it (None when one of them is faster at every size searched)."""

    def mine(size: float) -> float:
        return estimate(op, algo, world_size, size, segments, alpha_us, link_gbps, nodes=nodes).time_us

    def theirs(size: float) -> float:
        return estimate(op, baseline, world_size, size, 1, alpha_us, link_gbps).time_us

    found = time_crossings(mine, theirs, *CROSSOVER_SEARCH_BYTES)
    if not found:
        return None
    top = CROSSOVER_SEARCH_BYTES[1]
    return found[0], mine(top) < theirs(top)


def board_dict(board: Whiteboard) -> dict[str, Any]:
    letters = board.letters
    return {
        "ranks": list(letters),
        "pieces": [list(p) for p in board.pieces],
        "initial": [list(row) for row in board.initial],
        "steps": [
            {
                "step": step.index,
                "labels": list(step.labels),
                "moves": [
                    {
                        "from": rank_letter(m.src),
                        "to": rank_letter(m.dst),
                        "src_rank": m.src,
                        "dst_rank": m.dst,
                        "pieces": list(m.pieces),
                        "from_pieces": list(m.from_pieces or m.pieces),
                        "elements": m.elements,
                        "reduce": m.reduce,
                    }
                    for m in step.moves
                ],
                "holds": [list(row) for row in step.holdings],
            }
            for step in board.steps
        ],
    }


def _node_layout(algo: str, ranks: int, nodes: int | None, *, needs_nodes: bool) -> Layout | None:
    """The layout of ``nodes`` equal nodes, ranks in order (explain has no topology to place them by),
    or None without --nodes. Raises ConfigError for a count that does not split the ranks evenly, and
    for an algorithm that needs nodes given fewer than two, saying why."""
    if nodes is None:
        if needs_nodes:
            raise ConfigError(
                f"{algo} needs ranks on two or more nodes: give --nodes M (2 or more, dividing --ranks) to draw "
                "it; `collbench predict --hierarchy K` prices it at scale, `collbench sweep --topology FILE` "
                "of several hosts measures it"
            )
        return None
    if not 1 <= nodes <= ranks or ranks % nodes:
        raise ConfigError(
            f"--nodes {nodes} does not split --ranks {ranks} into equal nodes (explain places ranks node by "
            "node, the same count on each); give a divisor of --ranks"
        )
    if needs_nodes and nodes < 2:
        raise ConfigError(
            f"--nodes 1: {algo} needs ranks on two or more nodes; on one node it is a ring (`collbench explain "
            "ring` draws it)"
        )
    k = ranks // nodes
    blocks = tuple(tuple(range(i * k, (i + 1) * k)) for i in range(nodes))
    return Layout(nodes=blocks, name=f"{nodes} nodes of {k}")


def explain(
    algo: Annotated[str, typer.Argument(help="Algorithm: ring, tree, two-tree, recursive-doubling, ...")],
    op: Annotated[
        str, typer.Option("--op", metavar="OP", help="One collective: all-reduce, reduce-scatter, all-gather, ...")
    ] = "all-reduce",
    ranks: Annotated[int, typer.Option("--ranks", help="World size.")] = 4,
    count: Annotated[
        int | None, typer.Option("--count", help="Elements on the whiteboard (default: ranks x segments).")
    ] = None,
    root: Annotated[
        int,
        typer.Option(
            "--root", metavar="RANK", help="Root rank of broadcast/reduce/scatter/gather (and direct's server)."
        ),
    ] = 0,
    segments: Annotated[int, typer.Option("--segments", "-s", help="Pipeline segments (tree, two-tree).")] = 1,
    size: Annotated[
        str, typer.Option("--size", metavar="SIZE", help="Message size for the totals (K/M/G = 1024^n).")
    ] = "1M",
    dtype: Annotated[
        str, typer.Option("--dtype", "-d", metavar="TYPE", help="Element type for the totals.")
    ] = "float32",
    alpha_us: Annotated[
        float, typer.Option("--alpha-us", metavar="US", help="Illustrative latency per step (us).")
    ] = 5.0,
    link_gbps: Annotated[
        float, typer.Option("--link-gbps", metavar="G", help="Illustrative bandwidth of each rank's port (GB/s).")
    ] = 10.0,
    nodes: Annotated[
        int | None,
        typer.Option("--nodes", help="Nodes the ranks are on, in equal blocks of rank order (hierarchical needs 2+)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of the whiteboard.")] = False,
) -> None:
    """Show an algorithm's schedule step by step, with its cost terms."""
    spec = get_algorithm(algo)
    the_op = Op.parse(one_value(op, "--op", "collective") or "all-reduce")
    check_ranks(ranks, 1, "explain")
    if nodes is not None:
        check_nodes(nodes, "explain")
    if ranks > MAX_EXPLAIN_RANKS:
        raise ConfigError(
            f"--ranks {ranks} is more than explain shows ({MAX_EXPLAIN_RANKS}); "
            "use `collbench predict` for large worlds"
        )
    if not 1 <= segments <= MAX_SEGMENTS:
        # Each segment is a step of every rank: 100,000 took 141 s and 1 GB, 10,000,000 ran out of memory.
        raise ConfigError(
            f"--segments must be 1 to {MAX_SEGMENTS} (the most a pipelined schedule is cut in), got {segments}"
        )
    # `not (x >= 0)` also refuses nan, which every comparison lets through.
    # Bounded as --size is: --alpha-us 1e308 printed '~inf us', --link-gbps 1e-300 a 77-digit time cut at
    # the 80th column. A second a step and 1 MB/s a port are slower than any link.
    if not (math.isfinite(alpha_us) and 0 <= alpha_us <= MAX_ALPHA_US):
        raise ConfigError(f"--alpha-us must be a number of us from 0 to {MAX_ALPHA_US:,.0f}, got {alpha_us:g}")
    if not (math.isfinite(link_gbps) and MIN_LINK_GBPS <= link_gbps <= MAX_LINK_GBPS):
        raise ConfigError(
            f"--link-gbps must be a number of GB/s from {MIN_LINK_GBPS:g} to {MAX_LINK_GBPS:,.0f}, got {link_gbps:g}"
        )
    elem_bytes = DTYPE_SIZES[parse_dtype(dtype)]
    size_bytes = parse_size(size, "--size")
    if size_bytes >= MAX_BYTES:
        # --size 999999999G printed ~644245093755764.9 us: no rank holds such a message.
        raise ConfigError(
            f"--size {size}: sizes are below 2^50 bytes (1 PiB), more than any rank's message "
            "(K/M/G are powers of 1024)"
        )
    if size_bytes % elem_bytes:
        raise ConfigError(f"--size {size} is not a multiple of the {dtype} element size ({elem_bytes} bytes)")
    board_count = ranks * segments if count is None else count
    if board_count < 0:
        raise ConfigError(f"--count must be >= 0, got {board_count}")
    layout = _node_layout(spec.name, ranks, nodes, needs_nodes=spec.needs_nodes and spec.supports(the_op))
    schedule = spec.build(the_op, ranks, board_count, root=root, segments=segments, layout=layout)
    board = None
    if ranks <= MAX_BOARD_RANKS and board_count <= MAX_BOARD_PIECES:
        board = build_whiteboard(schedule)
    if not the_op.spec.payload:
        # A barrier moves no data: its totals are steps only, whatever --size says.
        size_bytes = 0
    big = spec.build(the_op, ranks, size_bytes // elem_bytes, root=root, segments=segments, layout=layout)
    stats = schedule_stats(big, elem_bytes)
    baseline = baseline_for(the_op, spec.name)
    direct_stats = None
    if baseline is not None:
        base = get_algorithm(baseline).build(the_op, ranks, size_bytes // elem_bytes, root=root)
        direct_stats = schedule_stats(base, elem_bytes)

    mine = estimate(the_op, spec.name, ranks, size_bytes, segments, alpha_us, link_gbps, nodes=nodes)
    theirs = None if baseline is None else estimate(the_op, baseline, ranks, size_bytes, 1, alpha_us, link_gbps)

    found = (
        None
        if baseline is None
        else crossover_with_direct(
            the_op, spec.name, ranks, segments, alpha_us, link_gbps, baseline=baseline, nodes=nodes
        )
    )
    cross = None if found is None else found[0]
    if as_json:
        out: dict[str, Any] = {
            "algo": spec.name,
            "op": the_op.value,
            "world_size": ranks,
            "nodes": nodes,
            "count": board_count,
            "root": root,
            "segments": segments,
            "summary": spec.summary,
            "whiteboard": board_dict(board) if board else None,
            "totals": {
                "dtype": parse_dtype(dtype),
                **_stats_dict(stats, size_bytes, mine),
            },
            "direct": None
            if baseline != "direct" or direct_stats is None or theirs is None
            else _stats_dict(direct_stats, size_bytes, theirs),
            "baseline": None
            if baseline is None or direct_stats is None or theirs is None
            else {"algo": baseline, **_stats_dict(direct_stats, size_bytes, theirs)},
            "model": {"alpha_us": alpha_us, "link_gbps": link_gbps, "crossover_bytes": cross},
        }
        typer.echo(json.dumps(out, indent=2))
        return
    render_explain(
        console,
        spec_summary=spec.summary,
        schedule=schedule,
        board=board,
        stats=stats,
        direct_stats=direct_stats,
        size_bytes=size_bytes,
        dtype=parse_dtype(dtype),
        alpha_us=alpha_us,
        link_gbps=link_gbps,
        crossover=found,
        estimates=(mine, theirs),
        limits=(MAX_BOARD_RANKS, MAX_BOARD_PIECES),
        baseline=baseline or "direct",
    )
