"""Where a tune's ranks run: the topology (given, or this machine's) and the layout planned on it.

Both are made once per tune and handed to every sweep as objects: each round measures on the same
layout, and the profile records that layout, the one the ranks ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from collbench.errors import CollbenchError
from collbench.layouts.model import Layout
from collbench.results.row import ResultRow
from collbench.topology.model import Topology
from collbench.tuning.config import TuneConfig


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """The topology a tune measures on and the layout planned on it (None: rank order)."""

    topology: Topology | None = None
    layout: Layout | None = None

    @property
    def ranks_topology(self) -> Topology | None:
        """The topology the ranks are given: only with a planned layout. Without one they run in rank
        order and their rows carry the fingerprint of the machine they find."""
        return self.topology if self.layout is not None else None


def plan_placement(config: TuneConfig, notes: list[str]) -> Placement:
    """The topology (``config.topology_path``, else discovered) and its planned layout.

    The layout is None under a launcher (``config.ranks`` None: the launcher placed the ranks) and
    when it cannot be planned, with a note saying why. Raises InputFileError for a topology file
    that cannot be read.
    """
    if config.topology_path is not None:
        from collbench.topology.io import load_topology

        topology = load_topology(config.topology_path)
    else:
        from collbench.topology.sources import discover_topology

        topology = discover_topology(ranks=config.ranks)
    if config.ranks is None:
        return Placement(topology=topology)
    from collbench.layouts.plan import plan_layout

    try:
        layout = plan_layout(topology, config.ranks)
    except CollbenchError as exc:
        notes.append(f"layout not planned ({exc}); rank order used")
        return Placement(topology=topology)
    return Placement(topology=topology, layout=layout)


def layout_ran(rows: Sequence[ResultRow], layout: Layout | None) -> Layout | None:
    """``layout`` if the ranks measured with it (some row names it), else None (rank order)."""
    if layout is None or not any(row.layout == layout.name for row in rows):
        return None
    return layout
