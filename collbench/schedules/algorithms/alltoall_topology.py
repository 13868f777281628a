"""``topo-pairwise``: the all-to-all's pairwise exchange in the layout's order, slow pairs together.

Round k pairs each rank with ``layout.exchange_rounds[k][r]`` (``layouts/exchange.py``: disjoint pairs,
the slowest pairs of the topology grouped in as few rounds as possible) and the two exchange one block
each way; a rank idle in a round has no step for it. The own block is copied in the first step. On an
even fabric (or with no layout) the rounds are the round-robin tournament's: ``n - 1`` rounds for even
``n``, ``n`` for odd, and the schedule's layout name says ``rank-order``.

Against rank-order ``pairwise`` (step k: to r+k, from r-k), which spreads two slow pairs over two or
more steps in each direction, grouping them makes one slow round: on a fabric where a few slow pairs
dominate, up to twice as fast. Where the layout says so (``Layout.exchange_spread``), the slow rounds
are not run on their own: their pairs' blocks go in pieces, one beside each fast round, so the slow
links work while the fast pairs exchange and the fast rounds' time hides under the slow one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial

from collbench.errors import ConfigError
from collbench.layouts.exchange import round_robin_partner
from collbench.layouts.model import Layout
from collbench.schedules.algorithms._common import RoundBuilder, check_count_and_segments, split
from collbench.schedules.algorithms.alltoall import PAIRWISE
from collbench.schedules.cost import CostTerms
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op, block_bounds
from collbench.schedules.spec import AlgorithmSpec

Partner = Callable[[int, int], int]
"""(round, rank) -> the rank's partner in that round (itself: idle)."""


def _rounds(layout: Layout | None, n: int, rank: int | None) -> tuple[int, Partner, int, str]:
    """How many exchange rounds, each rank's partner per round, how many of the first rounds to spread,
    and the layout name. Without a layout the round-robin partner is computed (O(1)), never tabled
    (the table is O(n^2)). A layout handed to one rank (``Layout.exchange_rank``) builds that rank's
    steps alone: its partner per round, and the partner's partner (the rank itself)."""
    if layout is None or not layout.exchange_round_count:
        return n - 1 + n % 2 if n > 1 else 0, partial(round_robin_partner, n), 0, "rank-order"
    total = layout.exchange_round_count
    spread = layout.exchange_spread if 0 < layout.exchange_spread < total else 0
    if layout.exchange_rank is not None:
        return total, _own_partner(layout, n, rank), spread, layout.name
    if layout.exchange_by_nodes:  # the rule over the nodes (layouts/exchange.py), O(1) a partner
        from collbench.layouts.exchange import NodeExchange

        if layout.world_size != n:
            raise ConfigError(
                f"layout {layout.name!r} orders {layout.world_size} ranks for all-to-all but the schedule has "
                f"{n}; plan the layout for this world size"
            )
        return total, NodeExchange(layout.nodes).partner, spread, layout.name
    for rnd in layout.exchange_rounds:
        if len(rnd) != n:
            raise ConfigError(
                f"layout {layout.name!r} pairs {len(rnd)} ranks for all-to-all but the schedule has {n}; "
                "plan the layout for this world size"
            )
    rounds = layout.exchange_rounds
    return total, lambda k, r: rounds[k][r], spread, layout.name


def _own_partner(layout: Layout, n: int, rank: int | None) -> Partner:
    """The partner per round of a layout that holds one rank's partners alone."""
    mine = layout.exchange_rank
    if mine is None or rank != mine or not all(0 <= p < n for p in layout.exchange_partners):
        whose = "every rank's steps" if rank is None else f"rank {rank}'s steps"
        raise ConfigError(
            f"layout {layout.name!r} holds rank {mine}'s all-to-all partners of {n} ranks alone: it cannot "
            f"build {whose}"
        )
    partners = layout.exchange_partners

    def partner(k: int, r: int) -> int:
        # Pairs are mutual: the only other rank a one-rank build asks about is this round's partner.
        return partners[k] if r == mine else mine

    return partner


def _pair(b: RoundBuilder, partner: Partner, k: int) -> Sequence[int]:
    """The ranks r, ascending, whose transfer to their partner in round ``k`` touches a kept rank: every
    rank in a whole build; the kept rank and its partner (the same pair, both ways) in a one-rank build."""
    if b.rank is None:
        return range(b.world_size)
    return sorted({b.rank, partner(k, b.rank)})


def build_topo_pairwise(
    op: Op,
    world_size: int,
    count: int,
    *,
    root: int = 0,
    layout: Layout | None = None,
    segments: int = 1,
    rank: int | None = None,
) -> Schedule:
    """Pairwise all-to-all in the layout's exchange rounds (round-robin without one); any world size,
    a count that does not divide leaves its tail out. Raises ConfigError for a layout of another size."""
    check_count_and_segments(count, segments)
    n = world_size
    total, partner, spread, name = _rounds(layout, n, rank)
    blocks = block_bounds(count, n)
    b = RoundBuilder(n, rank)
    for r in b.kept():
        b.transfer(0, r, r, *blocks[r], reduce=False, label="copy own block", dst_start=count + blocks[r][0])
    steps = total - spread
    for k in range(steps):
        for r in _pair(b, partner, spread + k):
            p = partner(spread + k, r)
            if p != r:
                label = f"exchange {k + 1}/{steps}"
                b.transfer(k, r, p, *blocks[p], reduce=False, label=label, dst_start=count + blocks[r][0])
    # A spread round's pairs send their block in one piece per remaining step, beside that step's pair.
    for s in range(spread):
        for r in _pair(b, partner, s):
            p = partner(s, r)
            if p == r:
                continue
            start, stop = blocks[p]
            for k, (a, z) in enumerate(split(start, stop, steps)):
                label = f"exchange {k + 1}/{steps}"
                b.transfer(k, r, p, a, z, reduce=False, label=label, dst_start=count + blocks[r][0] + a - start)
    return b.build(op, "topo-pairwise", count, root=root, layout=name)


def _topo_pairwise_all_to_all_cost(p: int, n: float, k: int) -> CostTerms:
    # Round-robin rounds (an even fabric): p-1 for even p, p for odd (one rank idle each round). Every
    # round moves one block (n/p) each way along the critical path, which for odd p threads through
    # the idle ranks' partners: p blocks, not the p-1 a rank sends. On uneven links the layout's order
    # may add a round; a fit absorbs it at the measured size.
    rounds = p - 1 if p % 2 == 0 else p
    return CostTerms(float(rounds), rounds * n / p, 0.0)


TOPO_PAIRWISE = AlgorithmSpec(
    name="topo-pairwise",
    ops=frozenset({Op.ALL_TO_ALL}),
    builder=build_topo_pairwise,
    summary="pairwise exchange in the layout's rounds of disjoint pairs, the slow pairs grouped",
    costs=replace(PAIRWISE.costs, all_to_all=_topo_pairwise_all_to_all_cost),
)

SPECS: tuple[AlgorithmSpec, ...] = (TOPO_PAIRWISE,)
