"""Ring, hierarchical ring and two-tree all-reduce across node counts, on two link classes.

The comparison of NVIDIA's "Massively Scale Your Deep Learning Training with NCCL 2.4" (2019): a flat
ring's latency grows linearly with the GPUs, the double binary tree's with the logarithm of the
nodes, and a hierarchical (2D) ring divides the steps that cross the network by the GPUs per node.
Each algorithm is priced from its own structure on two link classes, inside a node and across nodes,
whose per-step latency, per-byte cost and reduction cost come from fits (of all-reduce, or of
all-gather or reduce-scatter, whose fitted per-step latency and per-byte cost describe the same links;
an all-gather's fit has no reduction cost):

* ring over p = m k ranks, node after node: 2(p-1) steps of n/p, every step as slow as its slowest
  hop (the network's, once there are two nodes): ``ring``'s formula priced at the inter-node class;
* hierarchical: ``hierarchical_terms`` (2(k-1) steps of n/k inside, 2(m-1) steps of n/(mk) across);
* two-tree: NCCL's shape, a double binary tree over the nodes and a chain inside each node (reduce
  up the chain, broadcast down it): ``two-tree``'s formula over m ranks at the inter-node class plus
  two pipelined chains of k-1 hops at the intra-node class, at the pipeline depth (1..64 segments)
  that is fastest; the phases are added, not overlapped (an upper bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from collbench.errors import ConfigError
from collbench.models.costs import cost_terms
from collbench.models.fitted import Fit
from collbench.schedules.algorithms.hierarchical import hierarchical_terms
from collbench.schedules.cost import CostTerms, tree_phase
from collbench.schedules.ops import Op
from collbench.schedules.spec import MAX_SEGMENTS

ALGOS: tuple[str, ...] = ("ring", "hierarchical", "two-tree")


@dataclass(frozen=True, slots=True)
class LinkClass:
    """One class of links' parameters, from one fit."""

    alpha_us: float
    beta_us_per_byte: float
    gamma_us_per_byte: float
    source: str
    """The fit it came from (``all-reduce ring gloo x4 on 2 nodes``)."""
    world_size: int = 0
    """The ranks that fit was measured at (how far a row of the comparison reaches past it)."""

    def time_us(self, terms: CostTerms) -> float:
        return terms.time_us(self.alpha_us, self.beta_us_per_byte, self.gamma_us_per_byte)


@dataclass(frozen=True, slots=True)
class LinkClasses:
    intra: LinkClass
    inter: LinkClass
    notes: tuple[str, ...] = ()


def _label(fit: Fit) -> str:
    where = "" if fit.nodes is None else f" on {fit.nodes} node{'s' if fit.nodes != 1 else ''}"
    return f"{fit.op} {fit.algo} {fit.backend} x{fit.world_size}{where}"


def _as_class(fit: Fit) -> LinkClass:
    return LinkClass(fit.alpha_us, fit.beta_us_per_byte, fit.gamma_us_per_byte or 0.0, _label(fit), fit.world_size)


_CLASS_OPS = (Op.ALL_REDUCE, Op.ALL_GATHER, Op.REDUCE_SCATTER)


def link_classes(fits: Sequence[Fit]) -> LinkClasses:
    """The intra- and inter-node classes from fits: a fit measured on one node is the intra-node
    class, one measured on several the inter-node class (all-reduce first, then a ring's fit, then the
    largest world size). With fits of one kind only, both classes are that fit, said in a note.

    Raises ConfigError when there is no usable fit of all-reduce, all-gather or reduce-scatter."""
    usable = [f for f in fits if Op.parse(f.op) in _CLASS_OPS and not f.unusable_because and f.world_size >= 2]
    if not usable:
        raise ConfigError("--hierarchy needs a usable fit of all-reduce, all-gather or reduce-scatter")

    def best(candidates: list[Fit]) -> Fit | None:
        # A preference among fits, not a second definition of an op: an all-reduce fit crosses every
        # link both ways, so it prices a link class best; this one key is the only op this module names.
        return max(
            candidates,
            key=lambda f: (Op.parse(f.op) is Op.ALL_REDUCE, f.algo == "ring", f.world_size),
            default=None,
        )

    one = best([f for f in usable if (f.nodes or 1) == 1])
    many = best([f for f in usable if (f.nodes or 1) > 1])
    notes: list[str] = []
    if one is None:
        assert many is not None
        one = many
        notes.append(f"no fit of one node: inside a node priced as across nodes ({_label(many)})")
    if many is None:
        many = one
        notes.append(
            f"no fit across nodes: the network priced as the links inside a node ({_label(one)}); "
            "hierarchical then gains only its fewer steps"
        )
    return LinkClasses(_as_class(one), _as_class(many), tuple(notes))


def _segment_counts() -> list[int]:
    return [1 << i for i in range(MAX_SEGMENTS.bit_length()) if 1 << i <= MAX_SEGMENTS]


def algorithm_time_us(algo: str, classes: LinkClasses, nodes: int, per_node: int, size_bytes: float) -> float | None:
    """The time of ``algo`` all-reduce on ``nodes`` x ``per_node`` ranks; None for hierarchical on one
    node (it is a ring there) or any algorithm on one rank."""
    m, k = nodes, per_node
    p = m * k
    if p < 2:
        return None
    n = float(size_bytes)
    net = classes.inter if m > 1 else classes.intra
    if algo == "ring":
        return net.time_us(cost_terms(Op.ALL_REDUCE, "ring", p, n))
    if algo == "hierarchical":
        if m < 2:
            return None
        inside, across = hierarchical_terms(Op.ALL_REDUCE, m, k, n)
        return classes.intra.time_us(inside) + classes.inter.time_us(across)
    if algo == "two-tree":
        best = None
        for s in _segment_counts():
            if m == 1:
                t = classes.intra.time_us(cost_terms(Op.ALL_REDUCE, "two-tree", k, n, segments=s))
            else:
                chain = tree_phase(k - 1, 1, n, s, True) + tree_phase(k - 1, 1, n, s, False)
                t = classes.intra.time_us(chain) + classes.inter.time_us(
                    cost_terms(Op.ALL_REDUCE, "two-tree", m, n, segments=s)
                )
            best = t if best is None else min(best, t)
        return best
    raise ConfigError(f"unknown algorithm {algo!r} here; these are priced: {', '.join(ALGOS)}")


def inter_node_steps(algo: str, nodes: int, per_node: int) -> int:
    """Steps on the critical path that cross the network (0 on one node)."""
    m, k = nodes, per_node
    if m < 2:
        return 0
    if algo == "ring":
        return 2 * (m * k - 1)  # every step of a flat ring waits for its network hop
    if algo == "hierarchical":
        return 2 * (m - 1)
    return int(cost_terms(Op.ALL_REDUCE, "two-tree", m, 1.0).alpha)


@dataclass(frozen=True, slots=True)
class HierarchyRow:
    nodes: int
    ranks: int
    times_us: dict[str, dict[int, float | None]]
    """algo -> size -> time (None: not applicable)."""
    network_steps: dict[str, int]

    def fastest(self, size: int) -> str:
        priced = {a: t[size] for a, t in self.times_us.items() if t[size] is not None}
        return min(priced, key=lambda a: priced[a] or 0.0)


def compare(classes: LinkClasses, per_node: int, max_ranks: int, sizes: Sequence[int]) -> list[HierarchyRow]:
    """One row per node count 1, 2, 4, ... up to ``max_ranks // per_node`` (and that count itself), from
    the first holding two ranks.

    Raises ConfigError for fewer than 1 rank per node or fewer ranks than one node holds."""
    if per_node < 1:
        raise ConfigError(f"--hierarchy takes the ranks per node, at least 1, got {per_node}")
    most = max_ranks // per_node
    if most < 1:
        raise ConfigError(f"--ranks {max_ranks} is fewer than one node of {per_node}")
    counts = sorted({1 << i for i in range(most.bit_length()) if 1 << i <= most} | {most})
    # A world of one rank (one node of one rank) moves no data: no algorithm prices it, and a row of
    # nothing has no fastest ('--hierarchy 1' ended in min()'s ValueError on it).
    counts = [m for m in counts if m * per_node >= 2]
    rows = []
    for m in counts:
        times = {a: {s: algorithm_time_us(a, classes, m, per_node, s) for s in sizes} for a in ALGOS}
        steps = {a: inter_node_steps(a, m, per_node) for a in ALGOS}
        rows.append(HierarchyRow(m, m * per_node, times, steps))
    return rows
