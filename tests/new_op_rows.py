"""Result rows of the ops that move data without reducing it (all-to-all, scatter, gather, send/recv)
and of barrier, for the fit and predict tests: times from the algorithms' own formulas, as
``synthetic_rows`` makes them for the reductions.

Which algorithms have a formula for which op is the registry's (``CostFormulas.has``): tests ask
:func:`priced_pairs` rather than name pairs that may not exist.
"""

from __future__ import annotations

from synthetic_rows import make_rows, point_row

from collbench.results.row import ResultRow
from collbench.schedules.ops import Op
from collbench.schedules.registry import SPECS

DATA_OPS = (Op.ALL_TO_ALL, Op.SCATTER, Op.GATHER, Op.SENDRECV)
"""The new ops that move data (block ops and the ring shift)."""

BLOCK_SIZES = [2**k * 3 * 5 * 7 for k in range(4, 22)]
"""Sizes that divide into 2..8 equal blocks of float32 elements, from 1.6 KiB to 210 MiB."""


def priced_pairs(op: Op) -> list[str]:
    """The algorithms (``native`` included) with a cost formula for ``op``, in the registry's order."""
    return [spec.name for spec in SPECS if spec.costs.has(op)]


def unpriced_pair() -> tuple[Op, str] | None:
    """An (op, algorithm) the registry has no formula for, or None when every algorithm prices every op."""
    for op in Op:
        for spec in SPECS:
            if not spec.costs.has(op):
                return op, spec.name
    return None


def data_op_rows(
    op: Op, algo: str, p: int, alpha: float, beta: float, *, seed: int, noise: float = 0.02
) -> list[ResultRow]:
    """Rows of a data-moving op at ``BLOCK_SIZES``, timed by the algorithm's formula (no reduction)."""
    return make_rows(algo, p, alpha, beta, noise=noise, seed=seed, sizes=BLOCK_SIZES, op=op.value)


def barrier_rows(algo: str, p: int, time_us: float, *, named_sizes: tuple[int, ...] = (0,)) -> list[ResultRow]:
    """Barrier rows at ``time_us``: one per size a sweep might name (a barrier moves 0 bytes whatever
    size it names), the first at exactly ``time_us``, later ones a little slower."""
    return [
        point_row(algo, size, time_us * (1 + 0.05 * i), world_size=p, op=Op.BARRIER.value)
        for i, size in enumerate(named_sizes)
    ]
