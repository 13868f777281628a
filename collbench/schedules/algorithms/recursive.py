"""Recursive doubling and Rabenseifner's algorithm: log2(n) exchanges between partners ``v ^ d``.

Non-powers of two use the standard fold (as MPICH and Open MPI do): with ``p`` the largest power of two
not above n and ``extra = n - p``, each odd rank ``2i+1`` below ``2*extra`` first hands its data to
``2i`` and sits out; the p survivors (new rank v is ``2v`` for v < extra, else ``v + extra``) run the
power-of-two algorithm; at the end ``2i`` hands the result back to ``2i+1``. New rank v stands for the
ranks ``[lo(v), hi(v))``, always a contiguous range, so a block of new ranks is a contiguous run of
chunks and every exchange is one range.

* recursive-doubling all-reduce: lg p exchanges of the whole buffer, each side reducing.
* recursive-doubling all-gather: lg p exchanges of the chunks gathered so far (1, 2, 4... blocks).
* rabenseifner: recursive halving (exchange half of what is still being reduced, keep the other half),
  lg p steps, leaving new rank v with block v complete; then, for all-reduce, recursive doubling
  all-gather; for reduce-scatter, nothing more; for reduce, a binomial gather of the blocks to the root.
"""

from __future__ import annotations

from collbench.layouts.model import Layout
from collbench.schedules.algorithms._common import RoundBuilder, check_count_and_segments, layout_name
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op, chunk_bounds
from collbench.schedules.registry import AlgorithmSpec, register


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


def _fold_in(b: RoundBuilder, f: _Fold, ranges: list[tuple[int, int]] | None, *, reduce: bool) -> int:
    """Odd ranks below 2*extra hand their data (the whole buffer, or their own chunk) to their even
    neighbour. Returns the number of rounds used."""
    for i in range(f.extra):
        a, z = (0, f.count) if ranges is None else ranges[2 * i + 1]
        b.transfer(0, f.rank(2 * i + 1), f.rank(2 * i), a, z, reduce=reduce, label="fold in")
    return 1 if f.extra else 0


def _fold_out(b: RoundBuilder, f: _Fold, rnd: int, *, skip_own: bool) -> None:
    """Even ranks below 2*extra hand the result back; ``skip_own`` leaves out the odd rank's own chunk."""
    for i in range(f.extra):
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
        for v in range(f.p):
            a, z = f.block(v & ~(d - 1), d)
            b.transfer(rnd, f.survivor(v), f.survivor(v ^ d), a, z, reduce=False, label=f"exchange {d}-block(s)")
        rnd += 1
    return rnd


def _halving_scatter(b: RoundBuilder, f: _Fold, rnd: int) -> int:
    """Recursive halving reduce-scatter among the p survivors; new rank v ends with block v reduced."""
    for d in reversed(f.distances()):
        for v in range(f.p):
            base = v & ~(2 * d - 1)
            # Keep the half that holds v's own block; send the other half to the partner, who keeps it.
            give = base if v & d else base + d
            a, z = f.block(give, d)
            b.transfer(rnd, f.survivor(v), f.survivor(v ^ d), a, z, reduce=True, label=f"halve, distance {d}")
        rnd += 1
    return rnd


def build_recursive_doubling(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
) -> Schedule:
    """Recursive doubling all-reduce or all-gather for any world size (see the module docstring)."""
    check_count_and_segments(count, segments)
    f = _Fold(world_size, count)
    b = RoundBuilder(world_size)
    if op is Op.ALL_REDUCE:
        rnd = _fold_in(b, f, None, reduce=True)
        for d in f.distances():
            for v in range(f.p):
                b.transfer(
                    rnd, f.survivor(v), f.survivor(v ^ d), 0, count, reduce=True, label=f"exchange, distance {d}"
                )
            rnd += 1
        _fold_out(b, f, rnd, skip_own=False)
    else:
        rnd = _fold_in(b, f, f.chunks, reduce=False)
        rnd = _doubling_gather(b, f, rnd)
        _fold_out(b, f, rnd, skip_own=True)
    return b.build(op, "recursive-doubling", count, root=root, layout=layout_name(layout))


def build_rabenseifner(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
) -> Schedule:
    """Rabenseifner all-reduce, reduce-scatter or reduce for any world size (see the module docstring)."""
    check_count_and_segments(count, segments)
    # Reduce counts ranks from the root, so that the root survives the fold as new rank 0.
    f = _Fold(world_size, count, offset=root if op is Op.REDUCE else 0)
    b = RoundBuilder(world_size)
    rnd = _fold_in(b, f, None, reduce=True)
    rnd = _halving_scatter(b, f, rnd)
    if op is Op.ALL_REDUCE:
        rnd = _doubling_gather(b, f, rnd)
        _fold_out(b, f, rnd, skip_own=False)
    elif op is Op.REDUCE_SCATTER:
        for i in range(f.extra):
            a, z = f.chunks[2 * i + 1]
            b.transfer(rnd, f.rank(2 * i), f.rank(2 * i + 1), a, z, reduce=False, label="fold out")
    else:
        for d in f.distances():
            for v in range(d, f.p, 2 * d):
                a, z = f.block(v, d)
                b.transfer(rnd, f.survivor(v), f.survivor(v - d), a, z, reduce=False, label=f"gather {d}-block(s)")
            rnd += 1
    return b.build(op, "rabenseifner", count, root=root, layout=layout_name(layout))


RECURSIVE_DOUBLING = register(
    AlgorithmSpec(
        name="recursive-doubling",
        ops=frozenset({Op.ALL_REDUCE, Op.ALL_GATHER}),
        builder=build_recursive_doubling,
        summary="log2(n) pairwise exchanges of everything so far: fewest steps, lg(n) x the data per link",
    )
)
RABENSEIFNER = register(
    AlgorithmSpec(
        name="rabenseifner",
        ops=frozenset({Op.ALL_REDUCE, Op.REDUCE_SCATTER, Op.REDUCE}),
        builder=build_rabenseifner,
        summary="recursive halving reduce-scatter + doubling all-gather: 2 lg(n) steps, 2(n-1)/n of the data",
    )
)
