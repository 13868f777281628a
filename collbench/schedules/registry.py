"""Algorithms by name: the one list of algorithm modules, in the order every listing uses.

Each module in ``collbench/schedules/algorithms`` exports its specs (builder and cost formulas) in a
``SPECS`` tuple and registers nothing; this list is the only place that names them. Adding an
algorithm is one module and one entry here. The order is how ``--algo all`` and ``tune`` list
algorithms: bandwidth-optimal first, then the latency-optimal ones, the baselines, and the backend's
own collective last.
"""

from __future__ import annotations

from collbench.errors import UnknownNameError
from collbench.schedules.algorithms import (
    alltoall,
    alltoall_topology,
    barrier,
    binomial,
    direct,
    hierarchical,
    linear,
    native,
    one_shot,
    recursive,
    ring,
    scan,
    tree,
)
from collbench.schedules.ops import Op
from collbench.schedules.spec import AlgorithmSpec

SPECS: tuple[AlgorithmSpec, ...] = (
    *ring.SPECS,
    *hierarchical.SPECS,
    *tree.SPECS,
    *recursive.SPECS,
    *alltoall.SPECS,
    *alltoall_topology.SPECS,
    *binomial.SPECS,
    *barrier.SPECS,
    *scan.SPECS,
    *direct.SPECS,
    *one_shot.SPECS,
    *linear.SPECS,
    *native.SPECS,
)
assert len({s.name for s in SPECS}) == len(SPECS), "two algorithms share a name"


def get_algorithm(name: str) -> AlgorithmSpec:
    """The algorithm called ``name``; raise UnknownNameError listing the known ones."""
    key = name.strip().lower()
    for spec in SPECS:
        if spec.name == key:
            return spec
    raise UnknownNameError("algorithm", name, algorithm_names())


def algorithm_names() -> list[str]:
    return [s.name for s in SPECS]


def algorithms_for(op: Op) -> list[AlgorithmSpec]:
    return [s for s in SPECS if op in s.ops]
