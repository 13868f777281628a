"""Closed-form costs of every (op, algorithm): coefficients of alpha, beta and gamma.

``cost_terms(op, algo, p, n)`` returns ``CostTerms(alpha, beta, gamma)`` such that the predicted time is
``alpha * a + beta * b + gamma * g`` with ``a`` the per-step latency (us), ``b`` the per-byte transfer
cost (us/byte) and ``g`` the per-byte reduction cost (us/byte). Every formula is linear in (a, b, g),
which is what makes fitting a least-squares problem.

The machine model (the same one ``simulator.py`` prices schedules on, so that the two agree):

* a step costs one latency ``a`` however many messages it posts (they go out as one batch);
* a rank's port is single and full-duplex: the bytes it sends in a step share its outgoing port and the
  bytes it receives share its incoming port, so a step's byte cost is the larger of the two, on the
  busiest rank of the step (this is what makes ``direct``'s root and ``one-shot`` expensive);
* a step's reduction cost is ``g`` times the bytes the busiest rank reduces in it;
* steps of an algorithm run back to back along the critical path (the sum over steps of the worst rank).

Formulas (p ranks, n bytes, ``lg = floor(log2 p)``, ``p2 = 2**lg``): REFERENCE.md gives ring,
recursive doubling, Rabenseifner, binomial broadcast/reduce and direct; the rest are derived here under
the model above and say so beside them. Where p is not a power of two, the recursive algorithms fold the
``p - p2`` extra ranks into partners first (one step of the whole buffer, reduced where the op reduces)
and hand them the result at the end (one more step); those extra steps are in the formulas.

``native`` (the backend's own collective) has no schedule; it is modelled by the ring formula of the op.
That is an assumption (NCCL picks ring or tree per size; gloo mostly rings), which the fitted
parameters absorb: they describe native's time as if it were a ring.

Exactness. Each formula is derived from its builder (``collbench/schedules/algorithms``) and equals
``simulator.simulate_terms`` of the built schedule (steps, critical-path bytes, critical-path reduced
bytes) when ``count`` divides evenly (by p, and by the segment count for trees); otherwise chunks
differ by one element and the real-valued ``n / p`` form is exact up to one element per chunk per step.
``tests/unit/test_costs.py`` checks this for p = 1..32 and segments 1, 2, 4, 8. The exceptions, priced
by an upper-bound approximation and listed in ``APPROXIMATE``: the byte terms of the pipelined
``tree`` all-reduce and of ``two-tree`` (their step counts are exact). Pairs an algorithm does not
implement (``tree`` all-gather...) have no schedule to match; they keep a formula for what such an
algorithm would cost, for the fitter's sake.

Trees take a ``segments`` count k (pipelining). The binary tree is in heap order (depth
``floor(log2 p)``); NCCL's double binary tree has depth ``1 + floor(log2(p - 1))``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from collbench.errors import ConfigError, UnknownNameError
from collbench.nccl.variants import is_native
from collbench.schedules.ops import Op

ALGORITHMS: tuple[str, ...] = (
    "ring",
    "tree",
    "two-tree",
    "recursive-doubling",
    "rabenseifner",
    "direct",
    "one-shot",
    "native",
)

APPROXIMATE: frozenset[tuple[Op, str]] = frozenset(
    {(Op.ALL_REDUCE, "tree"), (Op.ALL_REDUCE, "two-tree"), (Op.BROADCAST, "two-tree"), (Op.REDUCE, "two-tree")}
)
"""(op, algorithm) pairs whose byte and reduced-byte terms are upper bounds, not the schedule's exact
critical path (their step counts are exact): the pipelined tree all-reduce, whose two phases overlap
unevenly, and the double binary tree, whose critical path depends on the shape of both trees."""


@dataclass(frozen=True, slots=True)
class CostTerms:
    """Coefficients of the per-step latency (steps), per-byte cost (bytes) and reduction cost (bytes)."""

    alpha: float
    beta: float
    gamma: float

    def __add__(self, other: CostTerms) -> CostTerms:
        return CostTerms(self.alpha + other.alpha, self.beta + other.beta, self.gamma + other.gamma)

    def time_us(self, alpha_us: float, beta_us_per_byte: float, gamma_us_per_byte: float) -> float:
        """The predicted time in microseconds for the given parameters."""
        return self.alpha * alpha_us + self.beta * beta_us_per_byte + self.gamma * gamma_us_per_byte


_ZERO = CostTerms(0.0, 0.0, 0.0)


def _lg(p: int) -> int:
    return p.bit_length() - 1


def _ceil_lg(p: int) -> int:
    return (p - 1).bit_length()


def binary_tree_depth(p: int) -> int:
    """Depth (edges) of the heap-ordered binary tree over p ranks."""
    return _lg(p) if p > 1 else 0


def two_tree_depth(p: int) -> int:
    """Depth (edges) of NCCL's double binary tree over p ranks (the root has a single child)."""
    return 1 + _lg(p - 1) if p > 1 else 0


def _fold(p: int, n: float, reduces: bool, back_bytes: float) -> CostTerms:
    """Extra cost of folding ``p - 2**lg p`` ranks into partners (non powers of two) and back."""
    if p & (p - 1) == 0:
        return _ZERO
    pre = CostTerms(1.0, n, n if reduces else 0.0)
    post = CostTerms(1.0, back_bytes, 0.0)
    return pre + post


def _tree_phase(depth: int, fan: int, n: float, k: int, reduces: bool) -> CostTerms:
    """A pipelined tree phase: ``depth + k - 1`` steps, a hop moving ``fan`` pieces of ``n/k`` bytes."""
    if depth == 0:
        return _ZERO
    steps = depth + k - 1
    per_hop = fan * n / k
    return CostTerms(float(steps), steps * per_hop, steps * per_hop if reduces else 0.0)


def _bin_fan(p: int) -> int:
    return 1 if p <= 2 else 2


def _halving_chunks(p: int) -> int:
    """Chunks (of n/p) on the critical path of recursive halving, or of doubling, over the fold.

    After the fold, new rank v < extra stands for two ranks (two chunks), the others for one, so the
    pair exchanging at distance d over new ranks [base, base + 2d) moves the heavier half,
    ``d + |[base, base + d) & [0, extra)|`` chunks, and both partners wait for it. The pair at base 0 is
    the heaviest at every distance, and one path of the butterfly visits it at every distance (its
    bases are the bits already exchanged, which the path may pick freely), so the critical path is
    ``sum over d of d + min(d, extra)`` chunks: ``p2 - 1`` at a power of two.
    """
    p2 = 1 << _lg(p)
    extra = p - p2
    return sum(d + min(d, extra) for d in (1 << j for j in range(_lg(p))))


def _heap_sizes(m: int) -> tuple[int, int]:
    """Sizes of the left and right subtrees of a heap-ordered (left-packed) binary tree of m ranks."""
    h = _lg(m)
    last = m - ((1 << h) - 1)
    left = (1 << (h - 1)) - 1 + min(last, 1 << (h - 1))
    return left, m - 1 - left


def _tree_reduce_unsegmented(m: int) -> int:
    """Whole buffers on the critical path of the unpipelined (k = 1) tree reduce over a heap of m ranks.

    A rank sends in the round of its height, so it takes both children in one step (its in-port moves
    two buffers) when their heights agree, and in two steps of one buffer each when the left subtree is
    a level deeper (only on the path to the last filled leaf); a single child costs one buffer. Only
    that one subtree is partial; a perfect subtree of height h takes 2h. O(log p).
    """
    if m <= 1:
        return 0
    if m & (m + 1) == 0:
        return 2 * _lg(m)
    left, right = _heap_sizes(m)
    if right == 0:
        return _tree_reduce_unsegmented(left) + 1
    el, er = _tree_reduce_unsegmented(left), _tree_reduce_unsegmented(right)
    if _lg(left) == _lg(right):
        return max(el, er) + 2
    return max(er + 1, el) + 1


def _tree_reduce_segments(p: int, k: int) -> int:
    """Segments (of n/k) on the critical path of the pipelined binary-tree reduce.

    Two ranks: a chain, one segment per round. Otherwise the root takes two segments per round for
    k - 1 rounds (its children feed it in the same rounds once the pipeline is full), after the first
    segment has climbed: two segments per level below a two-child rank, 2D - 1, and 2D when the last
    level reaches into the root's right subtree (both root children then have depth-D leaves and the
    root's in-port is busy from the first round). p = 4 is one level less: the root is the only rank
    with two children there. Derived by tracing the rounds of ``pipeline_tree`` and checked against the
    simulator (tests/unit/test_costs.py for p <= 32; by hand also p < 70, 120..139 and 250..261).
    """
    if p == 2:
        return k
    if k == 1:
        return _tree_reduce_unsegmented(p)
    d = _lg(p)
    last_level = p - (1 << d) + 1
    climb = 2 if p == 4 else 2 * d - 1 + (last_level > 1 << (d - 1))
    return 2 * (k - 1) + climb


def _tree_broadcast_segments(p: int, k: int) -> int:
    """Segments on the critical path of the pipelined binary-tree broadcast.

    A rank sends a segment to all its children in one round, so each hop costs the sender's fan-out in
    segments; the critical path ends at the leftmost deepest leaf, whose ancestors all have two
    children except, when p is a power of two, the last one (2D or 2D - 1 in all). Behind the first
    segment the other k - 1 follow at the pace of the slowest hop, the root's fan-out.
    """
    d = _lg(p)
    first = 2 * d - (1 if p & (p - 1) == 0 else 0)
    return first + min(2, p - 1) * (k - 1)


def _rooted_two_tree_depth(p: int) -> int:
    """Depth of ``two-tree``'s rooted pair: the double binary tree over the p - 1 others, below the root."""
    return 1 + two_tree_depth(p - 1)


# -- all-reduce -----------------------------------------------------------------------------------


def _ar_ring(p: int, n: float, k: int) -> CostTerms:
    f = (p - 1) / p
    return CostTerms(2.0 * (p - 1), 2 * f * n, f * n)


def _ar_rd(p: int, n: float, k: int) -> CostTerms:
    lg = _lg(p)
    return CostTerms(float(lg), n * lg, n * lg) + _fold(p, n, True, n)


def _ar_rab(p: int, n: float, k: int) -> CostTerms:
    # Halving then doubling over the fold, each along the heaviest pairs (see _halving_chunks); the
    # fold moves the whole buffer in (reduced) and out.
    chunks = _halving_chunks(p) * n / p
    return CostTerms(2.0 * _lg(p), 2 * chunks, chunks) + _fold(p, n, True, n)


def _ar_tree(p: int, n: float, k: int) -> CostTerms:
    # Steps are exact: the way down of segment j starts at round j + D, so 2D + k - 1 rounds. Reduced
    # bytes are the reduce's (the way down reduces nothing and never delays the way up). The byte term
    # is an upper bound (APPROXIMATE): both phases priced at two segments a hop, without their overlap.
    d = binary_tree_depth(p)
    reduced = _tree_reduce_segments(p, k) * n / k
    bound = _tree_phase(d, _bin_fan(p), n, k, True) + _tree_phase(d, _bin_fan(p), n, k, False)
    return CostTerms(float(2 * d + k - 1), bound.beta, reduced)


def _ar_two_tree(p: int, n: float, k: int) -> CostTerms:
    # Steps are exact: each tree runs 2 * height + k - 1 rounds and the deeper sets the count. Bytes are
    # an upper bound (APPROXIMATE): n/2 per tree, an interior rank taking two children's halves a hop.
    d = two_tree_depth(p)
    bound = _tree_phase(d, 2, n / 2, k, True) + _tree_phase(d, 2, n / 2, k, False)
    return CostTerms(float(2 * d + k - 1), bound.beta, bound.gamma)


def _ar_direct(p: int, n: float, k: int) -> CostTerms:
    # The root takes (p-1) whole buffers in, reduces them, and sends p-1 copies back out.
    return CostTerms(2.0, 2.0 * (p - 1) * n, (p - 1) * n)


def _ar_one_shot(p: int, n: float, k: int) -> CostTerms:
    return CostTerms(1.0, (p - 1) * n, (p - 1) * n)


# -- reduce-scatter -------------------------------------------------------------------------------


def _rs_ring(p: int, n: float, k: int) -> CostTerms:
    f = (p - 1) / p
    return CostTerms(float(p - 1), f * n, f * n)


def _rs_halving(p: int, n: float, k: int) -> CostTerms:
    # Rabenseifner's halving over the fold (see _halving_chunks), then the folded rank gets its own
    # chunk back: n/p more bytes, nothing reduced.
    chunks = _halving_chunks(p) * n / p
    return CostTerms(float(_lg(p)), chunks, chunks) + _fold(p, n, True, n / p)


def _rs_tree(depth: int, fan: int, share: float) -> Callable[[int, float, int], CostTerms]:
    def cost(p: int, n: float, k: int) -> CostTerms:
        # Reduce to the root along the tree, then the root hands every rank its chunk.
        scatter = CostTerms(1.0, (p - 1) / p * n, 0.0)
        return _tree_phase(depth, fan, n * share, k, True) + scatter

    return cost


def _rs_direct(p: int, n: float, k: int) -> CostTerms:
    return CostTerms(2.0, (p - 1) * n + (p - 1) / p * n, (p - 1) * n)


def _rs_one_shot(p: int, n: float, k: int) -> CostTerms:
    f = (p - 1) / p
    return CostTerms(1.0, f * n, f * n)


# -- all-gather -----------------------------------------------------------------------------------


def _ag_ring(p: int, n: float, k: int) -> CostTerms:
    return CostTerms(float(p - 1), (p - 1) / p * n, 0.0)


def _ag_doubling(p: int, n: float, k: int) -> CostTerms:
    # The folded rank hands over its chunk (n/p), the survivors double along the heaviest pairs (see
    # _halving_chunks), and the folded rank gets everything but its own chunk back (n - n/p).
    chunks = _halving_chunks(p) * n / p
    return CostTerms(float(_lg(p)), chunks, 0.0) + _fold(p, n / p, False, n - n / p)


def _ag_tree(depth: int, fan: int, share: float) -> Callable[[int, float, int], CostTerms]:
    def cost(p: int, n: float, k: int) -> CostTerms:
        # Gather to the root (its port takes in everyone else's chunk), then broadcast down the tree.
        gather = CostTerms(float(depth), (p - 1) / p * n, 0.0)
        return gather + _tree_phase(depth, fan, n * share, k, False)

    return cost


def _ag_direct(p: int, n: float, k: int) -> CostTerms:
    # Gather: the root takes in (p-1) chunks; then it sends every rank the p-1 chunks it lacks.
    return CostTerms(2.0, (p - 1) / p * n + (p - 1) * (p - 1) / p * n, 0.0)


def _ag_one_shot(p: int, n: float, k: int) -> CostTerms:
    return CostTerms(1.0, (p - 1) / p * n, 0.0)


# -- broadcast and reduce -------------------------------------------------------------------------


def _chain(reduces: bool) -> Callable[[int, float, int], CostTerms]:
    def cost(p: int, n: float, k: int) -> CostTerms:
        # A ring used for a rooted op is a chain of p-1 hops, pipelined in k segments.
        return _tree_phase(p - 1, 1, n, k, reduces)

    return cost


def _rab_reduce(p: int, n: float, k: int) -> CostTerms:
    # Fold, halving (see _halving_chunks), then a binomial gather of the blocks to new rank 0 (the
    # root): lg p more steps, and new rank 0's port takes every block but its own, the chunks of new
    # ranks 1..p2-1, the first extra - 1 of which stand for two ranks.
    p2 = 1 << _lg(p)
    extra = p - p2
    halving = _halving_chunks(p) * n / p
    gathered = (p2 - 1 + max(0, extra - 1)) * n / p
    fold = _ZERO if extra == 0 else CostTerms(1.0, n, n)
    return CostTerms(2.0 * _lg(p), halving + gathered, halving) + fold


def _binomial(reduces: bool) -> Callable[[int, float, int], CostTerms]:
    def cost(p: int, n: float, k: int) -> CostTerms:
        steps = _ceil_lg(p)
        return CostTerms(float(steps), steps * n, steps * n if reduces else 0.0)

    return cost


def _scatter_allgather(reduces: bool) -> Callable[[int, float, int], CostTerms]:
    def cost(p: int, n: float, k: int) -> CostTerms:
        # Broadcast as scatter (recursive halving) + all-gather (doubling); reduce as reduce-scatter
        # (halving) + gather (doubling).
        p2 = 1 << _lg(p)
        f = (p2 - 1) / p2
        fold = _ZERO if p == p2 else CostTerms(1.0, n, n if reduces else 0.0)
        return CostTerms(2.0 * _lg(p), 2 * f * n, f * n if reduces else 0.0) + fold

    return cost


def _star(reduces: bool) -> Callable[[int, float, int], CostTerms]:
    def cost(p: int, n: float, k: int) -> CostTerms:
        # The root's port moves p-1 whole buffers in one step.
        return CostTerms(1.0, (p - 1) * n, (p - 1) * n if reduces else 0.0)

    return cost


def _rooted_tree(two: bool, reduces: bool) -> Callable[[int, float, int], CostTerms]:
    def cost(p: int, n: float, k: int) -> CostTerms:
        if two:
            # Steps are exact (the pair hangs below the root, one level deeper than the double binary
            # tree over the others); bytes are an upper bound (APPROXIMATE): n/2 per tree, two children.
            d = _rooted_two_tree_depth(p)
            bound = _tree_phase(d, 2, n / 2, k, reduces)
            return CostTerms(float(d + k - 1), bound.beta, bound.gamma)
        d = binary_tree_depth(p)
        # Reduce: every byte a rank receives it reduces, and its in-port is the busy one, so the
        # reduced bytes equal the moved ones.
        segs = _tree_reduce_segments(p, k) if reduces else _tree_broadcast_segments(p, k)
        return CostTerms(float(d + k - 1), segs * n / k, segs * n / k if reduces else 0.0)

    return cost


_Formula = Callable[[int, float, int], CostTerms]


def _table(p: int) -> dict[tuple[Op, str], _Formula]:
    """The formulas; tree-shaped reduce-scatter/all-gather need p for their depth."""
    bd, td = binary_tree_depth(p), two_tree_depth(p)
    bf = _bin_fan(p)
    return {
        (Op.ALL_REDUCE, "ring"): _ar_ring,
        (Op.ALL_REDUCE, "tree"): _ar_tree,
        (Op.ALL_REDUCE, "two-tree"): _ar_two_tree,
        (Op.ALL_REDUCE, "recursive-doubling"): _ar_rd,
        (Op.ALL_REDUCE, "rabenseifner"): _ar_rab,
        (Op.ALL_REDUCE, "direct"): _ar_direct,
        (Op.ALL_REDUCE, "one-shot"): _ar_one_shot,
        (Op.REDUCE_SCATTER, "ring"): _rs_ring,
        (Op.REDUCE_SCATTER, "tree"): _rs_tree(bd, bf, 1.0),
        (Op.REDUCE_SCATTER, "two-tree"): _rs_tree(td, 2, 0.5),
        (Op.REDUCE_SCATTER, "recursive-doubling"): _rs_halving,
        (Op.REDUCE_SCATTER, "rabenseifner"): _rs_halving,
        (Op.REDUCE_SCATTER, "direct"): _rs_direct,
        (Op.REDUCE_SCATTER, "one-shot"): _rs_one_shot,
        (Op.ALL_GATHER, "ring"): _ag_ring,
        (Op.ALL_GATHER, "tree"): _ag_tree(bd, bf, 1.0),
        (Op.ALL_GATHER, "two-tree"): _ag_tree(td, 2, 0.5),
        (Op.ALL_GATHER, "recursive-doubling"): _ag_doubling,
        (Op.ALL_GATHER, "rabenseifner"): _ag_doubling,
        (Op.ALL_GATHER, "direct"): _ag_direct,
        (Op.ALL_GATHER, "one-shot"): _ag_one_shot,
        (Op.BROADCAST, "ring"): _chain(False),
        (Op.BROADCAST, "tree"): _rooted_tree(False, False),
        (Op.BROADCAST, "two-tree"): _rooted_tree(True, False),
        (Op.BROADCAST, "recursive-doubling"): _binomial(False),
        (Op.BROADCAST, "rabenseifner"): _scatter_allgather(False),
        (Op.BROADCAST, "direct"): _star(False),
        (Op.BROADCAST, "one-shot"): _star(False),
        (Op.REDUCE, "ring"): _chain(True),
        (Op.REDUCE, "tree"): _rooted_tree(False, True),
        (Op.REDUCE, "two-tree"): _rooted_tree(True, True),
        (Op.REDUCE, "recursive-doubling"): _binomial(True),
        (Op.REDUCE, "rabenseifner"): _rab_reduce,
        (Op.REDUCE, "direct"): _star(True),
        (Op.REDUCE, "one-shot"): _star(True),
    }


def _as_op(op: Op | str) -> Op:
    return op if isinstance(op, Op) else Op.parse(op)


def has_cost_model(op: Op | str, algo: str) -> bool:
    """Whether a closed form exists for (op, algo); ``native`` and the named algorithms do."""
    key = algo.strip().lower()
    if is_native(key):
        return True
    return (_as_op(op), key) in _table(2)


def cost_terms(op: Op | str, algo: str, world_size: int, size_bytes: float, *, segments: int = 1) -> CostTerms:
    """Coefficients (steps, bytes, reduced bytes) of the closed-form cost of ``algo`` doing ``op``.

    ``algo`` may be ``native`` or a native variant (``native:ring``): both use the op's ring formula.
    Raises UnknownNameError for an unknown op or algorithm, ConfigError for a world size below 1,
    a negative size or segments below 1.
    """
    the_op = _as_op(op)
    if world_size < 1:
        raise ConfigError(f"world size must be >= 1, got {world_size}")
    if size_bytes < 0:
        raise ConfigError(f"size must be >= 0 bytes, got {size_bytes}")
    if segments < 1:
        raise ConfigError(f"segments must be >= 1, got {segments}")
    key = algo.strip().lower()
    if is_native(key):
        key = "ring"
    table = _table(world_size)
    formula = table.get((the_op, key))
    if formula is None:
        raise UnknownNameError("algorithm", algo, list(ALGORITHMS))
    if world_size == 1:
        # One rank: every builder gives it no step at all, so no term either.
        return _ZERO
    return formula(world_size, float(size_bytes), segments)


def gamma_beta_ratio(op: Op | str, algo: str, world_size: int) -> float:
    """gamma's coefficient over beta's, at a large size (0 where nothing is reduced or moved)."""
    terms = cost_terms(op, algo, world_size, float(1 << 30))
    return terms.gamma / terms.beta if terms.beta > 0 else 0.0


def log2_floor(p: int) -> int:
    """floor(log2 p) for p >= 1."""
    return _lg(p)


def is_power_of_two(p: int) -> bool:
    return p >= 1 and p & (p - 1) == 0


def ceil_log2(p: int) -> int:
    return _ceil_lg(p)


__all__ = [
    "ALGORITHMS",
    "APPROXIMATE",
    "CostTerms",
    "binary_tree_depth",
    "ceil_log2",
    "cost_terms",
    "gamma_beta_ratio",
    "has_cost_model",
    "is_power_of_two",
    "log2_floor",
    "two_tree_depth",
]
