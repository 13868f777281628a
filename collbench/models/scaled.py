"""One fit priced at another world size from its algorithm's structure.

A fit describes its algorithm at the world size it was measured at (``p0``): ``T0(n)``. Its own
closed form (``costs.py``, the table beside the builder) says how each part of that time scales:

* the latency part is the per-step latency ``a`` (the fit's latency at its smallest sizes) times the
  messages the busiest port posts along the critical path (the step count, or for a star one message
  per peer): ``2(p-1)`` for a ring all-reduce, ``log2 p`` for recursive doubling; for the ops that
  move data without reducing it, ``p-1`` steps for a pairwise all-to-all, ``ceil(log2 p)`` for
  Bruck's, ``p-1`` messages in one step for the linear one (every pair at once, as NCCL's grouped
  send/recv), ``p-1`` messages from the root for a linear scatter or gather against ``ceil(log2 p)``
  steps for a binomial tree, and ``ceil(log2 p)`` rounds for a dissemination barrier;
* the bandwidth part is what is left of ``T0(n)`` once that latency and the reduction are taken out,
  ``R0(n)``: the bytes over the busiest port at ``p0`` times the per-byte cost at size ``n`` (which a
  piecewise fit lets change with size: protocols). At ``p`` ranks the same per-byte cost applies to
  that algorithm's bytes at ``p``, so ``R0(n)`` scales by ``bytes(p, n) / bytes(p0, n)``, a constant in
  ``n`` because every formula is linear in the size;
* the reduction part is ``gamma`` times the bytes reduced at ``p``.

So ``T(p, n) = a * messages(p) + R0(n) * bytes(p) / bytes(p0) + gamma * reduced(p, n)``, which is
``T0(n)`` at ``p0``. ``R0`` is made non-decreasing in ``n`` (its running maximum, over every size where
a piecewise fit hands over from one segment to the next), so the prediction never falls as the size
grows, at any world size.

A barrier has no bytes (its fit is a latency per round, ``fit_latency.py``): its prediction is the
latency part alone. An algorithm with no formula for the op (``CostFormulas.of``) cannot be priced:
:meth:`ScaledFit.of` raises NotApplicableError, which ``predict`` reports as one refused line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from collbench.models.costs import cost_terms
from collbench.models.fitted import Fit
from collbench.schedules.cost import CostTerms

_GRID_PER_DOUBLING = 4


@dataclass(frozen=True, slots=True)
class TimeParts:
    """A predicted time split into its latency, bandwidth and reduction parts (microseconds)."""

    latency_us: float
    bandwidth_us: float
    reduction_us: float

    @property
    def time_us(self) -> float:
        return self.latency_us + self.bandwidth_us + self.reduction_us


def _switch_sizes(fit: Fit) -> list[float]:
    """Sizes around every place a piecewise fit can hand over from one segment to the next."""
    sizes: list[float] = []
    for seg, nxt in zip(fit.segments, fit.segments[1:], strict=False):
        middle = math.sqrt(max(seg.max_bytes, 1) * max(nxt.min_bytes, 1))
        for edge in (seg.max_bytes, nxt.min_bytes, middle):
            sizes.extend((max(edge - 1.0, 1.0), edge, edge + 1.0))
    return sizes


@dataclass(frozen=True, slots=True)
class ScaledFit:
    """A fit with what it takes to price its algorithm at any world size (see the module docstring)."""

    fit: Fit
    latency_per_message_us: float
    gamma_us_per_byte: float
    terms0: CostTerms
    """The closed form at the fit's own world size, for one byte."""
    grid: tuple[float, ...]
    """Sizes (bytes) at which ``R0``'s running maximum is kept, ascending."""
    running_max_us: tuple[float, ...]

    @classmethod
    def of(cls, fit: Fit) -> ScaledFit:
        """Prepare ``fit``; every size it may hand over at is on the grid, so the envelope is exact.

        Raises NotApplicableError where the fit's algorithm has no formula for its op."""
        terms0 = cost_terms(fit.op, fit.algo, fit.world_size, 1.0)
        alpha0 = fit.params_at(max(fit.min_bytes, 1))[0]
        messages0 = terms0.message_count
        per_message = alpha0 * terms0.alpha / messages0 if messages0 > 0 else 0.0
        gamma = fit.gamma_us_per_byte or 0.0
        lo, hi = 1.0, max(float(fit.max_bytes), 2.0) * 4.0
        doublings = math.ceil(math.log2(hi / lo))
        log_grid = [lo * 2.0 ** (i / _GRID_PER_DOUBLING) for i in range(doublings * _GRID_PER_DOUBLING + 1)]
        grid = sorted({*log_grid, *_switch_sizes(fit)})
        base = cls(fit, per_message, gamma, terms0, (), ())
        running: list[float] = []
        best = 0.0
        for size in grid:
            best = max(best, base._raw_bandwidth_us(size))
            running.append(best)
        return cls(fit, per_message, gamma, terms0, tuple(grid), tuple(running))

    def _raw_bandwidth_us(self, size_bytes: float) -> float:
        """``R0(n)``: the fit's time at its own world size less its latency and reduction parts."""
        if self.fit.segment_bytes is not None:
            # A pipelined schedule's steps grow with its segments (one a segment): priced at the size.
            here = self.fit.terms(size_bytes)
            latency0 = self.latency_per_message_us * here.message_count
            return self.fit.predict_us(size_bytes) - latency0 - self.gamma_us_per_byte * here.gamma
        latency0 = self.latency_per_message_us * self.terms0.message_count
        reduction0 = self.gamma_us_per_byte * self.terms0.gamma * size_bytes
        return self.fit.predict_us(size_bytes) - latency0 - reduction0

    def bandwidth0_us(self, size_bytes: float) -> float:
        """``R0(n)`` made non-decreasing in ``n``, and never below 0."""
        value = self._raw_bandwidth_us(size_bytes)
        # The last grid size at or below this one carries the running maximum up to it.
        lo, hi = 0, len(self.grid)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.grid[mid] <= size_bytes:
                lo = mid + 1
            else:
                hi = mid
        if lo > 0:
            value = max(value, self.running_max_us[lo - 1])
        return max(value, 0.0)

    def parts(self, size_bytes: float, world_size: int) -> TimeParts:
        """The predicted time at ``size_bytes`` on ``world_size`` ranks, by part."""
        if self.fit.segment_bytes is not None:
            # Segments as the fit's points ran them, at this size, on both sides of the ratio.
            there, here = self.fit.terms(size_bytes, world_size), self.fit.terms(size_bytes)
            ratio = there.beta / here.beta if here.beta > 0 else 0.0
            return TimeParts(
                self.latency_per_message_us * there.message_count,
                self.bandwidth0_us(size_bytes) * ratio,
                self.gamma_us_per_byte * there.gamma,
            )
        terms = cost_terms(self.fit.op, self.fit.algo, world_size, 1.0)
        latency = self.latency_per_message_us * terms.message_count
        ratio = terms.beta / self.terms0.beta if self.terms0.beta > 0 else 0.0
        bandwidth = self.bandwidth0_us(size_bytes) * ratio
        reduction = self.gamma_us_per_byte * terms.gamma * size_bytes
        return TimeParts(latency, bandwidth, reduction)

    def time_us(self, size_bytes: float, world_size: int) -> float:
        return self.parts(size_bytes, world_size).time_us

    def per_step_params(self, size_bytes: float) -> tuple[float, float]:
        """(latency per step in us, per-byte cost in us/byte) that price ``size_bytes`` as this model
        does at the fit's own world size: the uniform links a simulated schedule runs on."""
        alpha = self.latency_per_message_us * self.terms0.message_count / max(self.terms0.alpha, 1.0)
        # A 0-byte size (predict --sizes 0) has no per-byte cost to price: latency only.
        beta = (
            self.bandwidth0_us(size_bytes) / (self.terms0.beta * size_bytes)
            if self.terms0.beta * size_bytes > 0
            else 0.0
        )
        return alpha, beta
