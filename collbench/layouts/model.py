"""The layout handed to schedule builders: ring orders and tree shapes over ranks 0..n-1."""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True, slots=True)
class Layout:
    """Ring orders (one per channel) and up to two trees given as parent arrays (root: -1).

    Empty ``rings``/``trees`` mean: the builder uses rank order and the standard trees.
    """

    rings: tuple[tuple[int, ...], ...] = ()
    trees: tuple[tuple[int, ...], ...] = ()
    name: str = "rank-order"
    ring_bandwidths_gbps: tuple[float, ...] = field(default=())
    exchange_rounds: tuple[tuple[int, ...], ...] = ()
    """The all-to-all's pairing order (``layouts/exchange.py``): ``exchange_rounds[k][r]`` is rank r's
    partner in round k, r itself when idle; empty: the builder's own order."""
    nodes: tuple[tuple[int, ...], ...] = ()
    """The ranks of every node (host), nodes in the order of their first rank; empty: not known."""
    exchange_spread: int = 0
    """How many of the first exchange rounds (the slowest pairs) are spread: their blocks go in pieces,
    one alongside each later round, instead of in rounds of their own."""
    exchange_rank: int | None = None
    """The rank this layout was handed to, where it holds that rank's exchange partners alone
    (``exchange_partners``) in place of ``exchange_rounds``: under a launcher rank 0 plans the layout
    and each other rank receives its own column, O(ranks), never the O(ranks^2) table."""
    exchange_partners: tuple[int, ...] = ()
    """``exchange_rank``'s partner in each exchange round (itself: idle), as ``exchange_rounds[k][rank]``."""
    exchange_by_nodes: bool = False
    """The exchange rounds are the rule over ``nodes`` (``exchange.NodeExchange``, layouts past 2,048
    ranks), which each rank applies to itself: no table is held, ``exchange_rounds`` stays empty."""
    _orders_hash: int = field(default=0, init=False, repr=False, compare=False)
    """:meth:`__hash__`'s O(ranks) part, kept once computed (0: not yet)."""

    def __post_init__(self) -> None:
        for ring in self.rings:
            assert sorted(ring) == list(range(len(ring))), f"a ring visits every rank once: {ring}"
        for parent in self.trees:
            roots = [r for r, p in enumerate(parent) if p == -1]
            assert len(roots) == 1, f"a tree has one root: {parent}"
        if self.nodes:
            ranks = sorted(r for node in self.nodes for r in node)
            assert ranks == list(range(len(ranks))), f"nodes hold every rank once: {self.nodes}"
        for rnd in self.exchange_rounds:
            assert all(0 <= p < len(rnd) and rnd[p] == r for r, p in enumerate(rnd)), f"a round pairs ranks: {rnd}"
        if self.exchange_rank is not None:
            assert not self.exchange_rounds, "a rank's layout holds its partners, not every rank's rounds"
        if self.exchange_by_nodes:
            assert self.nodes and not self.exchange_rounds, "the exchange by nodes is a rule over the nodes"

    def __hash__(self) -> int:
        # A plan's key holds its layout (runtime/executor/plan_cache.py), hashed at every API call and
        # sweep point: hashing 16,384-rank rings anew cost ~1 ms a call. The orders' hash is kept; it
        # holds only ints and floats, whose hashes are the same in every process, so a layout unpickled
        # on another rank keeps a right one (a str's hash is salted per process: the name is hashed anew).
        orders = self._orders_hash
        if orders == 0:
            shape = (self.rings, self.trees, self.ring_bandwidths_gbps, self.exchange_rounds, self.nodes)
            # -1 for None: None's hash is its address (before Python 3.12), another in every process.
            mine = (-1 if self.exchange_rank is None else self.exchange_rank, self.exchange_partners)
            orders = hash((shape, self.exchange_spread, mine, self.exchange_by_nodes)) or 1
            object.__setattr__(self, "_orders_hash", orders)
        return hash((orders, self.name))

    @property
    def exchange_round_count(self) -> int:
        """How many exchange rounds the layout orders (0: none, the builder's own order)."""
        if self.exchange_rank is not None:
            return len(self.exchange_partners)
        if self.exchange_by_nodes:
            from collbench.layouts.exchange import NodeExchange

            return NodeExchange(self.nodes).round_count
        return len(self.exchange_rounds)

    def for_rank(self, rank: int) -> Layout:
        """What ``rank`` builds its own steps from: the same rings, trees and nodes (O(ranks) each) and
        its own exchange partners (``exchange_rounds[k][rank]``) instead of every rank's."""
        if self.exchange_rank is not None:
            assert self.exchange_rank == rank, f"rank {self.exchange_rank}'s layout asked for rank {rank}"
            return self
        if self.exchange_by_nodes:
            return self.with_partners(rank, self.derived_partners(rank))
        return self.with_partners(rank, tuple(rnd[rank] for rnd in self.exchange_rounds))

    def shared_part(self) -> Layout:
        """What every rank is sent of this layout: all but the exchange table (O(ranks) in all); each
        rank then gets its own partners (:meth:`with_partners`)."""
        return replace(self, exchange_rounds=())

    def exchange_is_round_robin(self) -> bool:
        """Whether the exchange rounds are the round-robin tournament's, whose partners every rank
        derives on its own (``exchange.round_robin_partner``): then nothing per rank is sent."""
        from collbench.layouts.exchange import round_robin_rounds

        n = self.world_size
        # No rounds: nothing to compare (and no n x n table made to find that out).
        return n is not None and bool(self.exchange_rounds) and self.exchange_rounds == round_robin_rounds(n)

    def exchange_is_derived(self) -> bool:
        """Whether every rank derives its own exchange partners (:meth:`derived_partners`): the
        round-robin tournament's, or the rule by nodes; then nothing per rank is sent."""
        return self.exchange_by_nodes or self.exchange_is_round_robin()

    def derived_partners(self, rank: int) -> tuple[int, ...]:
        """``rank``'s exchange partners where :meth:`exchange_is_derived`, in O(ranks)."""
        from collbench.layouts.exchange import NodeExchange, round_robin_partner

        if self.exchange_by_nodes:
            return NodeExchange(self.nodes).partners(rank)
        n = self.world_size or 0
        return tuple(round_robin_partner(n, k, rank) for k in range(n - 1 + n % 2 if n > 1 else 0))

    def with_partners(self, rank: int, partners: tuple[int, ...]) -> Layout:
        """The layout ``rank`` builds its own steps from: this (shared) part and its exchange partners."""
        return replace(self, exchange_rounds=(), exchange_rank=rank, exchange_partners=partners)

    @property
    def world_size(self) -> int | None:
        if self.rings:
            return len(self.rings[0])
        if self.trees:
            return len(self.trees[0])
        return None
