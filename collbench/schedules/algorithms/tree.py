"""Tree algorithms, pipelined in segments: ``tree`` (one binary tree) and ``two-tree`` (NCCL's double
binary tree, each half of the data on one tree).

Pipelining: the data is cut into ``segments`` pieces. Going up (reduce), a rank of height h (edges to
its deepest leaf) sends segment j to its parent in round ``j + h``, when all its children's segment j
has arrived. Going down (broadcast), a rank at depth d forwards segment j in round ``j + d``. An
all-reduce starts the way down of segment j as soon as the root has it complete, so both directions
overlap: about ``2 * depth + segments`` rounds, each carrying 1/segments of the data.

``tree`` also does barrier: a token up the binary tree and back down (2 depth rounds), no segments.

For broadcast and reduce, ``two-tree`` hangs both trees (built over the n-1 other ranks) below the
root, so the root feeds one half into each and every other rank is interior in at most one of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from collbench.layouts.model import Layout
from collbench.layouts.trees import bfs_order, binary_tree, double_binary_tree, tree_root
from collbench.schedules.algorithms._common import (
    RoundBuilder,
    check_count_and_segments,
    layout_name,
    layout_trees,
    segment_ranges,
)
from collbench.schedules.cost import CostFormulas, CostTerms, log2_floor, tree_phase
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op, chunk_bounds
from collbench.schedules.spec import AlgorithmSpec

Params = tuple[tuple[str, int], ...]
"""What a schedule records of how it was built (its segments)."""


@dataclass(frozen=True, slots=True)
class _Sweeps:
    """Which ways an op's data goes over a tree."""

    up: bool
    """Reduced toward the root."""
    down: bool
    """Broadcast from the root."""


_SWEEPS: dict[Op, _Sweeps] = {
    Op.ALL_REDUCE: _Sweeps(up=True, down=True),
    Op.BROADCAST: _Sweeps(up=False, down=True),
    Op.REDUCE: _Sweeps(up=True, down=False),
}
"""The ops both tree algorithms pipeline, and the sweeps each is made of: the one place that says so
(two-tree's ops are these keys; tree's are these and barrier)."""


def pipeline_tree(
    b: RoundBuilder,
    parent: tuple[int, ...],
    start: int,
    stop: int,
    segments: int,
    *,
    up: bool,
    down: bool,
    name: str = "tree",
) -> None:
    """Add a pipelined reduce (``up``), broadcast (``down``) or both over ``parent`` for ``[start, stop)``."""
    order = bfs_order(parent)
    root = order[0]
    depth = dict.fromkeys(order, 0)
    for r in order[1:]:
        depth[r] = depth[parent[r]] + 1
    height = dict.fromkeys(order, 0)
    for r in reversed(order[1:]):
        height[parent[r]] = max(height[parent[r]], height[r] + 1)
    segs = segment_ranges(start, stop, segments)
    # The way down of segment j starts once the root holds it complete (after its children's round).
    down_offset = height[root] if up else 0
    # A one-rank build walks only the kept rank and its children, in the same (BFS) order.
    below = [r for r in order[1:] if b.keeps(r) or b.keeps(parent[r])]
    for j, (a, z) in enumerate(segs):
        for r in below:
            if up:
                b.transfer(j + height[r], r, parent[r], a, z, reduce=True, label=f"{name} reduce up")
            if down:
                b.transfer(
                    down_offset + j + depth[parent[r]],
                    parent[r],
                    r,
                    a,
                    z,
                    reduce=False,
                    label=f"{name} broadcast down",
                )


def _rooted_pair(world_size: int, root: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Two complementary binary trees over the ranks other than ``root``, each hung below ``root``."""
    others = [(root + 1 + i) % world_size for i in range(world_size - 1)]
    pair = double_binary_tree(len(others))
    trees: list[tuple[int, ...]] = []
    for sub in pair:
        parent = [-1] * world_size
        for i, p in enumerate(sub):
            parent[others[i]] = root if p == -1 else others[p]
        trees.append(tuple(parent))
    return trees[0], trees[1]


TreeBuild = Callable[[RoundBuilder, tuple[int, ...], int, int], tuple[int, Params]]
"""One op over one tree: (builder, parent array, count, segments) -> (the count the schedule records,
its params)."""


def _pipelined(sweeps: _Sweeps) -> TreeBuild:
    def build(b: RoundBuilder, parent: tuple[int, ...], count: int, segments: int) -> tuple[int, Params]:
        pipeline_tree(b, parent, 0, count, segments, up=sweeps.up, down=sweeps.down)
        return count, (("segments", segments),)

    return build


def _barrier(b: RoundBuilder, parent: tuple[int, ...], count: int, segments: int) -> tuple[int, Params]:
    # The token goes up, every rank merging whom its children heard from, and the root's (everyone)
    # comes back down: an all-reduce of one element that carries no data.
    pipeline_tree(b, parent, 0, 1, 1, up=True, down=True, name="barrier")
    return 0, ()


_TREE_BUILDS: dict[Op, TreeBuild] = {op: _pipelined(sweeps) for op, sweeps in _SWEEPS.items()} | {Op.BARRIER: _barrier}
"""How ``tree`` builds each op it does over its one tree (its ops are these keys)."""


def build_tree(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
    rank: int | None = None,
) -> Schedule:
    """Pipelined binary tree: the layout's first tree when it fits (for reduce and broadcast only if
    rooted at ``root``), else :func:`binary_tree` rooted at ``root``. Raises ConfigError for a layout of
    another size."""
    check_count_and_segments(count, segments)
    trees = layout_trees(layout, world_size)
    parent = binary_tree(world_size, root)
    # A rooted op's tree must hang from its root; the others' (all-reduce, barrier) may hang anywhere.
    if trees and (not op.spec.rooted or tree_root(trees[0]) == root):
        parent = trees[0]
    b = RoundBuilder(world_size, rank)
    recorded, params = _TREE_BUILDS[op](b, parent, count, segments)
    return b.build(op, "tree", recorded, root=root, layout=layout_name(layout), params=params)


def build_two_tree(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
    rank: int | None = None,
) -> Schedule:
    """Double binary tree: the first half of the buffer on one tree, the second half on the other, both
    pipelined in ``segments`` pieces and running in the same rounds. All-reduce uses the layout's two
    trees when it has them, else :func:`double_binary_tree`. Raises ConfigError for a layout of another
    size."""
    check_count_and_segments(count, segments)
    n = world_size
    trees = layout_trees(layout, n)
    if op.spec.rooted:
        # Broadcast and reduce: both trees hang below the root.
        pair = _rooted_pair(n, root) if n > 1 else ((-1,), (-1,))
    else:
        pair = (trees[0], trees[1]) if len(trees) >= 2 else double_binary_tree(n)
    sweeps = _SWEEPS[op]
    b = RoundBuilder(n, rank)
    for k, ((a, z), parent) in enumerate(zip(chunk_bounds(count, 2), pair, strict=True)):
        pipeline_tree(
            b,
            parent,
            a,
            z,
            segments,
            up=sweeps.up,
            down=sweeps.down,
            name=f"tree {k + 1}",
        )
    return b.build(op, "two-tree", count, root=root, layout=layout_name(layout), params=(("segments", segments),))


# -- closed-form costs (p ranks, n bytes, k segments) ----------------------------------------------
#
# The binary tree is in heap order (depth ``floor(log2 p)``); NCCL's double binary tree has depth
# ``1 + floor(log2(p - 1))``. Pairs the trees do not build (reduce-scatter, all-gather) are priced as a
# reduce (or gather) at the root plus one step from (or to) every rank.


def binary_tree_depth(p: int) -> int:
    """Depth (edges) of the heap-ordered binary tree over p ranks."""
    return log2_floor(p) if p > 1 else 0


def two_tree_depth(p: int) -> int:
    """Depth (edges) of NCCL's double binary tree over p ranks (the root has a single child)."""
    return 1 + log2_floor(p - 1) if p > 1 else 0


def _bin_fan(p: int) -> int:
    return 1 if p <= 2 else 2


def _heap_sizes(m: int) -> tuple[int, int]:
    """Sizes of the left and right subtrees of a heap-ordered (left-packed) binary tree of m ranks."""
    h = log2_floor(m)
    last = m - ((1 << h) - 1)
    left = (1 << (h - 1)) - 1 + min(last, 1 << (h - 1))
    return left, m - 1 - left


def _tree_reduce_unsegmented(m: int) -> int:
    """Whole buffers on the critical path of the unpipelined (k = 1) tree reduce over a heap of m ranks.

    A rank sends in the round of its height, so it takes both children in one step (its in-port moves
    two buffers) when their heights agree, and in two steps of one buffer each when the left subtree is
    a level deeper (only on the path to the last filled leaf); a single child costs one buffer. Only
    that one subtree is partial; a perfect subtree of height h takes 2h. O(log p).
    """
    if m <= 1:
        return 0
    if m & (m + 1) == 0:
        return 2 * log2_floor(m)
    left, right = _heap_sizes(m)
    if right == 0:
        return _tree_reduce_unsegmented(left) + 1
    el, er = _tree_reduce_unsegmented(left), _tree_reduce_unsegmented(right)
    if log2_floor(left) == log2_floor(right):
        return max(el, er) + 2
    return max(er + 1, el) + 1


def _tree_reduce_segments(p: int, k: int) -> int:
    """Segments (of n/k) on the critical path of the pipelined binary-tree reduce.

    Two ranks: a chain, one segment per round. Otherwise the root takes two segments per round for
    k - 1 rounds (its children feed it in the same rounds once the pipeline is full), after the first
    segment has climbed: two segments per level below a two-child rank, 2D - 1, and 2D when the last
    level reaches into the root's right subtree (both root children then have depth-D leaves and the
    root's in-port is busy from the first round). p = 4 is one level less: the root is the only rank
    with two children there. Derived by tracing the rounds of ``pipeline_tree`` and checked against the
    simulator (tests/unit/test_costs.py for p <= 32; by hand also p < 70, 120..139 and 250..261).
    """
    if p == 2:
        return k
    if k == 1:
        return _tree_reduce_unsegmented(p)
    d = log2_floor(p)
    last_level = p - (1 << d) + 1
    climb = 2 if p == 4 else 2 * d - 1 + (last_level > 1 << (d - 1))
    return 2 * (k - 1) + climb


def _tree_broadcast_segments(p: int, k: int) -> int:
    """Segments on the critical path of the pipelined binary-tree broadcast.

    A rank sends a segment to all its children in one round, so each hop costs the sender's fan-out in
    segments; the critical path ends at the leftmost deepest leaf, whose ancestors all have two
    children except, when p is a power of two, the last one (2D or 2D - 1 in all). Behind the first
    segment the other k - 1 follow at the pace of the slowest hop, the root's fan-out.
    """
    d = log2_floor(p)
    first = 2 * d - (1 if p & (p - 1) == 0 else 0)
    return first + min(2, p - 1) * (k - 1)


def _rooted_two_tree_depth(p: int) -> int:
    """Depth of ``two-tree``'s rooted pair: the double binary tree over the p - 1 others, below the root."""
    return 1 + two_tree_depth(p - 1)


def _tree_all_reduce_cost(p: int, n: float, k: int) -> CostTerms:
    # Steps are exact: the way down of segment j starts at round j + D, so 2D + k - 1 rounds. Reduced
    # bytes are the reduce's (the way down reduces nothing and never delays the way up). The byte term
    # is an upper bound (approximate): both phases priced at two segments a hop, without their overlap.
    d = binary_tree_depth(p)
    reduced = _tree_reduce_segments(p, k) * n / k
    bound = tree_phase(d, _bin_fan(p), n, k, True) + tree_phase(d, _bin_fan(p), n, k, False)
    return CostTerms(float(2 * d + k - 1), bound.beta, reduced)


def _two_tree_all_reduce_cost(p: int, n: float, k: int) -> CostTerms:
    # Steps are exact: each tree runs 2 * height + k - 1 rounds and the deeper sets the count. Bytes are
    # an upper bound (approximate): n/2 per tree, an interior rank taking two children's halves a hop.
    d = two_tree_depth(p)
    bound = tree_phase(d, 2, n / 2, k, True) + tree_phase(d, 2, n / 2, k, False)
    return CostTerms(float(2 * d + k - 1), bound.beta, bound.gamma)


def _reduce_scatter_cost(depth: int, fan: int, share: float, p: int, n: float, k: int) -> CostTerms:
    # Reduce to the root along the tree, then the root hands every rank its chunk.
    scatter = CostTerms(1.0, (p - 1) / p * n, 0.0)
    return tree_phase(depth, fan, n * share, k, True) + scatter


def _all_gather_cost(depth: int, fan: int, share: float, p: int, n: float, k: int) -> CostTerms:
    # Gather to the root (its port takes in everyone else's chunk), then broadcast down the tree.
    gather = CostTerms(float(depth), (p - 1) / p * n, 0.0)
    return gather + tree_phase(depth, fan, n * share, k, False)


def _tree_reduce_scatter_cost(p: int, n: float, k: int) -> CostTerms:
    return _reduce_scatter_cost(binary_tree_depth(p), _bin_fan(p), 1.0, p, n, k)


def _tree_all_gather_cost(p: int, n: float, k: int) -> CostTerms:
    return _all_gather_cost(binary_tree_depth(p), _bin_fan(p), 1.0, p, n, k)


def _two_tree_reduce_scatter_cost(p: int, n: float, k: int) -> CostTerms:
    return _reduce_scatter_cost(two_tree_depth(p), 2, 0.5, p, n, k)


def _two_tree_all_gather_cost(p: int, n: float, k: int) -> CostTerms:
    return _all_gather_cost(two_tree_depth(p), 2, 0.5, p, n, k)


def _tree_rooted_cost(p: int, n: float, k: int, reduces: bool) -> CostTerms:
    d = binary_tree_depth(p)
    # Reduce: every byte a rank receives it reduces, and its in-port is the busy one, so the reduced
    # bytes equal the moved ones.
    segs = _tree_reduce_segments(p, k) if reduces else _tree_broadcast_segments(p, k)
    return CostTerms(float(d + k - 1), segs * n / k, segs * n / k if reduces else 0.0)


def _two_tree_rooted_cost(p: int, n: float, k: int, reduces: bool) -> CostTerms:
    # Steps are exact (the pair hangs below the root, one level deeper than the double binary tree over
    # the others); bytes are an upper bound (approximate): n/2 per tree, two children.
    d = _rooted_two_tree_depth(p)
    bound = tree_phase(d, 2, n / 2, k, reduces)
    return CostTerms(float(d + k - 1), bound.beta, bound.gamma)


def _tree_barrier_cost(p: int, n: float, k: int) -> CostTerms:
    # Up the tree and back down, one round a level each way; no bytes (segments do not apply).
    return CostTerms(float(2 * binary_tree_depth(p)), 0.0, 0.0)


def _tree_broadcast_cost(p: int, n: float, k: int) -> CostTerms:
    return _tree_rooted_cost(p, n, k, False)


def _tree_reduce_cost(p: int, n: float, k: int) -> CostTerms:
    return _tree_rooted_cost(p, n, k, True)


def _two_tree_broadcast_cost(p: int, n: float, k: int) -> CostTerms:
    return _two_tree_rooted_cost(p, n, k, False)


def _two_tree_reduce_cost(p: int, n: float, k: int) -> CostTerms:
    return _two_tree_rooted_cost(p, n, k, True)


TREE = AlgorithmSpec(
    name="tree",
    ops=frozenset(_TREE_BUILDS),
    builder=build_tree,
    summary="pipelined binary tree: about 2 log2(n) + segments steps, the whole buffer over interior links",
    costs=CostFormulas(
        all_reduce=_tree_all_reduce_cost,
        reduce_scatter=_tree_reduce_scatter_cost,
        all_gather=_tree_all_gather_cost,
        broadcast=_tree_broadcast_cost,
        reduce=_tree_reduce_cost,
        barrier=_tree_barrier_cost,
        # The pipelined all-reduce's two phases overlap unevenly.
        approximate=frozenset({Op.ALL_REDUCE}),
    ),
    segmented=True,
)
TWO_TREE = AlgorithmSpec(
    name="two-tree",
    ops=frozenset(_SWEEPS),
    builder=build_two_tree,
    summary="double binary tree (NCCL's): half the data on each of two complementary pipelined trees",
    costs=CostFormulas(
        all_reduce=_two_tree_all_reduce_cost,
        reduce_scatter=_two_tree_reduce_scatter_cost,
        all_gather=_two_tree_all_gather_cost,
        broadcast=_two_tree_broadcast_cost,
        reduce=_two_tree_reduce_cost,
        # The critical path depends on the shape of both trees.
        approximate=frozenset({Op.ALL_REDUCE, Op.BROADCAST, Op.REDUCE}),
    ),
    segmented=True,
)

SPECS: tuple[AlgorithmSpec, ...] = (TREE, TWO_TREE)
