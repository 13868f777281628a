"""The order in which ranks pair up for an all-to-all: rounds of disjoint pairs, slow pairs together.

A pairwise all-to-all exchanges one block each way with every other rank. Done as rounds of disjoint
pairs (a matching), a round lasts as long as its slowest pair, and every rank waits for its round to
end before the next. Rank order (the shift ``r -> r + k``) scatters the slow pairs of an uneven fabric
over many rounds, so each of those rounds is slow. The order here puts the slowest pairs in the same
round wherever they share no rank: two slow pairs cost one slow round instead of two.

Pairs are placed slowest first, each in the earliest round where both its ranks are still free.
Ties (and a uniform fabric) follow the round-robin tournament (the circle method), so
on even links this is the classic ``n - 1`` rounds of ``n / 2`` pairs (``n`` rounds with one rank idle
for odd ``n``). On uneven links the greedy may need a round or two more; a pair is never repeated and
never left out.
"""

from __future__ import annotations

from collections.abc import Sequence


def round_robin_rounds(n: int) -> tuple[tuple[int, ...], ...]:
    """The circle method's rounds: ``rounds[k][r]`` is rank r's partner in round k (r itself: idle).

    ``n - 1`` rounds for even ``n``, ``n`` for odd ``n`` (one rank idle in each); none for ``n <= 1``.
    """
    if n <= 1:
        return ()
    m = n if n % 2 == 0 else n + 1  # odd: a phantom rank m-1; its partner sits the round out
    rounds = []
    for k in range(m - 1):
        partner = list(range(n))
        pairs = [(m - 1, k)] + [((k + i) % (m - 1), (k - i) % (m - 1)) for i in range(1, m // 2)]
        for a, b in pairs:
            if a < n and b < n:
                partner[a], partner[b] = b, a
        rounds.append(tuple(partner))
    return tuple(rounds)


def round_robin_partner(n: int, round_index: int, rank: int) -> int:
    """``rank``'s partner in round ``round_index`` of :func:`round_robin_rounds` (``rank`` itself:
    idle), in O(1) where the table is O(n^2): round k pairs ``m - 1`` with k and ``k + i`` with ``k - i``
    (mod ``m - 1``), so every other rank r faces ``2k - r``."""
    m = n + n % 2
    if rank == m - 1:
        other = round_index
    elif rank == round_index:
        other = m - 1
    else:
        other = (2 * round_index - rank) % (m - 1)
    return other if other < n else rank


def exchange_order(bandwidth_gbps: Sequence[Sequence[float]]) -> tuple[tuple[tuple[int, ...], ...], int]:
    """The exchange rounds and how many of the first ones to spread (``Layout.exchange_spread``).

    Spreading the first ``s`` rounds (the slowest pairs, which the greedy order places first) sends
    their pairs' blocks in ``R - s`` pieces, one alongside each remaining round, so the slow links work
    while the fast rounds run instead of after them. Kept where :func:`spread_time` estimates it
    faster, and only where those pairs are clearly slow (at most half the speed of every other pair):
    the estimate takes every pair's links as its own (per-destination shaping, separate paths), so
    where the slow pairs share one port with the fast ones it is optimistic.
    """
    rounds = exchange_rounds(bandwidth_gbps)
    best, best_time = (rounds, 0), round_time(rounds, bandwidth_gbps)
    greedy = _greedy_rounds(bandwidth_gbps)
    for spread in range(1, min(3, len(greedy))):
        if _slowest(greedy[:spread], bandwidth_gbps) * 2 > _slowest(greedy[spread:], bandwidth_gbps):
            continue  # not clearly slower: spreading would only crowd ports the estimate takes as free
        t = spread_time(greedy, spread, bandwidth_gbps)
        if t < best_time * 0.95:
            best, best_time = (greedy, spread), t
    return best


def _slowest(rounds: Sequence[Sequence[int]], bandwidth_gbps: Sequence[Sequence[float]]) -> float:
    """The slowest transfer's GB/s in ``rounds`` (inf when they hold none)."""
    speeds = [float(bandwidth_gbps[r][p]) for rnd in rounds for r, p in enumerate(rnd) if p != r]
    return min(speeds, default=float("inf"))


def spread_time(rounds: Sequence[Sequence[int]], spread: int, bandwidth_gbps: Sequence[Sequence[float]]) -> float:
    """:func:`round_time` of ``rounds`` with the first ``spread`` spread over the others: each remaining
    round lasts as long as its slowest transfer, a spread pair's piece (its block over ``R - spread``)
    included."""
    rest = len(rounds) - spread
    if spread <= 0 or rest <= 0:
        return round_time(rounds, bandwidth_gbps)
    total = 0.0
    for rnd in rounds[spread:]:
        worst = 0.0
        for r, p in enumerate(rnd):
            if p != r:
                worst = max(worst, 1.0 / max(float(bandwidth_gbps[r][p]), 1e-9))
            for slow in rounds[:spread]:
                q = slow[r]
                if q != r:
                    worst = max(worst, 1.0 / max(float(bandwidth_gbps[r][q]), 1e-9) / rest)
        total += worst
    return total


def exchange_rounds(bandwidth_gbps: Sequence[Sequence[float]]) -> tuple[tuple[int, ...], ...]:
    """Rounds of disjoint pairs covering every pair once, slowest pairs grouped (see the module).

    ``bandwidth_gbps[i][j]`` is the per-direction bandwidth of i -> j (0: no path, slowest of all);
    a pair's speed is its slower direction. ``rounds[k][r]`` is r's partner in round k, r when idle.
    Pairs are placed slowest first, each in the earliest round where both its ranks are free (per-rank
    bit sets of the rounds taken), so 1,024 ranks take about a second. Where that order would not be
    faster than the plain round-robin one by :func:`round_time` (many speed classes can cost extra
    rounds), the round-robin order is kept.
    """
    greedy = _greedy_rounds(bandwidth_gbps)
    plain = round_robin_rounds(len(bandwidth_gbps))
    return greedy if round_time(greedy, bandwidth_gbps) < round_time(plain, bandwidth_gbps) else plain


def _greedy_rounds(bandwidth_gbps: Sequence[Sequence[float]]) -> tuple[tuple[int, ...], ...]:
    """Pairs slowest first (ties in round-robin order), each in the earliest round both ranks are free."""
    # Imported here: the schedule registry imports this module, and every command's --help imports the
    # registry; numpy is needed only when a layout is planned.
    import numpy as np

    n = len(bandwidth_gbps)
    if n <= 1:
        return ()
    bw = np.asarray(bandwidth_gbps, dtype=float)
    speed = np.minimum(bw, bw.T)
    circle = np.zeros((n, n), dtype=np.int64)
    for k, rnd in enumerate(round_robin_rounds(n)):
        circle[np.arange(n), np.asarray(rnd)] = k
    a_idx, b_idx = np.triu_indices(n, 1)
    order = np.lexsort((b_idx, a_idx, circle[a_idx, b_idx], speed[a_idx, b_idx]))
    return _first_fit(n, [(int(a_idx[i]), int(b_idx[i])) for i in order.tolist()])


def round_time(
    rounds: Sequence[Sequence[int]], bandwidth_gbps: Sequence[Sequence[float]], *, both_ways: bool = True
) -> float:
    """The rounds' time in units of one block over 1 GB/s: each round lasts as long as its slowest
    transfer, and rounds follow one another. A pair with no path counts as 1e-9 GB/s. ``both_ways``:
    r and ``rounds[k][r]`` exchange (pairings); False: r only sends to it (rank order's shifts)."""
    total = 0.0
    for rnd in rounds:
        speeds = [float(bandwidth_gbps[r][p]) for r, p in enumerate(rnd) if p != r]
        if both_ways:
            speeds += [float(bandwidth_gbps[p][r]) for r, p in enumerate(rnd) if p != r]
        if speeds:
            total += 1.0 / max(min(speeds), 1e-9)
    return total


def _first_fit(n: int, pairs: list[tuple[int, int]]) -> tuple[tuple[int, ...], ...]:
    """Each pair, in the order given, in the earliest round where both its ranks are free."""
    taken = [0] * n  # bit k set: the rank is paired in round k
    rounds: list[list[int]] = []
    for a, b in pairs:
        busy = taken[a] | taken[b]
        k = (~busy & (busy + 1)).bit_length() - 1  # the lowest round free for both
        while len(rounds) <= k:
            rounds.append(list(range(n)))
        rounds[k][a], rounds[k][b] = b, a
        taken[a] |= 1 << k
        taken[b] |= 1 << k
    return tuple(tuple(rnd) for rnd in rounds)


def rank_order_shifts(n: int) -> tuple[tuple[int, ...], ...]:
    """Rank-order pairwise's steps as targets: in step k rank r sends to ``(r + k) % n``."""
    return tuple(tuple((r + k) % n for r in range(n)) for k in range(1, n))


def slow_rounds(rounds: Sequence[Sequence[int]], bandwidth_gbps: Sequence[Sequence[float]], below_gbps: float) -> int:
    """How many of ``rounds`` hold a pair slower than ``below_gbps`` (what the order minimises)."""
    count = 0
    for rnd in rounds:
        if any(p != r and min(bandwidth_gbps[r][p], bandwidth_gbps[p][r]) < below_gbps for r, p in enumerate(rnd)):
            count += 1
    return count


class NodeExchange:
    """The all-to-all's rounds past :data:`~collbench.layouts.fabric.MAX_LAYOUT_RANKS` ranks, a rule over
    nodes of equal size that each rank applies to itself (the greedy table above is O(n^2), 2.1 GB of
    partners at 16,384 ranks): nothing is stored or sent beyond the nodes.

    Nodes meet in the round-robin tournament's rounds (:func:`round_robin_partner` over nodes); in node
    round k, node a meets node b in ``p`` sub-rounds (nodes of ``p`` ranks), sub-round s pairing a's
    i-th rank with b's ``(s - i) mod p``-th, so every pair of ranks across the two meets once. The ranks
    within a node pair up in the tournament's rounds over the node's ``p``: after the node rounds for
    an even count of nodes, in the node round a node sits out for an odd count. ``n - 1`` rounds for an
    even count of nodes and an even ``p`` (the classic tournament's count), ``n`` for odd nodes. A slow
    pair of nodes is one node round: its ``p^2`` pairs of ranks go in ``p`` rounds, where rank order's
    shifts spread them over every round that crosses the pair.
    """

    def __init__(self, nodes: tuple[tuple[int, ...], ...]) -> None:
        if not nodes or len({len(node) for node in nodes}) != 1:
            raise ValueError("the exchange by nodes needs nodes of one size")
        self.nodes = nodes
        self.node_count = len(nodes)
        self.per_node = len(nodes[0])
        # Where every rank sits, made once per rank (O(n)); a partner is then O(1).
        self._node = {r: a for a, node in enumerate(nodes) for r in node}
        self._local = {r: i for node in nodes for i, r in enumerate(node)}

    @property
    def intra_rounds(self) -> int:
        p = self.per_node
        return p - 1 + p % 2 if p > 1 else 0

    @property
    def round_count(self) -> int:
        m, p = self.node_count, self.per_node
        if m * p <= 1:
            return 0
        if m == 1:
            return self.intra_rounds
        return (m - 1) * p + self.intra_rounds if m % 2 == 0 else m * p

    def partner(self, round_index: int, rank: int) -> int:
        """``rank``'s partner in round ``round_index`` (``rank`` itself: idle)."""
        m, p = self.node_count, self.per_node
        a, i = self._node[rank], self._local[rank]
        node_rounds = (m - 1 + m % 2) if m > 1 else 0
        if round_index >= node_rounds * p:  # the rounds within nodes, after the node rounds (even m)
            return self.nodes[a][round_robin_partner(p, round_index - node_rounds * p, i)]
        k, s = divmod(round_index, p)
        b = round_robin_partner(m, k, a)
        if b == a:  # this node sits the node round out (odd m): its own pairs, one round of them per s
            return self.nodes[a][round_robin_partner(p, s, i)] if s < self.intra_rounds else rank
        return self.nodes[b][(s - i) % p]

    def partners(self, rank: int) -> tuple[int, ...]:
        """``rank``'s partner in every round: what it builds its own steps from, O(n)."""
        return tuple(self.partner(k, rank) for k in range(self.round_count))
