"""Tree algorithms, pipelined in segments: ``tree`` (one binary tree) and ``two-tree`` (NCCL's double
binary tree, each half of the data on one tree).

Pipelining: the data is cut into ``segments`` pieces. Going up (reduce), a rank of height h (edges to
its deepest leaf) sends segment j to its parent in round ``j + h``, when all its children's segment j
has arrived. Going down (broadcast), a rank at depth d forwards segment j in round ``j + d``. An
all-reduce starts the way down of segment j as soon as the root has it complete, so both directions
overlap: about ``2 * depth + segments`` rounds, each carrying 1/segments of the data.

For broadcast and reduce, ``two-tree`` hangs both trees (built over the n-1 other ranks) below the
root, so the root feeds one half into each and every other rank is interior in at most one of them.
"""

from __future__ import annotations

from collbench.layouts.model import Layout
from collbench.layouts.trees import bfs_order, binary_tree, double_binary_tree, tree_root
from collbench.schedules.algorithms._common import (
    RoundBuilder,
    check_count_and_segments,
    layout_name,
    layout_trees,
    segment_ranges,
)
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op, chunk_bounds
from collbench.schedules.registry import AlgorithmSpec, register

_TREE_OPS = frozenset({Op.ALL_REDUCE, Op.BROADCAST, Op.REDUCE})


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
    for j, (a, z) in enumerate(segs):
        for r in order[1:]:
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


def build_tree(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
) -> Schedule:
    """Pipelined binary tree: the layout's first tree when it fits (for reduce and broadcast only if
    rooted at ``root``), else :func:`binary_tree` rooted at ``root``. Raises ConfigError for a layout of
    another size."""
    check_count_and_segments(count, segments)
    trees = layout_trees(layout, world_size)
    parent = binary_tree(world_size, root)
    if trees and (op is Op.ALL_REDUCE or tree_root(trees[0]) == root):
        parent = trees[0]
    b = RoundBuilder(world_size)
    pipeline_tree(b, parent, 0, count, segments, up=op is not Op.BROADCAST, down=op is not Op.REDUCE)
    return b.build(op, "tree", count, root=root, layout=layout_name(layout), params=(("segments", segments),))


def build_two_tree(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
) -> Schedule:
    """Double binary tree: the first half of the buffer on one tree, the second half on the other, both
    pipelined in ``segments`` pieces and running in the same rounds. All-reduce uses the layout's two
    trees when it has them, else :func:`double_binary_tree`. Raises ConfigError for a layout of another
    size."""
    check_count_and_segments(count, segments)
    n = world_size
    trees = layout_trees(layout, n)
    if op is Op.ALL_REDUCE:
        pair = (trees[0], trees[1]) if len(trees) >= 2 else double_binary_tree(n)
    else:
        pair = _rooted_pair(n, root) if n > 1 else ((-1,), (-1,))
    b = RoundBuilder(n)
    for k, ((a, z), parent) in enumerate(zip(chunk_bounds(count, 2), pair, strict=True)):
        pipeline_tree(
            b,
            parent,
            a,
            z,
            segments,
            up=op is not Op.BROADCAST,
            down=op is not Op.REDUCE,
            name=f"tree {k + 1}",
        )
    return b.build(op, "two-tree", count, root=root, layout=layout_name(layout), params=(("segments", segments),))


TREE = register(
    AlgorithmSpec(
        name="tree",
        ops=_TREE_OPS,
        builder=build_tree,
        summary="pipelined binary tree: about 2 log2(n) + segments steps, the whole buffer over interior links",
        segmented=True,
    )
)
TWO_TREE = register(
    AlgorithmSpec(
        name="two-tree",
        ops=_TREE_OPS,
        builder=build_two_tree,
        summary="double binary tree (NCCL's): half the data on each of two complementary pipelined trees",
        segmented=True,
    )
)
