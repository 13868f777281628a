"""Prefix reductions (scan, exscan): a chain, Hillis-Steele's doubling, and Blelloch's two sweeps.

Scan leaves ``x_0 op ... op x_r`` on rank r, in place. Every reducing receive brings the ranks just
below the ones already there and puts them first (ir.py), so the schedules hold for a reduction that
does not commute. Exscan (``x_0 op ... op x_(r-1)``, input then output) is built the same way for all
three: one step shifts every rank's input into the next rank's output (rank r's output then holds
``x_(r-1)``), and the inclusive scan of ranks 1..n-1 runs on those outputs. Rank 0's output is never
written; its input region is never written either.

* ``linear``: a chain, rank r-1 hands its prefix to rank r, which puts it before its own data and
  hands the result on: n-1 steps one after the other, the whole buffer each (Open MPI's
  ``scan_intra_linear`` is this chain).
* ``recursive-doubling``: Hillis and Steele (1986): in round k every rank sends what it holds to
  ``r + 2^k``, which puts it first: after round k rank r holds ranks ``r - 2^(k+1) + 1 .. r``.
  ceil(log2 n) rounds, every rank combining in each.
* ``blelloch``: the work-efficient scan of Blelloch (1990) in Brent and Kung's form: an up-sweep of a
  binomial tree (round d: rank r with ``r + 1`` a multiple of ``2^(d+1)`` takes in ``r - 2^d``'s
  partial), then a down-sweep (round d, from the top: rank r with ``r + 1 = m 2^(d+1) + 2^d``, m >= 1,
  takes in ``r - 2^d``'s finished prefix). About 2 log2 n rounds, but fewer than 2n combinations in
  all against doubling's n log2 n: on a machine whose ranks share the reduction hardware, half the
  combining and less.

Any world size and any count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from collbench.layouts.model import Layout
from collbench.schedules.algorithms._common import RoundBuilder, check_count_and_segments, layout_name
from collbench.schedules.algorithms.binomial import BINOMIAL
from collbench.schedules.cost import CostTerms, ceil_log2, log2_floor
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import SCAN_OPS, Op
from collbench.schedules.spec import AlgorithmSpec


def _takers(b: RoundBuilder, first_rank: int, m: int, js: range, delta: int) -> Sequence[int]:
    """The positions j of ``js`` (among ranks ``first_rank .. first_rank + m - 1``) whose hop from
    position ``j - delta`` touches a kept rank, ascending: all of ``js`` in a whole build; in a
    one-rank build at most two, the kept rank taking in or handing on (O(1))."""
    if b.rank is None:
        return js
    p = b.rank - first_rank
    if not 0 <= p < m:
        return ()
    return [j for j in (p, p + delta) if j in js]


def _chain(b: RoundBuilder, first_rank: int, m: int, lo: int, hi: int, first: int) -> None:
    for j in _takers(b, first_rank, m, range(1, m), 1):
        b.transfer(
            first + j - 1, first_rank + j - 1, first_rank + j, lo, hi, reduce=True, label=f"prefix to the next {j}"
        )


def _doubling(b: RoundBuilder, first_rank: int, m: int, lo: int, hi: int, first: int) -> None:
    rounds = ceil_log2(m)
    for k in range(rounds):
        hop = 1 << k
        for j in _takers(b, first_rank, m, range(hop, m), hop):
            b.transfer(
                first + k, first_rank + j - hop, first_rank + j, lo, hi, reduce=True, label=f"doubling {k + 1}/{rounds}"
            )


def _sweeps(b: RoundBuilder, first_rank: int, m: int, lo: int, hi: int, first: int) -> None:
    levels = log2_floor(m) if m else 0
    rnd = first
    for d in range(levels):
        hop = 1 << d
        for j in _takers(b, first_rank, m, range(2 * hop - 1, m, 2 * hop), hop):
            b.transfer(rnd, first_rank + j - hop, first_rank + j, lo, hi, reduce=True, label=f"up-sweep {d + 1}")
        rnd += 1
    down = 0
    for d in reversed(range(levels)):
        # Rank j + 1 = m 2^(d+1) + 2^d (m >= 1) completes its prefix from j - 2^d, which has its own.
        hop = 1 << d
        takers = range(3 * hop - 1, m, 2 * hop)
        if not takers:
            continue
        down += 1
        for j in _takers(b, first_rank, m, takers, hop):
            b.transfer(rnd, first_rank + j - hop, first_rank + j, lo, hi, reduce=True, label=f"down-sweep {down}")
        rnd += 1


Inclusive = Callable[[RoundBuilder, int, int, int, int, int], None]
"""An inclusive scan of ranks ``[first_rank, first_rank + m)`` over ``[lo, hi)`` from round ``first``."""

_INCLUSIVE: dict[str, Inclusive] = {"linear": _chain, "recursive-doubling": _doubling, "blelloch": _sweeps}


def _scan(b: RoundBuilder, inclusive: Inclusive, count: int) -> None:
    inclusive(b, 0, b.world_size, 0, count, 0)


def _exscan(b: RoundBuilder, inclusive: Inclusive, count: int) -> None:
    n = b.world_size
    for j in _takers(b, 0, n, range(1, n), 1):
        label = "shift to the next rank's output"
        b.transfer(0, j - 1, j, 0, count, reduce=False, label=label, dst_start=count)
    inclusive(b, 1, n - 1, count, 2 * count, 1)


_PREFIXES: dict[Op, Callable[[RoundBuilder, Inclusive, int], None]] = {Op.SCAN: _scan, Op.EXSCAN: _exscan}
"""How every scan algorithm builds each prefix op: scan in place; exscan as a shift into the outputs,
then the scan of ranks 1..n-1 there."""


def build_scan(
    algo: str, op: Op, world_size: int, count: int, layout: Layout | None, rank: int | None = None
) -> Schedule:
    """Scan in place, or exscan as a shift into the outputs then the scan of ranks 1..n-1 there.

    Rank order whatever the layout: the prefix is defined on ranks."""
    n = world_size
    b = RoundBuilder(n, rank)
    _PREFIXES[op](b, _INCLUSIVE[algo], count)
    return b.build(op, algo, count, layout=layout_name(layout))


def build_blelloch(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
    rank: int | None = None,
) -> Schedule:
    """Blelloch's up-sweep and down-sweep (module docstring); scan and exscan only."""
    check_count_and_segments(count, segments)
    return build_scan("blelloch", op, world_size, count, layout, rank)


# -- closed-form costs (p ranks, n bytes, k segments) ----------------------------------------------


def _prefix(steps: float, combines: float, n: float) -> CostTerms:
    # Every step on the critical path carries the whole buffer; some of them only pass it on.
    return CostTerms(float(steps), steps * n, combines * n)


def chain_scan_cost(p: int, n: float, k: int) -> CostTerms:
    # p-1 hops one after the other, each the whole buffer, each combined.
    return _prefix(p - 1, p - 1, n)


def chain_exscan_cost(p: int, n: float, k: int) -> CostTerms:
    # The shift, then the chain of ranks 1..p-1: p-2 hops that combine.
    return _prefix(p - 1, max(p - 2, 0), n)


def doubling_scan_cost(p: int, n: float, k: int) -> CostTerms:
    rounds = ceil_log2(p)
    return _prefix(rounds, rounds, n)


def doubling_exscan_cost(p: int, n: float, k: int) -> CostTerms:
    rounds = ceil_log2(max(p - 1, 1))
    return _prefix(1 + rounds, rounds, n)


def _sweep_steps(m: int) -> int:
    # floor(log2 m) up-sweep rounds, then one down-sweep round per d with 3 * 2^d <= m.
    return log2_floor(m) + log2_floor(2 * m // 3) if m >= 2 else 0


def _sweep_combines(m: int) -> int:
    # The slowest chain of combinations ends at the last rank: one combination for every v in
    # {4, 8, 16, ...} and {3, 6, 12, ...} up to m + 1 (checked against the simulator, 1..32).
    return log2_floor(m + 1) + log2_floor((m + 1) // 3) if m >= 2 else 0


def blelloch_scan_cost(p: int, n: float, k: int) -> CostTerms:
    return _prefix(_sweep_steps(p), _sweep_combines(p), n)


def blelloch_exscan_cost(p: int, n: float, k: int) -> CostTerms:
    return _prefix(1 + _sweep_steps(p - 1), _sweep_combines(p - 1), n)


BLELLOCH = AlgorithmSpec(
    name="blelloch",
    ops=SCAN_OPS,
    builder=build_blelloch,
    summary="scan by a binomial up-sweep then down-sweep: ~2 log2 n steps, under 2n combinations in all",
    # The five are priced as the binomial tree whose two sweeps these are.
    costs=replace(
        BINOMIAL.costs,
        scatter=None,
        gather=None,
        scan=blelloch_scan_cost,
        exscan=blelloch_exscan_cost,
    ),
)

SPECS: tuple[AlgorithmSpec, ...] = (BLELLOCH,)
