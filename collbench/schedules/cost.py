"""The closed-form cost an algorithm module writes beside its builder: its value type and shared shapes.

Every algorithm prices each op as ``CostTerms(alpha, beta, gamma)``: the coefficients of the per-step
latency, the per-byte transfer cost and the per-byte reduction cost, on the machine model that
``collbench/models/costs.py`` describes (and ``models/simulator.py`` applies to built schedules). The
formulas live in the algorithm modules, one :class:`CostFormulas` table per algorithm, because a
formula is derived from its builder and changes with it. This module holds only what several families
share: the value type, the table's shape, and the cost shapes more than one family uses (a pipelined
chain or tree phase, a star around a root).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from collbench.errors import NotApplicableError
from collbench.schedules.ops import Op


@dataclass(frozen=True, slots=True)
class CostTerms:
    """Coefficients of the per-step latency (steps), per-byte cost (bytes) and reduction cost (bytes)."""

    alpha: float
    beta: float
    gamma: float
    messages: float | None = None
    """Messages through the busiest port along the critical path, where a step posts several to
    different peers (a star: one-shot, direct); None where every step posts one, so it equals ``alpha``.

    Fits price a step at one latency (at the world size they measured, steps and messages cannot be
    told apart); predictions at another world size charge each message its share, because a port
    posts its messages one after another, as it sends their bytes."""

    @property
    def message_count(self) -> float:
        """``messages``, or the step count where each step posts one."""
        return self.alpha if self.messages is None else self.messages

    def __add__(self, other: CostTerms) -> CostTerms:
        both_one_per_step = self.messages is None and other.messages is None
        messages = None if both_one_per_step else self.message_count + other.message_count
        return CostTerms(self.alpha + other.alpha, self.beta + other.beta, self.gamma + other.gamma, messages)

    def time_us(self, alpha_us: float, beta_us_per_byte: float, gamma_us_per_byte: float) -> float:
        """The predicted time in microseconds for the given parameters."""
        return self.alpha * alpha_us + self.beta * beta_us_per_byte + self.gamma * gamma_us_per_byte


ZERO = CostTerms(0.0, 0.0, 0.0)

CostFormula = Callable[[int, float, int], CostTerms]
"""``(world_size p, size_bytes n, segments k) -> CostTerms``, for p >= 2 (one rank has no step at all)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CostFormulas:
    """An algorithm's closed-form cost, one formula per op.

    Every algorithm has a formula for every op, also for the ops it does not build (``tree``
    all-gather...): there it is what such an algorithm would cost, so that a fit of any measured
    (op, algorithm) pair has a model to fit.
    """

    all_reduce: CostFormula
    reduce_scatter: CostFormula
    all_gather: CostFormula
    broadcast: CostFormula
    reduce: CostFormula
    all_to_all: CostFormula | None = None
    scatter: CostFormula | None = None
    gather: CostFormula | None = None
    sendrecv: CostFormula | None = None
    barrier: CostFormula | None = None
    scan: CostFormula | None = None
    exscan: CostFormula | None = None
    """The data-movement ops, barrier and the prefix reductions: set by the algorithms that do them (and
    native); the five above are required of every algorithm, these only of those that build them."""
    approximate: frozenset[Op] = frozenset()
    """Ops whose byte and reduced-byte terms are upper bounds, not the built schedule's exact critical
    path (their step counts are exact); the others equal the simulated schedule when sizes divide."""

    def has(self, op: Op) -> bool:
        """Whether there is a formula for ``op``."""
        return getattr(self, op.name.lower()) is not None

    def of(self, op: Op) -> CostFormula:
        """The formula for ``op``; raise NotApplicableError where the algorithm has none."""
        formula: CostFormula | None = getattr(self, op.name.lower())
        if formula is None:
            raise NotApplicableError(f"no cost formula for {op.value} here: the algorithm does not do it")
        return formula


def log2_floor(p: int) -> int:
    """floor(log2 p) for p >= 1."""
    return p.bit_length() - 1


def ceil_log2(p: int) -> int:
    """ceil(log2 p) for p >= 1."""
    return (p - 1).bit_length()


def tree_phase(depth: int, fan: int, n: float, k: int, reduces: bool) -> CostTerms:
    """A pipelined tree phase: ``depth + k - 1`` steps, a hop moving ``fan`` pieces of ``n/k`` bytes.

    A chain (a ring used for a rooted op) is the same shape with a fan of one.
    """
    if depth == 0:
        return ZERO
    steps = depth + k - 1
    per_hop = fan * n / k
    return CostTerms(float(steps), steps * per_hop, steps * per_hop if reduces else 0.0)


def star(p: int, n: float, reduces: bool) -> CostTerms:
    """One step in which the root's port moves p-1 whole buffers (in for reduce, out for broadcast),
    one message per other rank."""
    return CostTerms(1.0, (p - 1) * n, (p - 1) * n if reduces else 0.0, float(p - 1))


def star_broadcast(p: int, n: float, k: int) -> CostTerms:
    """Broadcast as one star step from the root (direct's and one-shot's: they do the same exchange)."""
    return star(p, n, False)


def star_reduce(p: int, n: float, k: int) -> CostTerms:
    """Reduce as one star step into the root (direct's and one-shot's: they do the same exchange)."""
    return star(p, n, True)
