"""``binomial``: scatter and gather along a binomial tree rooted anywhere (Open MPI's
``scatter_intra_binomial``/``gather_intra_binomial``, MPICH's short-message scatter and gather).

Ranks are renumbered relative to the root (``v = (r - root) mod n``), so any root works. Scatter: in
round t, with ``m = 2^(L-1-t)`` and ``L = ceil(log2 n)``, every relative rank ``v`` that is a multiple
of ``2m`` and holds the blocks of ``[v, v + 2m)`` hands those of ``[v + m, v + 2m)`` (its upper half,
the subtree below ``v + m``) to ``v + m``. Gather is the same tree the other way, smallest subtrees
first. Blocks never move inside a buffer: block j is at its place in every rank that holds it (ir.py),
so a subtree's blocks are one range, or two where the relative numbering wraps past the last rank.

ceil(log2 n) steps instead of linear's one, but one message per step: the root's port moves the same
n-1 blocks either way, and for small messages the latency of n-1 messages is what binomial saves.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from collbench.layouts.model import Layout
from collbench.schedules.algorithms._common import RoundBuilder, check_count_and_segments, layout_name
from collbench.schedules.cost import CostFormulas, CostTerms, ceil_log2
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op
from collbench.schedules.spec import AlgorithmSpec


def subtree_ranges(first: int, stop: int, root: int, n: int, block: int) -> list[tuple[int, int]]:
    """The elements of the blocks of relative ranks ``[first, stop)``: one range, or two when the real
    ranks wrap past n - 1."""
    lo = (first + root) % n
    hi = lo + stop - first
    if hi <= n:
        return [(lo * block, hi * block)]
    return [(lo * block, n * block), (0, (hi - n) * block)]


def _lower_ends(b: RoundBuilder, n: int, root: int, m: int) -> Sequence[int]:
    """The relative ranks v (multiples of ``2m``) whose pair ``v -- v + m`` touches a kept rank: all
    of them in a whole build; in a one-rank build the one at or just below the kept rank, if the kept
    rank is that pair's lower or upper end (O(1))."""
    if b.rank is None:
        return range(0, n, 2 * m)
    v = (b.rank - root) % n
    lower = v - v % (2 * m)
    return (lower,) if v in (lower, lower + m) else ()


@dataclass(frozen=True, slots=True)
class _Way:
    """Which way an op moves the blocks along the tree."""

    down: bool
    """From the root's side to the subtrees, halving the biggest subtrees first (scatter); else up,
    joining the smallest first (gather)."""
    label: str


_WAYS: dict[Op, _Way] = {
    Op.SCATTER: _Way(down=True, label="hand a subtree its blocks"),
    Op.GATHER: _Way(down=False, label="a subtree's blocks up"),
}
"""The ops binomial builds, and which way each goes: the one place that says so (its ops are these keys)."""


def build_binomial(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
    rank: int | None = None,
) -> Schedule:
    """Binomial-tree scatter or gather from (to) ``root``; any world size and root, a count that does
    not divide leaves its tail out."""
    check_count_and_segments(count, segments)
    n = world_size
    block = count // n
    levels = ceil_log2(n)
    b = RoundBuilder(n, rank)
    way = _WAYS[op]
    for t in range(levels):
        m = 1 << (levels - 1 - t) if way.down else 1 << t
        for v in _lower_ends(b, n, root, m):
            if v + m >= n:
                continue
            upper, lower = (v + m + root) % n, (v + root) % n
            src, dst = (lower, upper) if way.down else (upper, lower)
            for a, z in subtree_ranges(v + m, min(v + 2 * m, n), root, n, block):
                b.transfer(t, src, dst, a, z, reduce=False, label=f"{way.label} {t + 1}/{levels}")
    return b.build(op, "binomial", count, root=root, layout=layout_name(layout))


# -- closed-form costs (p ranks, n bytes, k segments) ----------------------------------------------


def binomial_broadcast_cost(p: int, n: float, k: int) -> CostTerms:
    """The whole buffer down a binomial tree: ceil(log2 p) steps, the root sending it in each."""
    steps = ceil_log2(p)
    return CostTerms(float(steps), steps * n, 0.0)


def binomial_reduce_cost(p: int, n: float, k: int) -> CostTerms:
    """The whole buffer up a binomial tree, reduced at every hop: the root takes one in each step."""
    steps = ceil_log2(p)
    return CostTerms(float(steps), steps * n, steps * n)


def _blocks_cost(p: int, n: float, k: int) -> CostTerms:
    # ceil(log2 p) steps. The root's subtree is the fullest at every level, so its port is the critical
    # path: it sends (or takes in) every block but its own, n/p each, one message a step.
    return CostTerms(float(ceil_log2(p)), (p - 1) / p * n, 0.0)


def _reduce_scatter_cost(p: int, n: float, k: int) -> CostTerms:
    # A binomial reduce to the root, then the root's binomial scatter of the chunks.
    return binomial_reduce_cost(p, n, k) + _blocks_cost(p, n, k)


def _all_gather_cost(p: int, n: float, k: int) -> CostTerms:
    # A binomial gather to the root, then a binomial broadcast of the whole buffer.
    return _blocks_cost(p, n, k) + binomial_broadcast_cost(p, n, k)


def _all_reduce_cost(p: int, n: float, k: int) -> CostTerms:
    return binomial_reduce_cost(p, n, k) + binomial_broadcast_cost(p, n, k)


BINOMIAL = AlgorithmSpec(
    name="binomial",
    ops=frozenset(_WAYS),
    builder=build_binomial,
    summary="binomial tree from/to the root: ceil(log2 n) steps of one message, subtrees' blocks forwarded",
    costs=CostFormulas(
        # The five as a binomial tree would do them: broadcast and reduce, and the others composed of
        # those and this scatter or gather.
        all_reduce=_all_reduce_cost,
        reduce_scatter=_reduce_scatter_cost,
        all_gather=_all_gather_cost,
        broadcast=binomial_broadcast_cost,
        reduce=binomial_reduce_cost,
        scatter=_blocks_cost,
        gather=_blocks_cost,
    ),
)

SPECS: tuple[AlgorithmSpec, ...] = (BINOMIAL,)
