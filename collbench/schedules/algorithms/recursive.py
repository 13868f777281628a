"""Recursive doubling and Rabenseifner's algorithm: log2(n) exchanges between partners ``v ^ d``.

Non-powers of two use the standard fold (as MPICH and Open MPI do): with ``p`` the largest power of two
not above n and ``extra = n - p``, each odd rank ``2i+1`` below ``2*extra`` first hands its data to
``2i`` and sits out; the p survivors (new rank v is ``2v`` for v < extra, else ``v + extra``) run the
power-of-two algorithm; at the end ``2i`` hands the result back to ``2i+1``. New rank v stands for the
ranks ``[lo(v), hi(v))``, always a contiguous range, so a block of new ranks is a contiguous run of
chunks and every exchange is one range.

* recursive-doubling all-reduce: lg p exchanges of the whole buffer, each side reducing.
* recursive-doubling all-gather: lg p exchanges of the chunks gathered so far (1, 2, 4... blocks).
* recursive-doubling scan and exscan: Hillis and Steele's doubling, built in ``scan.py``.
* rabenseifner: recursive halving (exchange half of what is still being reduced, keep the other half),
  lg p steps, leaving new rank v with block v complete; then, for all-reduce, recursive doubling
  all-gather; for reduce-scatter, nothing more; for reduce, a binomial gather of the blocks to the root.
"""

from __future__ import annotations

from collections.abc import Callable

from collbench.layouts.model import Layout
from collbench.schedules.algorithms._common import RoundBuilder, check_count_and_segments, layout_name
from collbench.schedules.algorithms.scan import build_scan, doubling_exscan_cost, doubling_scan_cost
from collbench.schedules.cost import ZERO, CostFormulas, CostTerms, ceil_log2, log2_floor
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import SCAN_OPS, Op, chunk_bounds
from collbench.schedules.spec import AlgorithmSpec
from collbench.units import counted


class _Fold:
    """The non-power-of-two fold over virtual ranks 0..n-1 (rank ``(v + offset) % n``)."""

    def __init__(self, world_size: int, count: int, offset: int = 0) -> None:
        self.n = world_size
        self.p = 1 << (world_size.bit_length() - 1)
        self.extra = world_size - self.p
        self.offset = offset
        self.chunks = chunk_bounds(count, world_size)
        self.count = count
        # bounds[v] = first element of new rank v's block; bounds[p] = count.
        self.bounds = [self.chunks[self.lo(v)][0] for v in range(self.p)] + [count]

    def rank(self, virtual: int) -> int:
        return (virtual + self.offset) % self.n

    def lo(self, v: int) -> int:
        """The first virtual rank new rank v stands for."""
        return 2 * v if v < self.extra else v + self.extra

    def survivor(self, v: int) -> int:
        return self.rank(self.lo(v))

    def block(self, first: int, width: int) -> tuple[int, int]:
        """The elements of new ranks ``[first, first + width)``."""
        return self.bounds[first], self.bounds[first + width]

    def distances(self) -> list[int]:
        return [1 << k for k in range(self.p.bit_length() - 1)]

    def pairs(self, b: RoundBuilder) -> range:
        """The fold's pairs ``(2i, 2i + 1)`` a build makes transfers for: all, or the kept rank's."""
        if b.rank is None:
            return range(self.extra)
        i = (b.rank - self.offset) % self.n // 2
        return range(i, i + 1) if i < self.extra else range(0)

    def partners(self, b: RoundBuilder, d: int) -> list[int]:
        """The new ranks v whose exchange ``v <-> v ^ d`` a build makes transfers for (ascending): all,
        or the kept rank's new rank and its partner (none when it sits the exchanges out)."""
        if b.rank is None:
            return list(range(self.p))
        x = (b.rank - self.offset) % self.n
        if x < 2 * self.extra and x % 2:
            return []  # folded in: it sits out
        v = x // 2 if x < 2 * self.extra else x - self.extra
        return sorted({v, v ^ d})


def _fold_in(b: RoundBuilder, f: _Fold, ranges: list[tuple[int, int]] | None, *, reduce: bool) -> int:
    """Odd ranks below 2*extra hand their data (the whole buffer, or their own chunk) to their even
    neighbour. Returns the number of rounds used."""
    for i in f.pairs(b):
        a, z = (0, f.count) if ranges is None else ranges[2 * i + 1]
        b.transfer(0, f.rank(2 * i + 1), f.rank(2 * i), a, z, reduce=reduce, label="fold in")
    return 1 if f.extra else 0


def _fold_out(b: RoundBuilder, f: _Fold, rnd: int, *, skip_own: bool) -> None:
    """Even ranks below 2*extra hand the result back; ``skip_own`` leaves out the odd rank's own chunk."""
    for i in f.pairs(b):
        src, dst = f.rank(2 * i), f.rank(2 * i + 1)
        if skip_own:
            a, z = f.chunks[2 * i + 1]
            b.transfer(rnd, src, dst, 0, a, reduce=False, label="fold out")
            b.transfer(rnd, src, dst, z, f.count, reduce=False, label="fold out")
        else:
            b.transfer(rnd, src, dst, 0, f.count, reduce=False, label="fold out")


def _doubling_gather(b: RoundBuilder, f: _Fold, rnd: int) -> int:
    """Recursive doubling all-gather of the blocks among the p survivors; returns the next round."""
    for d in f.distances():
        for v in f.partners(b, d):
            a, z = f.block(v & ~(d - 1), d)
            label = f"exchange {counted(d, 'block')}"
            b.transfer(rnd, f.survivor(v), f.survivor(v ^ d), a, z, reduce=False, label=label)
        rnd += 1
    return rnd


def _halving_scatter(b: RoundBuilder, f: _Fold, rnd: int) -> int:
    """Recursive halving reduce-scatter among the p survivors; new rank v ends with block v reduced."""
    for d in reversed(f.distances()):
        for v in f.partners(b, d):
            base = v & ~(2 * d - 1)
            # Keep the half that holds v's own block; send the other half to the partner, who keeps it.
            give = base if v & d else base + d
            a, z = f.block(give, d)
            b.transfer(rnd, f.survivor(v), f.survivor(v ^ d), a, z, reduce=True, label=f"halve, distance {d}")
        rnd += 1
    return rnd


def _doubling_all_reduce(b: RoundBuilder, f: _Fold) -> None:
    rnd = _fold_in(b, f, None, reduce=True)
    for d in f.distances():
        for v in f.partners(b, d):
            b.transfer(rnd, f.survivor(v), f.survivor(v ^ d), 0, f.count, reduce=True, label=f"exchange, distance {d}")
        rnd += 1
    _fold_out(b, f, rnd, skip_own=False)


def _doubling_all_gather(b: RoundBuilder, f: _Fold) -> None:
    rnd = _fold_in(b, f, f.chunks, reduce=False)
    rnd = _doubling_gather(b, f, rnd)
    _fold_out(b, f, rnd, skip_own=True)


_DOUBLING: dict[Op, Callable[[RoundBuilder, _Fold], None]] = {
    Op.ALL_REDUCE: _doubling_all_reduce,
    Op.ALL_GATHER: _doubling_all_gather,
}
"""The ops recursive doubling builds here; scan and exscan are ``scan.py``'s doubling (their own builder)."""


def build_recursive_doubling(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
    rank: int | None = None,
) -> Schedule:
    """Recursive doubling all-reduce or all-gather for any world size (see the module docstring); scan
    and exscan by Hillis and Steele's doubling (``scan.py``)."""
    check_count_and_segments(count, segments)
    doubling = _DOUBLING.get(op)
    if doubling is None:
        return build_scan("recursive-doubling", op, world_size, count, layout, rank)
    b = RoundBuilder(world_size, rank)
    doubling(b, _Fold(world_size, count))
    return b.build(op, "recursive-doubling", count, root=root, layout=layout_name(layout))


def _all_gather_back(b: RoundBuilder, f: _Fold, rnd: int) -> None:
    rnd = _doubling_gather(b, f, rnd)
    _fold_out(b, f, rnd, skip_own=False)


def _own_chunk_back(b: RoundBuilder, f: _Fold, rnd: int) -> None:
    # Every survivor holds its own block; a folded-in rank gets its chunk back from its partner.
    for i in f.pairs(b):
        a, z = f.chunks[2 * i + 1]
        b.transfer(rnd, f.rank(2 * i), f.rank(2 * i + 1), a, z, reduce=False, label="fold out")


def _gather_to_root(b: RoundBuilder, f: _Fold, rnd: int) -> None:
    for d in f.distances():
        # Blocks of new ranks v = d mod 2d go to v - d; the kept rank's partner is v ^ d either way.
        for v in (u for u in f.partners(b, d) if u % (2 * d) == d):
            a, z = f.block(v, d)
            b.transfer(rnd, f.survivor(v), f.survivor(v - d), a, z, reduce=False, label=f"gather {counted(d, 'block')}")
        rnd += 1


_AFTER_HALVING: dict[Op, Callable[[RoundBuilder, _Fold, int], None]] = {
    Op.ALL_REDUCE: _all_gather_back,
    Op.REDUCE_SCATTER: _own_chunk_back,
    Op.REDUCE: _gather_to_root,
}
"""What Rabenseifner does once recursive halving left new rank v with block v, per op (its ops are
these keys)."""


def build_rabenseifner(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
    rank: int | None = None,
) -> Schedule:
    """Rabenseifner all-reduce, reduce-scatter or reduce for any world size (see the module docstring)."""
    check_count_and_segments(count, segments)
    # A rooted op (reduce) counts ranks from the root, so that the root survives the fold as new rank 0.
    f = _Fold(world_size, count, offset=root if op.spec.rooted else 0)
    b = RoundBuilder(world_size, rank)
    rnd = _fold_in(b, f, None, reduce=True)
    rnd = _halving_scatter(b, f, rnd)
    _AFTER_HALVING[op](b, f, rnd)
    return b.build(op, "rabenseifner", count, root=root, layout=layout_name(layout))


# -- closed-form costs (p ranks, n bytes, k segments) ----------------------------------------------
#
# Where p is not a power of two, the fold above adds one step of the whole buffer in (reduced where the
# op reduces) and one step handing the result back out; ``_fold_cost`` prices the two.


def _fold_cost(p: int, n: float, reduces: bool, back_bytes: float) -> CostTerms:
    """Extra cost of folding ``p - 2**lg p`` ranks into partners (non powers of two) and back."""
    if p & (p - 1) == 0:
        return ZERO
    pre = CostTerms(1.0, n, n if reduces else 0.0)
    post = CostTerms(1.0, back_bytes, 0.0)
    return pre + post


def _halving_chunks(p: int) -> int:
    """Chunks (of n/p) on the critical path of recursive halving, or of doubling, over the fold.

    After the fold, new rank v < extra stands for two ranks (two chunks), the others for one, so the
    pair exchanging at distance d over new ranks [base, base + 2d) moves the heavier half,
    ``d + |[base, base + d) & [0, extra)|`` chunks, and both partners wait for it. The pair at base 0 is
    the heaviest at every distance, and one path of the butterfly visits it at every distance (its
    bases are the bits already exchanged, which the path may pick freely), so the critical path is
    ``sum over d of d + min(d, extra)`` chunks: ``p2 - 1`` at a power of two.
    """
    p2 = 1 << log2_floor(p)
    extra = p - p2
    return sum(d + min(d, extra) for d in (1 << j for j in range(log2_floor(p))))


def _rd_all_reduce_cost(p: int, n: float, k: int) -> CostTerms:
    lg = log2_floor(p)
    return CostTerms(float(lg), n * lg, n * lg) + _fold_cost(p, n, True, n)


def _rab_all_reduce_cost(p: int, n: float, k: int) -> CostTerms:
    # Halving then doubling over the fold, each along the heaviest pairs (see _halving_chunks); the
    # fold moves the whole buffer in (reduced) and out.
    chunks = _halving_chunks(p) * n / p
    return CostTerms(2.0 * log2_floor(p), 2 * chunks, chunks) + _fold_cost(p, n, True, n)


def _halving_reduce_scatter_cost(p: int, n: float, k: int) -> CostTerms:
    # Rabenseifner's halving over the fold (see _halving_chunks), then the folded rank gets its own
    # chunk back: n/p more bytes, nothing reduced.
    chunks = _halving_chunks(p) * n / p
    return CostTerms(float(log2_floor(p)), chunks, chunks) + _fold_cost(p, n, True, n / p)


def _doubling_all_gather_cost(p: int, n: float, k: int) -> CostTerms:
    # The folded rank hands over its chunk (n/p), the survivors double along the heaviest pairs (see
    # _halving_chunks), and the folded rank gets everything but its own chunk back (n - n/p).
    chunks = _halving_chunks(p) * n / p
    return CostTerms(float(log2_floor(p)), chunks, 0.0) + _fold_cost(p, n / p, False, n - n / p)


def _binomial_cost(p: int, n: float, reduces: bool) -> CostTerms:
    # Recursive doubling builds neither broadcast nor reduce; a binomial tree, ceil(lg p) steps of the
    # whole buffer, is what it would do.
    steps = ceil_log2(p)
    return CostTerms(float(steps), steps * n, steps * n if reduces else 0.0)


def _binomial_broadcast_cost(p: int, n: float, k: int) -> CostTerms:
    return _binomial_cost(p, n, False)


def _binomial_reduce_cost(p: int, n: float, k: int) -> CostTerms:
    return _binomial_cost(p, n, True)


def _scatter_allgather_broadcast_cost(p: int, n: float, k: int) -> CostTerms:
    # Broadcast as scatter (recursive halving) + all-gather (doubling).
    p2 = 1 << log2_floor(p)
    f = (p2 - 1) / p2
    fold = ZERO if p == p2 else CostTerms(1.0, n, 0.0)
    return CostTerms(2.0 * log2_floor(p), 2 * f * n, 0.0) + fold


def _rab_reduce_cost(p: int, n: float, k: int) -> CostTerms:
    # Fold, halving (see _halving_chunks), then a binomial gather of the blocks to new rank 0 (the
    # root): lg p more steps, and new rank 0's port takes every block but its own, the chunks of new
    # ranks 1..p2-1, the first extra - 1 of which stand for two ranks.
    p2 = 1 << log2_floor(p)
    extra = p - p2
    halving = _halving_chunks(p) * n / p
    gathered = (p2 - 1 + max(0, extra - 1)) * n / p
    fold = ZERO if extra == 0 else CostTerms(1.0, n, n)
    return CostTerms(2.0 * log2_floor(p), halving + gathered, halving) + fold


RECURSIVE_DOUBLING = AlgorithmSpec(
    name="recursive-doubling",
    ops=frozenset(_DOUBLING) | SCAN_OPS,
    builder=build_recursive_doubling,
    summary="log2(n) pairwise exchanges of everything so far: fewest steps, lg(n) x the data per link; "
    "scan: Hillis-Steele, to rank+2^k",
    costs=CostFormulas(
        all_reduce=_rd_all_reduce_cost,
        reduce_scatter=_halving_reduce_scatter_cost,
        all_gather=_doubling_all_gather_cost,
        broadcast=_binomial_broadcast_cost,
        reduce=_binomial_reduce_cost,
        scan=doubling_scan_cost,
        exscan=doubling_exscan_cost,
    ),
)
RABENSEIFNER = AlgorithmSpec(
    name="rabenseifner",
    ops=frozenset(_AFTER_HALVING),
    builder=build_rabenseifner,
    summary="recursive halving reduce-scatter + doubling all-gather: 2 lg(n) steps, 2(n-1)/n of the data",
    costs=CostFormulas(
        all_reduce=_rab_all_reduce_cost,
        reduce_scatter=_halving_reduce_scatter_cost,
        all_gather=_doubling_all_gather_cost,
        broadcast=_scatter_allgather_broadcast_cost,
        reduce=_rab_reduce_cost,
    ),
)

SPECS: tuple[AlgorithmSpec, ...] = (RECURSIVE_DOUBLING, RABENSEIFNER)
