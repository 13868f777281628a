"""``hierarchical``: rings inside each node, and k rings across the nodes, one per local rank.

The 2D (hierarchical) ring that the NCCL 2.4 article compares with the flat ring and the double
binary tree. With m nodes of k ranks each (the layout's ``nodes``: the measured or discovered hosts):

* all-reduce: a ring reduce-scatter inside every node leaves the rank of local index j with shard j
  (1/k of the buffer) reduced over its node; then the k ranks of each local index j, one per node,
  all-reduce shard j over a ring of their own (k rings across the nodes side by side, each carrying
  1/k of the data); then a ring all-gather inside every node hands every rank the whole result;
* reduce-scatter: the same first phase, with shard j made of the chunks of the ranks of local index
  j on every node, then a ring reduce-scatter of shard j across the nodes (nothing to gather);
* all-gather: the reverse: a ring all-gather across the nodes of each local index, then one inside
  every node.

Each rank crosses the network in only 2(m-1) steps of all-reduce (a flat ring takes 2(mk-1) steps,
each as slow as its slowest hop), so inter-node latency is divided by the ranks per node, and each
inter-node ring carries 1/k of the buffer. It needs nodes: on one node, or with nodes of different
sizes (the rings across nodes pair local indices), it is refused with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from collbench.errors import NotApplicableError
from collbench.layouts.model import Layout
from collbench.schedules.algorithms._common import RoundBuilder, check_count_and_segments, layout_name, split
from collbench.schedules.cost import CostFormulas, CostTerms
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op, chunk_bounds
from collbench.schedules.spec import AlgorithmSpec

Ranges = list[tuple[int, int]]


def node_groups(layout: Layout | None, world_size: int) -> tuple[tuple[int, ...], ...]:
    """The layout's nodes, checked: at least two, all the same size, every rank once.

    Raises NotApplicableError saying why hierarchical cannot run on them."""
    nodes = () if layout is None else layout.nodes
    if len(nodes) < 2:
        where = "no layout" if layout is None else f"layout {layout.name!r} puts all {world_size} ranks on one node"
        raise NotApplicableError(
            f"hierarchical needs ranks on two or more nodes ({where}): on one node it is a ring; plan the layout "
            "from a topology of several hosts"
        )
    sizes = sorted({len(node) for node in nodes})
    if len(sizes) > 1:
        raise NotApplicableError(
            f"hierarchical needs the same number of ranks on every node (its rings across nodes pair local ranks); "
            f"these nodes hold {', '.join(map(str, sizes))}"
        )
    if sorted(r for node in nodes for r in node) != list(range(world_size)):
        raise NotApplicableError(f"the layout's nodes do not hold the {world_size} ranks once each")
    return nodes


def _ring_pass(
    b: RoundBuilder, ring: tuple[int, ...], owned: Callable[[int], Ranges], first: int, *, reduce: bool, where: str
) -> int:
    """A ring reduce-scatter (``reduce``) or all-gather of the pieces each rank owns (``owned(rank)``);
    returns its rounds. ``where`` (inside a node, across nodes) goes in the steps' labels, so explain's
    board tells the passes apart. Only the hops that touch a kept rank are made (``ring_positions``).

    Reduce-scatter: after it, each rank holds its own pieces reduced over the ring. All-gather: each
    rank's pieces reach every rank of the ring."""
    n = len(ring)
    what = "reduce-scatter" if reduce else "all-gather"
    for s in range(n - 1):
        for p in b.ring_positions(ring):
            # Reduce-scatter forwards the piece of the rank s+1 behind, all-gather the one s behind.
            owner = ring[(p - s - (1 if reduce else 0)) % n]
            for a, z in owned(owner):
                b.transfer(
                    first + s, ring[p], ring[(p + 1) % n], a, z, reduce=reduce, label=f"{what} {where} {s + 1}/{n - 1}"
                )
    return n - 1


def _piece_of_node(pieces: Ranges, place: dict[int, tuple[int, int]], rank: int) -> Ranges:
    return [pieces[place[rank][0]]]


@dataclass(frozen=True, slots=True)
class _Grid:
    """The nodes and the rings a build makes transfers for."""

    count: int
    chunks: Ranges
    """Each rank's chunk of the buffer (reduce-scatter's and all-gather's)."""
    nodes: tuple[tuple[int, ...], ...]
    place: dict[int, tuple[int, int]]
    """Where each rank sits: (its node, its local index). O(world), as the nodes themselves."""
    across: list[tuple[int, ...]]
    """The ring across the nodes of each local index."""
    my_nodes: list[tuple[int, ...]]
    """The node rings a kept rank is in: its own (every node in a whole build)."""
    my_across: list[tuple[int, tuple[int, ...]]]
    """(local index, ring) across the nodes a kept rank is in: its local index's (all in a whole build)."""

    def shard(self, r: int) -> Ranges:
        """Shard j: the chunks of local index j's ranks on every node (m ranges, made when asked:
        every rank's at once would be O(world x nodes))."""
        return [self.chunks[q] for q in self.across[self.place[r][1]]]

    def mine(self, r: int) -> Ranges:
        return [self.chunks[r]]


def _all_reduce(b: RoundBuilder, g: _Grid) -> None:
    m, k = len(g.nodes), len(g.nodes[0])
    shards = chunk_bounds(g.count, k)
    rnd = 0
    for node in g.my_nodes:
        _ring_pass(b, node, lambda r: [shards[g.place[r][1]]], rnd, reduce=True, where="inside")
    rnd += k - 1
    for j, ring in g.my_across:
        # Piece i of shard j is owned by the ring's rank on node i.
        owned = partial(_piece_of_node, split(*shards[j], m), g.place)
        _ring_pass(b, ring, owned, rnd, reduce=True, where="across")
        _ring_pass(b, ring, owned, rnd + m - 1, reduce=False, where="across")
    rnd += 2 * (m - 1)
    for node in g.my_nodes:
        _ring_pass(b, node, lambda r: [shards[g.place[r][1]]], rnd, reduce=False, where="inside")


def _reduce_scatter(b: RoundBuilder, g: _Grid) -> None:
    for node in g.my_nodes:
        _ring_pass(b, node, g.shard, 0, reduce=True, where="inside")
    for _, ring in g.my_across:
        _ring_pass(b, ring, g.mine, len(g.nodes[0]) - 1, reduce=True, where="across")


def _all_gather(b: RoundBuilder, g: _Grid) -> None:
    for _, ring in g.my_across:
        _ring_pass(b, ring, g.mine, 0, reduce=False, where="across")
    for node in g.my_nodes:
        _ring_pass(b, node, g.shard, len(g.nodes) - 1, reduce=False, where="inside")


def build_hierarchical(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
    rank: int | None = None,
) -> Schedule:
    """Rings inside each node and across the nodes (module docstring). Raises NotApplicableError on one
    node or on nodes of different sizes."""
    check_count_and_segments(count, segments)
    nodes = node_groups(layout, world_size)
    k = len(nodes[0])
    place = {r: (i, j) for i, node in enumerate(nodes) for j, r in enumerate(node)}
    across = [tuple(node[j] for node in nodes) for j in range(k)]
    # The passes a kept rank is in: its own node's ring and its local index's ring across the nodes
    # (every ring in a whole build); the others hold none of its transfers.
    my_nodes = list(nodes) if rank is None else [nodes[place[rank][0]]]
    my_across = list(enumerate(across)) if rank is None else [(place[rank][1], across[place[rank][1]])]
    b = RoundBuilder(world_size, rank)
    _PER_OP[op].build(b, _Grid(count, chunk_bounds(count, world_size), nodes, place, across, my_nodes, my_across))
    return b.build(op, "hierarchical", count, root=root, layout=layout_name(layout), params=(("nodes", len(nodes)),))


# -- closed-form costs ---------------------------------------------------------------------------------
#
# (inside a node, across nodes) on m nodes of k ranks, n bytes, each term on its own link class (steps,
# bytes over a rank's port, reduced bytes). Inside: ring passes over k ranks of the whole buffer
# (all-reduce: two). Across: ring passes over m ranks of one shard (n/k).


def _all_reduce_terms(m: int, k: int, n: float) -> tuple[CostTerms, CostTerms]:
    fk, fm = (k - 1) / k, (m - 1) / m
    return CostTerms(2.0 * (k - 1), 2 * fk * n, fk * n), CostTerms(2.0 * (m - 1), 2 * fm * n / k, fm * n / k)


def _reduce_scatter_terms(m: int, k: int, n: float) -> tuple[CostTerms, CostTerms]:
    fk, fm = (k - 1) / k, (m - 1) / m
    return CostTerms(float(k - 1), fk * n, fk * n), CostTerms(float(m - 1), fm * n / k, fm * n / k)


def _all_gather_terms(m: int, k: int, n: float) -> tuple[CostTerms, CostTerms]:
    fk, fm = (k - 1) / k, (m - 1) / m
    return CostTerms(float(k - 1), fk * n, 0.0), CostTerms(float(m - 1), fm * n / k, 0.0)


@dataclass(frozen=True, slots=True)
class _PerOp:
    build: Callable[[RoundBuilder, _Grid], None]
    terms: Callable[[int, int, float], tuple[CostTerms, CostTerms]]
    """(nodes, ranks per node, bytes) -> (inside a node, across nodes)."""


_PER_OP: dict[Op, _PerOp] = {
    Op.ALL_REDUCE: _PerOp(_all_reduce, _all_reduce_terms),
    Op.REDUCE_SCATTER: _PerOp(_reduce_scatter, _reduce_scatter_terms),
    Op.ALL_GATHER: _PerOp(_all_gather, _all_gather_terms),
}
"""Each op hierarchical does: its build and its cost, side by side (its ops are these keys)."""


def hierarchical_terms(op: Op, nodes: int, per_node: int, n: float) -> tuple[CostTerms, CostTerms]:
    """(inside a node, across nodes): the cost of hierarchical ``op`` on ``nodes`` nodes of ``per_node``
    ranks, n bytes, each term on its own link class (steps, bytes over a rank's port, reduced bytes).
    Raises NotApplicableError for an op it does not do."""
    per_op = _PER_OP.get(op)
    if per_op is None:
        raise NotApplicableError(f"hierarchical does not do {op.value}")
    return per_op.terms(nodes, per_node, n)


def _needs_nodes(p: int, n: float, k: int) -> CostTerms:
    raise NotApplicableError(
        "hierarchical's cost depends on the nodes and has two link classes (inside a node, across nodes); "
        "a one-class model of the world size alone cannot price it (collbench predict --hierarchy does)"
    )


HIERARCHICAL = AlgorithmSpec(
    name="hierarchical",
    ops=frozenset(_PER_OP),
    builder=build_hierarchical,
    summary="rings inside each node, then k rings across nodes (one per local rank, 1/k each): 2(m-1) "
    "inter-node steps; needs nodes",
    # A formula of one link class sees only the world size; hierarchical's cost needs the node shape
    # and two link classes (hierarchical_terms), so fits and predictions of one class refuse it.
    costs=CostFormulas(
        all_reduce=_needs_nodes,
        reduce_scatter=_needs_nodes,
        all_gather=_needs_nodes,
        broadcast=_needs_nodes,
        reduce=_needs_nodes,
    ),
    needs_nodes=True,
)

SPECS: tuple[AlgorithmSpec, ...] = (HIERARCHICAL,)
