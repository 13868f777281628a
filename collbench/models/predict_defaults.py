"""What ``predict`` assumes where it is not told: the node count, and the advice for fits too noisy to use.

Both depend on where the fits were measured: a cluster's GPUs (nccl-tests logs, collbench on GPUs) or
collbench's own CPU runs, and on the node count the fits carry from their rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from collbench.backends import measured_on_gpus
from collbench.errors import ConfigError
from collbench.models.fitted import Fit
from collbench.units import counted, ranks_on_nodes


def remeasure_advice(fits: Sequence[Fit]) -> str:
    """What to do about fits too noisy to use, for where they were measured."""
    # Measured on GPUs (a cluster's nccl-tests log, or collbench on GPUs), their noise is the network's and
    # the other jobs', not ranks contending for a few CPU cores.
    if fits and all(measured_on_gpus(f.backend) for f in fits):
        return (
            "measure again with more iterations per size (nccl-tests -n, -w; collbench --iters) "
            "when the cluster's network is not shared with other jobs"
        )
    return "measure again on a quieter machine or with fewer ranks than cores"


def measured_per_node(measured_nodes: Mapping[int, int]) -> tuple[int, int] | None:
    """The measured shape (world size, nodes) whose ranks a node a shape that names no nodes keeps: the
    largest whose ranks spread evenly over its nodes; None where there is none."""
    even = [(w, n) for w, n in measured_nodes.items() if n >= 1 and w % n == 0]
    return max(even) if even else None


def kept_nodes(world_size: int, measured_nodes: Mapping[int, int]) -> int | None:
    """The nodes of ``world_size`` ranks at the measured ranks a node (:func:`default_nodes`'s count);
    None where no measured shape has a whole number of ranks a node."""
    kept = measured_per_node(measured_nodes)
    return None if kept is None else -(-world_size // (kept[0] // kept[1]))


PREDICT_ASK = (
    "give --nodes N (the nodes to predict on), or --measured-nodes M (the nodes the fits' runs spanned; "
    "fit --nodes M records it)"
)
"""What ``predict`` asks for where it has no measured ranks a node to keep."""


def default_nodes(
    world_size: int, measured_nodes: Mapping[int, int], *, unasked: str = "--nodes not given", ask: str = PREDICT_ASK
) -> tuple[int, str]:
    """Nodes for ``world_size`` ranks when none are asked, and the line that says so.

    The measured ranks per node are kept (the largest measured shape's, where shapes differ): as many
    nodes as hold the ranks at that many a node, the last one partly filled where they do not divide
    (NCCL's model reads ``nRanks / nNodes``). So adding ranks never takes nodes away, and at the
    measured world size it is the measured shape itself, priced by the fit with its own error.
    ``unasked`` opens both lines (what was left out: ``--nodes not given``), ``ask`` ends the error
    (what to pass instead).
    Raises ConfigError without a measured node count, or with only shapes whose ranks do not spread
    evenly over their nodes: there are no measured ranks a node to keep, and any count taken instead
    (1 node put 1,024 ranks of a 2-node log in one) is a guess the prediction would rest on.
    """
    kept = measured_per_node(measured_nodes)
    if kept is None:
        uneven = sorted((w, n) for w, n in measured_nodes.items() if n >= 1)
        why = (
            "the fits do not say the nodes they were measured on"
            if not uneven
            else f"{', '.join(ranks_on_nodes(w, n) for w, n in uneven)} hold no whole number of ranks a node"
        )
        raise ConfigError(f"{unasked}, and {why}, so {world_size:,} ranks have no measured ranks a node to keep: {ask}")
    world, nodes = kept
    per_node = world // nodes
    count = kept_nodes(world_size, measured_nodes)
    assert count is not None  # a measured shape with whole ranks a node is there
    partly = "" if world_size % per_node == 0 else f", the last holding {world_size % per_node}"
    return count, (
        f"{unasked}: {counted(count, 'node')} "
        f"({counted(per_node, 'rank')} a node{partly}, as measured at {ranks_on_nodes(world, nodes)})"
    )
