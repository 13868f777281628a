"""The standard trees over ranks 0..n-1, as parent arrays (``parent[r]`` is r's parent, -1 at the root).

* :func:`binary_tree`: a complete binary tree in heap order, rotated so that ``root`` is at the top.
  The pipelined ``tree`` algorithm uses it: depth ``floor(log2 n)``.
* :func:`double_binary_tree`: NCCL's pair of complementary binary trees (the ``two-tree`` algorithm):
  each rank is interior in at most one of them when n is even, so both halves of the data use every
  rank's links about equally. The construction is NCCL's ncclGetDtree (NVIDIA/nccl src/graph/trees.cc).
* :func:`binomial_tree`: the tree of binomial broadcast/reduce (parent = virtual rank with its lowest
  set bit cleared), depth ``ceil(log2 n)``.
"""

from __future__ import annotations

from collbench.units import counted


def _check_size(n: int, root: int = 0) -> None:
    if n < 1:
        raise ValueError(f"a tree needs at least one rank, got n={n}")
    if not 0 <= root < n:
        raise ValueError(f"root {root} is not a rank of a world of {n}")


def binary_tree(n: int, root: int = 0) -> tuple[int, ...]:
    """A complete binary tree over ``n`` ranks in heap order, with ``root`` at the top.

    Rank r plays virtual rank ``v = (r - root) mod n``; v's parent is ``(v - 1) // 2``. Every interior
    rank has at most two children, and the depth is ``floor(log2 n)`` edges.
    Raises ValueError for ``n < 1`` or a root outside ``0..n-1``.
    """
    _check_size(n, root)
    parent = [-1] * n
    for v in range(1, n):
        parent[(v + root) % n] = ((v - 1) // 2 + root) % n
    return tuple(parent)


def _btree_parent(n: int, r: int) -> int:
    """NCCL's first tree: the parent of rank r (ncclGetBtree, NVIDIA/nccl src/graph/trees.cc)."""
    if r == 0:
        return -1
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    # A rank whose would-be parent falls off the end hangs directly off the next rank up.
    return up if up < n else r ^ bit


def double_binary_tree(n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """NCCL's double binary tree over ``n`` ranks: two parent arrays.

    The first tree: rank 0 is the root, whose single child is the highest power of two below n; any
    other rank r with lowest set bit ``bit`` hangs off ``(r ^ bit) | (bit << 1)``, or off ``r ^ bit``
    when that is not below n; odd ranks are leaves. The second tree is the first mirrored (rank r plays
    ``n-1-r``) when n is even, shifted (rank r plays ``(r-1) mod n``) when n is odd. For even n, every
    rank is interior in at most one tree. Raises ValueError for ``n < 1``.
    """
    _check_size(n)
    first = tuple(_btree_parent(n, r) for r in range(n))
    second = [-1] * n
    for r in range(n):
        if n % 2 == 0:
            plays = n - 1 - r
            up = first[plays]
            second[r] = -1 if up == -1 else n - 1 - up
        else:
            plays = (r - 1) % n
            up = first[plays]
            second[r] = -1 if up == -1 else (up + 1) % n
    return first, tuple(second)


def binomial_tree(n: int, root: int = 0) -> tuple[int, ...]:
    """The binomial tree over ``n`` ranks rooted at ``root``.

    Virtual rank ``v = (r - root) mod n`` hangs off ``v`` with its lowest set bit cleared, so the root
    has ``ceil(log2 n)`` children and the depth is ``ceil(log2 n)`` edges.
    Raises ValueError for ``n < 1`` or a root outside ``0..n-1``.
    """
    _check_size(n, root)
    parent = [-1] * n
    for v in range(1, n):
        parent[(v + root) % n] = ((v & (v - 1)) + root) % n
    return tuple(parent)


def tree_root(parent: tuple[int, ...] | list[int]) -> int:
    """The root of a parent array; raises ValueError unless there is exactly one."""
    roots = [r for r, p in enumerate(parent) if p == -1]
    if len(roots) != 1:
        raise ValueError(f"a tree has exactly one root (-1), got {len(roots)}: {tuple(parent)}")
    return roots[0]


def tree_children(parent: tuple[int, ...] | list[int]) -> list[list[int]]:
    """Children of every rank, in ascending rank order. Raises ValueError for a parent out of range."""
    n = len(parent)
    children: list[list[int]] = [[] for _ in range(n)]
    for r, p in enumerate(parent):
        if p == -1:
            continue
        if not 0 <= p < n or p == r:
            raise ValueError(f"rank {r} has parent {p}, which is not another rank of a world of {n}")
        children[p].append(r)
    return children


def tree_depth(parent: tuple[int, ...] | list[int]) -> int:
    """Edges on the longest root-to-leaf path (0 for one rank).

    Raises ValueError unless ``parent`` is a tree: one root, every rank reachable from it, no cycle.
    """
    root = tree_root(parent)
    children = tree_children(parent)
    depth = 0
    seen = 1
    level = [root]
    while True:
        level = [c for r in level for c in children[r]]
        if not level:
            break
        seen += len(level)
        depth += 1
    if seen != len(parent):
        lost = counted(len(parent) - seen, "rank")
        raise ValueError(f"not a tree: {lost} unreachable from root {root}: {tuple(parent)}")
    return depth


def bfs_order(parent: tuple[int, ...] | list[int]) -> list[int]:
    """Ranks from the root down, level by level (parents before their children)."""
    children = tree_children(parent)
    order = [tree_root(parent)]
    i = 0
    while i < len(order):
        order.extend(children[order[i]])
        i += 1
    if len(order) != len(parent):
        raise ValueError(f"not a tree: some ranks are unreachable from the root: {tuple(parent)}")
    return order
