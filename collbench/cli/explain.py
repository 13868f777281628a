"""`collbench explain ALGO`: an algorithm's schedule on a whiteboard, step by step, and its cost terms."""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

import typer

from collbench.cli.console import console
from collbench.cli.render.schedules import render_explain
from collbench.errors import ConfigError
from collbench.schedules.analysis import ScheduleStats, schedule_stats
from collbench.schedules.ops import DTYPE_SIZES, Op, parse_dtype
from collbench.schedules.registry import get_algorithm
from collbench.schedules.whiteboard import Whiteboard, build_whiteboard, rank_letter
from collbench.units import parse_size

MAX_BOARD_RANKS = 32
MAX_BOARD_PIECES = 64
MAX_EXPLAIN_RANKS = 256
"""The largest world explain builds: schedules grow with ranks squared, and -r 1000 runs for minutes."""


def _stats_dict(stats: ScheduleStats, size_bytes: int, time_us: float) -> dict[str, Any]:
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
        "estimate_us": round(time_us, 3),
    }


def estimate_us(stats: ScheduleStats, alpha_us: float, link_gbps: float) -> float:
    """Alpha-beta estimate: every step costs ``alpha_us``; each rank has one full-duplex port of
    ``link_gbps`` (GB/s), so the busiest rank's bytes set the bandwidth term.

    Both terms are read off the built schedule (what explain shows), its bytes summed over the whole
    schedule as if the port never idled. The closed forms that ``fit`` and ``predict`` use
    (``collbench/models/costs.py``) add the busiest rank of each step along the critical path instead:
    the two agree for ring all-reduce, recursive doubling and Rabenseifner, not for chains, trees or
    ``direct``, so explain's numbers are not a closed form's."""
    return stats.steps * alpha_us + stats.busiest_port_bytes / (link_gbps * 1e3)


def crossover_bytes(
    algo: ScheduleStats, base: ScheduleStats, size_bytes: int, alpha_us: float, link_gbps: float
) -> float | None:
    """The size where ``algo`` and ``base`` cost the same under the alpha-beta estimate, taking link
    bytes as proportional to size (None when one is better at every size)."""
    if size_bytes <= 0:
        return None
    step_gap_us = (algo.steps - base.steps) * alpha_us
    byte_gap_us_per_byte = (base.busiest_port_bytes - algo.busiest_port_bytes) / size_bytes / (link_gbps * 1e3)
    if step_gap_us == 0 or byte_gap_us_per_byte == 0 or (step_gap_us > 0) != (byte_gap_us_per_byte > 0):
        return None
    return step_gap_us / byte_gap_us_per_byte


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


def explain(
    algo: Annotated[str, typer.Argument(help="Algorithm: ring, tree, two-tree, recursive-doubling, ...")],
    op: Annotated[str, typer.Option("--op", help="Collective: all-reduce, reduce-scatter, all-gather, ...")] = (
        "all-reduce"
    ),
    ranks: Annotated[int, typer.Option("--ranks", "-r", help="World size.")] = 4,
    count: Annotated[
        int | None, typer.Option("--count", help="Elements on the whiteboard (default: ranks x segments).")
    ] = None,
    root: Annotated[int, typer.Option("--root", help="Root rank of broadcast/reduce (and direct's server).")] = 0,
    segments: Annotated[int, typer.Option("--segments", "-s", help="Pipeline segments (tree, two-tree).")] = 1,
    size: Annotated[str, typer.Option("--size", help="Message size for the totals (K/M/G = 1024^n).")] = "1M",
    dtype: Annotated[str, typer.Option("--dtype", "-d", help="Element type for the totals.")] = "float32",
    alpha_us: Annotated[float, typer.Option("--alpha-us", help="Illustrative latency per step (us).")] = 5.0,
    link_gbps: Annotated[
        float, typer.Option("--link-gbps", help="Illustrative bandwidth of each rank's port (GB/s).")
    ] = 10.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of the whiteboard.")] = False,
) -> None:
    """Show an algorithm's schedule step by step, with its cost terms."""
    spec = get_algorithm(algo)
    the_op = Op.parse(op)
    if ranks < 1:
        raise ConfigError(f"--ranks must be >= 1, got {ranks}")
    if ranks > MAX_EXPLAIN_RANKS:
        raise ConfigError(
            f"--ranks {ranks} is more than explain shows ({MAX_EXPLAIN_RANKS}); "
            "use `collbench predict` for large worlds"
        )
    if segments < 1:
        raise ConfigError(f"--segments must be >= 1, got {segments}")
    # `not (x >= 0)` also refuses nan, which every comparison lets through.
    if not (math.isfinite(alpha_us) and alpha_us >= 0):
        raise ConfigError(f"--alpha-us must be a finite number >= 0, got {alpha_us}")
    if not (math.isfinite(link_gbps) and link_gbps > 0):
        raise ConfigError(f"--link-gbps must be a finite number > 0, got {link_gbps}")
    elem_bytes = DTYPE_SIZES[parse_dtype(dtype)]
    size_bytes = parse_size(size, "--size")
    if size_bytes % elem_bytes:
        raise ConfigError(f"--size {size} is not a multiple of the {dtype} element size ({elem_bytes} bytes)")
    board_count = ranks * segments if count is None else count
    if board_count < 0:
        raise ConfigError(f"--count must be >= 0, got {board_count}")
    schedule = spec.build(the_op, ranks, board_count, root=root, segments=segments)
    board = None
    if ranks <= MAX_BOARD_RANKS and board_count <= MAX_BOARD_PIECES:
        board = build_whiteboard(schedule)
    big = spec.build(the_op, ranks, size_bytes // elem_bytes, root=root, segments=segments)
    stats = schedule_stats(big, elem_bytes)
    direct_stats = None
    if spec.name != "direct":
        base = get_algorithm("direct").build(the_op, ranks, size_bytes // elem_bytes, root=root)
        direct_stats = schedule_stats(base, elem_bytes)
    cross = None if direct_stats is None else crossover_bytes(stats, direct_stats, size_bytes, alpha_us, link_gbps)
    if as_json:
        out: dict[str, Any] = {
            "algo": spec.name,
            "op": the_op.value,
            "world_size": ranks,
            "count": board_count,
            "root": root,
            "segments": segments,
            "summary": spec.summary,
            "whiteboard": board_dict(board) if board else None,
            "totals": {
                "dtype": parse_dtype(dtype),
                **_stats_dict(stats, size_bytes, estimate_us(stats, alpha_us, link_gbps)),
            },
            "direct": None
            if direct_stats is None
            else _stats_dict(direct_stats, size_bytes, estimate_us(direct_stats, alpha_us, link_gbps)),
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
        crossover=cross,
        estimates=(
            estimate_us(stats, alpha_us, link_gbps),
            None if direct_stats is None else estimate_us(direct_stats, alpha_us, link_gbps),
        ),
        limits=(MAX_BOARD_RANKS, MAX_BOARD_PIECES),
    )
