"""``collbench predict --hierarchy K``: ring, hierarchical ring and two-tree all-reduce across node
counts of K ranks each, from the all-reduce fits given (``collbench/models/hierarchy.py``)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import typer
from rich.console import Group, RenderableType
from rich.text import Text

from collbench.cli.console import console, print_note
from collbench.cli.render.styles import narrow_table, paragraph
from collbench.models.fitted import Fit
from collbench.models.hierarchy import ALGOS, HierarchyRow, LinkClasses, compare, link_classes
from collbench.units import counted, factor_text, size_label

SHORT = {"ring": "ring", "hierarchical": "hier", "two-tree": "tree"}


def _time(us: float | None) -> str:
    if us is None:
        return "-"
    if us < 1e3:
        return f"{us:.1f}us"
    if us < 1e6:
        return f"{us / 1e3:.2f}ms"
    return f"{us / 1e6:.2f}s"


def certainty(classes: LinkClasses, max_ranks: int) -> str:
    """How sure the comparison's times are: every row is the two fits' links priced by each algorithm's
    formula, none checked against a run, the largest as far past the fits' ranks as it says."""
    measured = sorted({classes.intra.world_size, classes.inter.world_size} - {0})
    reach = f", up to x{factor_text(max_ranks / measured[-1])} the ranks measured" if measured else ""
    return (
        f"every time is a model of the fits' links (measured at {' and '.join(map(str, measured))} ranks"
        f"{reach}), no row checked against a run: error unknown"
    )


def render(rows: Sequence[HierarchyRow], sizes: Sequence[int], per_node: int, sure: str = "") -> RenderableType:
    small = sizes[0]
    lat = narrow_table(f"all-reduce at {size_label(small)}, {counted(per_node, 'rank')} a node", keep=2)
    lat.add_column("nodes", justify="right", no_wrap=True)
    lat.add_column("ranks", justify="right", no_wrap=True)
    for algo in ALGOS:
        lat.add_column(SHORT[algo], justify="right", no_wrap=True)
    lat.add_column("network steps r/h/t", justify="right", no_wrap=True)
    for row in rows:
        steps = "/".join(str(row.network_steps[a]) for a in ALGOS)
        lat.add_row(str(row.nodes), f"{row.ranks:,}", *(_time(row.times_us[a][small]) for a in ALGOS), steps)
    win = narrow_table("fastest by size", keep=1)
    win.add_column("nodes", justify="right", no_wrap=True)
    for s in sizes:
        win.add_column(size_label(s), justify="right", no_wrap=True)
    for row in rows:
        win.add_row(str(row.nodes), *(SHORT[row.fastest(s)] for s in sizes))
    legend = Text("hier: hierarchical ring; tree: two-tree (NCCL's double binary tree over nodes)")
    return Group(lat, Text(""), win, legend, *([paragraph(Text(sure))] if sure else []))


def run(fits: list[Fit], per_node: int, max_ranks: int, sizes: list[int], json_out: bool) -> None:
    """Print the comparison (or its JSON). Raises ConfigError for no all-reduce fit or a bad shape."""
    classes = link_classes(fits)
    rows = compare(classes, per_node, max_ranks, sizes)
    for note in (
        f"inside a node: {classes.intra.source}",
        f"across nodes: {classes.inter.source}",
        *classes.notes,
    ):
        print_note("note", note)
    if json_out:
        doc = {
            "ranks_per_node": per_node,
            "certainty": certainty(classes, max(r.ranks for r in rows)),
            "intra": classes.intra.source,
            "inter": classes.inter.source,
            "rows": [
                {
                    "nodes": r.nodes,
                    "ranks": r.ranks,
                    "times_us": {a: {str(s): t for s, t in r.times_us[a].items()} for a in ALGOS},
                    "network_steps": r.network_steps,
                    "fastest": {str(s): r.fastest(s) for s in sizes},
                }
                for r in rows
            ],
        }
        typer.echo(json.dumps(doc, indent=2))
        return
    console.print(render(rows, sizes, per_node, certainty(classes, max(r.ranks for r in rows))))
