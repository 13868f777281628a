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


def refusals_briefly(refused: Sequence[str]) -> str:
    """Why no fit is extrapolated, in one line a reader takes in: each ``NAME: REASON`` cut to its
    reason's headline (up to its first ``:``), the fits that share one named together, and where the
    fit tables say the rest. In full, 9 refused fits of a 2-core sweep made an error line of 1,800
    characters that repeated 'a fit needs at least 4 (two more than its parameters) to show its error;
    measure more sizes' five times."""
    names: dict[str, list[str]] = {}
    cut = False
    for line in refused:
        name, sep, reason = line.partition(": ")
        if not sep:
            name, reason = "", line
        head, more, _ = reason.partition(": ")
        cut = cut or bool(more)
        names.setdefault(head, []).append(name)
    parts = [f"{', '.join(n for n in group if n)}: {head}" if any(group) else head for head, group in names.items()]
    return "; ".join(parts) + ("; the fit tables (`collbench fit`) say why in full" if cut else "")


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
    left = world_size % per_node
    partly = "" if left == 0 or count == 1 else f", the last holding {left}"
    whole = "" if not partly else f"; {whole_counts(world_size, per_node)} ranks fill whole nodes"
    return count, (
        f"{unasked}: {counted(count, 'node')} "
        f"({counted(per_node, 'rank')} a node{partly}, as measured at {ranks_on_nodes(world, nodes)}){whole}"
    )


def whole_counts(world_size: int, per_node: int) -> str:
    """The rank counts either side of ``world_size`` that fill nodes of ``per_node`` ranks: ``16 or 24``
    (``8`` alone where the one below would be under 2 ranks)."""
    below = world_size - world_size % per_node
    return " or ".join(f"{count:,}" for count in (below, below + per_node) if count >= 2)


def uneven_note(world_size: int, nodes: int, measured_nodes: Mapping[int, int]) -> str | None:
    """What is said of ranks asked for on nodes they do not spread evenly over (``predict --nodes``,
    ``RANKS:NODES``), None where they do.

    Such a shape is predicted, as the default node count's last part-full node is (a planner's 1,024
    ranks on nodes of 3 is a job a scheduler runs): every rank count is priced, continuous in ranks
    (predict_native fills nodes at the measured ranks a node where the nodes asked hold them so, its
    fullest node a measured one). Said, with the nearest counts that fill the nodes, since a job that
    buys whole nodes may mean one of them; no schedule is simulated on it (``predict._simulated``).
    """
    if world_size % nodes == 0 or nodes > world_size:
        # More nodes than ranks is refused where the shape is priced (predict.predict_all), in one line
        # that this note, printed first, contradicted: 'priced as 16 ranks on 32 nodes', then 'error: 16
        # ranks cannot fill 32 nodes'.
        return None
    kept = measured_per_node(measured_nodes)
    if kept is not None and kept_nodes(world_size, measured_nodes) == nodes:
        per_node = kept[0] // kept[1]
        return (
            f"{world_size:,} ranks on {counted(nodes, 'node')}: {per_node} a node as measured at "
            f"{ranks_on_nodes(*kept)}, the last holding {world_size % per_node}; "
            f"{whole_counts(world_size, per_node)} ranks fill whole nodes"
        )
    return (
        f"{world_size:,} ranks do not spread evenly over {counted(nodes, 'node')} "
        f"({whole_counts(world_size, nodes)} ranks would): priced as {world_size:,} ranks on {counted(nodes, 'node')}"
    )
