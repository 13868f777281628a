"""Which of several fits of one collective prices a shape, and how the fits hand over between shapes.

``collbench fit A B C`` keeps one fit per measured shape; ``predict`` prices an asked shape from one of
them (:func:`pick_for`) and keeps the time from falling where the one it prices from changes as ranks
cross into another node class (:func:`not_below_fewer_nodes`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from collbench.models.fitted import Fit
from collbench.models.priced import Priced, Shapes, label, node_class
from collbench.units import ranks_on_nodes, time_text


def pick_for(candidates: Sequence[Fit], world_size: int, nodes: int, shapes: Shapes) -> Fit:
    """The fit to price a shape from: the shape itself, else its node class, else one whose links NCCL
    prices the asked shape with, else the nearest node class; among equals the largest.

    NCCL's model takes a graph's ``bwIntra`` up to two nodes and its ``bwInter`` beyond (tuning.cc,
    ``nNodes <= 2 ? bwIntra : bwInter``): a fit on one or two nodes measured the first, one on more
    the second. Asked at two nodes with fits on one node and on twenty, the one-node fit holds the
    bandwidth NCCL uses there; the twenty-node one holds the links beyond (on GB200 NVL72, 20 racks'
    network gave half the bus bandwidth that one and two racks did), which predicted 2 racks 2x slow.
    """
    asked = node_class(nodes)

    def rank(f: Fit) -> tuple[int, int, int, int, int]:
        measured = node_class(shapes.assumed_nodes(f))
        same = f.world_size == world_size and shapes.assumed_nodes(f) == nodes
        same_links = (measured <= 2) == (asked <= 2)
        return (int(same), int(measured == asked), int(same_links), -abs(measured - asked), f.world_size)

    return max(candidates, key=rank)


def not_below_fewer_nodes(
    entry: Priced,
    usable: Sequence[Fit],
    world_size: int,
    nodes: int,
    shapes: Shapes,
    alone: Callable[[Fit, int, int], list[Priced]],
) -> Priced:
    """``entry`` never faster than a fit of a smaller node class predicts on its own class's nodes.

    With fits of several node classes a shape is priced from one of them (:func:`pick_for`), and the one
    priced changes as ranks cross into another class: one node's fit up to one node, two nodes' fit
    beyond. Each is one continuous model, but the two need not meet where they hand over (a GB200
    fit of 144 ranks on 2 racks put 82 us at 8 B on 76 ranks, where the 72-rank fit put 105 us on
    72: fewer ranks and one rack). Adding ranks and nodes never makes a collective faster, so each
    fit of a smaller class prices the largest shape of its class within the asked one (its own ranks
    a node, on its class's nodes), and the asked time is at least that; its basis says so where it
    raises it. ``alone(fit, ranks, nodes)`` prices one fit at a shape (``predict.price_fits``).
    """
    asked = node_class(nodes)
    floors: list[tuple[Priced, int, int]] = []
    for g in usable:
        fewer = node_class(shapes.assumed_nodes(g))
        if g is entry.fit or fewer >= asked:
            continue
        per_node = max(g.world_size // max(shapes.assumed_nodes(g), 1), 1)
        ranks = min(world_size, fewer * per_node)
        if ranks < 2 or ranks < fewer:
            continue
        below = alone(g, ranks, fewer)
        floors.extend((b, ranks, fewer) for b in below if (b.fit.algo, b.fit.backend) == (g.algo, g.backend))
    if not floors:
        return entry
    time_us, basis = entry.time_us, entry.basis

    def highest(size: float) -> tuple[Priced, int, int]:
        return max(floors, key=lambda f: f[0].time_us(size))

    def raised_us(size: float) -> float:
        return max(time_us(size), highest(size)[0].time_us(size))

    def raised_basis(size: float) -> str:
        text = basis(size)
        floor, ranks, fewer = highest(size)
        if floor.time_us(size) > time_us(size):
            text += (
                f"; raised from {time_text(time_us(size))} to {time_text(floor.time_us(size))}, what "
                f"{label(floor.fit, shapes)} predicts for {ranks_on_nodes(ranks, fewer)} "
                "(more ranks and nodes are never faster)"
            )
        return text

    fastest = entry.fastest_us
    # Whatever NCCL runs on more ranks and nodes is no faster than what a smaller class's fit predicts.
    raised_fastest = None if fastest is None else (lambda size: max(fastest(size), highest(size)[0].time_us(size)))
    return dataclasses.replace(entry, time_us=raised_us, basis=raised_basis, fastest_us=raised_fastest)
