"""Closed-form costs of every (op, algorithm): coefficients of alpha, beta and gamma, looked up by name.

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

Formulas (p ranks, n bytes, ``lg = floor(log2 p)``, ``p2 = 2**lg``) live beside their builders, in
each algorithm module's ``SPECS`` (``collbench/schedules/algorithms``), as ``AlgorithmSpec.costs``;
this module asks the spec. Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication
Operations in MPICH" (IJHPCA 19(1), 2005), give ring, recursive doubling, Rabenseifner, binomial
broadcast/reduce and direct; the rest are derived under the model above and say so beside them. Where
p is not a power of two, the recursive algorithms fold the ``p - p2`` extra ranks into partners first
(one step of the whole buffer, reduced where the op reduces) and hand them the result at the end (one
more step); those extra steps are in the formulas.

``native`` (the backend's own collective) has no schedule; for the five NCCL tunes its spec takes the
ring formulas (see ``algorithms/native.py``). That is an assumption (NCCL picks ring or tree per size;
gloo mostly rings), which the fitted parameters absorb: they describe native's time as if it were a
ring, at the world size measured. Predictions at another world size do not extrapolate native with
them: ``predict.py`` prices NCCL's native with NCCL's own cost model (``nccl_cost.py``) and refuses any
other backend's. For the other ops native takes what the backends' sources say they run
(``native_structure.py``): ``linear`` all-to-all, scatter and gather, ring's send/recv shift,
``dissemination`` barrier.

The ops that move data without reducing it (all-to-all, scatter, gather, send/recv) have gamma 0, and
``n`` is nccl-tests' size: the whole per-rank buffer (all-to-all's send buffer, scatter's root input,
gather's root output), so a block is ``n / p``. A rank's own block is a local copy, off the network: no
term prices it. Barrier moves no data: its formulas are steps only (beta and gamma 0, whatever ``n``).
Only the algorithms that do these ops have formulas for them (``CostFormulas.has``); asking another
raises NotApplicableError.

``CostTerms.messages`` counts the messages through the busiest port where a step posts one per peer
(one-shot, direct, linear); fits price a step at one latency, predictions at another world size a
message.

Exactness. Each formula is derived from its builder (``collbench/schedules/algorithms``) and equals
``simulator.simulate_terms`` of the built schedule (steps, critical-path bytes, critical-path reduced
bytes) when ``count`` divides evenly (by p, and by the segment count for trees); otherwise chunks
differ by one element and the real-valued ``n / p`` form is exact up to one element per chunk per step.
``tests/unit/test_costs.py`` checks this for p = 1..32 and segments 1, 2, 4, 8. The exceptions, priced
by an upper-bound approximation, marked in their spec's ``costs.approximate`` and gathered in
``APPROXIMATE``: the byte terms of the pipelined ``tree`` all-reduce and of ``two-tree`` (their step
counts are exact). Pairs an algorithm does not implement (``tree`` all-gather...) have no schedule to
match; they keep a formula for what such an algorithm would cost, for the fitter's sake.

Trees take a ``segments`` count k (pipelining).
"""

from __future__ import annotations

import math

from collbench.errors import ConfigError
from collbench.nccl.variants import is_native
from collbench.schedules.algorithms.tree import binary_tree_depth, two_tree_depth
from collbench.schedules.cost import ZERO, CostTerms, ceil_log2, log2_floor
from collbench.schedules.ops import Op
from collbench.schedules.registry import SPECS, algorithm_names, get_algorithm
from collbench.schedules.spec import AlgorithmSpec

APPROXIMATE: frozenset[tuple[Op, str]] = frozenset((op, spec.name) for spec in SPECS for op in spec.costs.approximate)
"""(op, algorithm) pairs whose byte and reduced-byte terms are upper bounds, not the schedule's exact
critical path (their step counts are exact): the pipelined tree all-reduce, whose two phases overlap
unevenly, and the double binary tree, whose critical path depends on the shape of both trees."""


def _as_op(op: Op | str) -> Op:
    return op if isinstance(op, Op) else Op.parse(op)


def _spec(algo: str) -> AlgorithmSpec:
    """The spec whose formulas price ``algo``: a native variant (``native:ring``) is priced as native."""
    return get_algorithm("native" if is_native(algo.strip().lower()) else algo)


def has_cost_model(op: Op | str, algo: str) -> bool:
    """Whether a closed form exists for (op, algo); ``native`` and the named algorithms do."""
    key = algo.strip().lower()
    if is_native(key):
        return True
    _as_op(op)
    return key in algorithm_names()


def cost_terms(op: Op | str, algo: str, world_size: int, size_bytes: float, *, segments: int = 1) -> CostTerms:
    """Coefficients (steps, bytes, reduced bytes) of the closed-form cost of ``algo`` doing ``op``.

    ``algo`` may be ``native`` or a native variant (``native:ring``, ``native@16ch``): both use native's formula.
    Raises UnknownNameError for an unknown op or algorithm, NotApplicableError where the algorithm has
    no formula for the op (``pairwise`` scatter...), ConfigError for a world size below 1, a negative
    size or segments below 1.
    """
    the_op = _as_op(op)
    if world_size < 1:
        raise ConfigError(f"world size must be >= 1, got {world_size}")
    if size_bytes < 0:
        raise ConfigError(f"size must be >= 0 bytes, got {size_bytes}")
    if segments < 1:
        raise ConfigError(f"segments must be >= 1, got {segments}")
    formula = _spec(algo).costs.of(the_op)
    if world_size == 1:
        # One rank: every builder gives it no step at all, so no term either.
        return ZERO
    return formula(world_size, float(size_bytes), segments)


def segments_of(algo: str, size_bytes: float, segment_bytes: int | None) -> int:
    """The pipeline segments ``algo`` ran a message of ``size_bytes`` in with ``segment_bytes`` segments
    (the sweep's ``--segment-bytes``, which rows record): one a segment up to ``MAX_SEGMENTS`` for a
    pipelined schedule (the trees: ``AlgorithmSpec.segments_for``, what the sweep built), else 1 (an
    unsegmented algorithm, native, or no segment size: the schedule the sweep built then has one)."""
    key = algo.strip().lower()
    if is_native(key) or not segment_bytes or key not in algorithm_names():
        return 1
    return get_algorithm(key).segments_for(math.ceil(size_bytes), segment_bytes)


def gamma_beta_ratio(op: Op | str, algo: str, world_size: int) -> float:
    """gamma's coefficient over beta's, at a large size (0 where nothing is reduced or moved)."""
    terms = cost_terms(op, algo, world_size, float(1 << 30))
    return terms.gamma / terms.beta if terms.beta > 0 else 0.0


def is_power_of_two(p: int) -> bool:
    return p >= 1 and p & (p - 1) == 0


__all__ = [
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
