"""One (op, algorithm, backend) ready to price at an asked shape, and the pricing by its own structure.

``predict.py`` picks a fit per (op, algorithm, backend) and hands it here or to ``predict_native.py``
(NCCL's own tuned collectives, and its barrier). A named algorithm is
priced from the structure its closed form (``costs.py``) gives at the asked world size
(``scaled.py``): steps or messages times the fitted latency, bytes over the busiest port times the
fitted per-byte cost; so is a backend's native where what it runs is known (``native_structure.py``).
The basis a prediction prints names that structure (its steps and messages at the asked world size),
so that a reader sees what the number assumes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from collbench.models.costs import cost_terms, segments_of
from collbench.models.fitted import Fit, op_has_payload
from collbench.models.scaled import ScaledFit
from collbench.units import format_bytes

RANKS_PER_NODE_GUESS = 8
"""Ranks a node is taken to hold when a fit does not say its node count (8 GPUs, as most GPU nodes)."""

TimeFn = Callable[[float], float]


def node_class(nodes: int) -> int:
    """NCCL's own classes of node counts: one node, two (``bwIntra`` still), more (``bwInter``)."""
    return min(nodes, 3)


@dataclass(frozen=True, slots=True)
class Shapes:
    """The node count each fit was measured on, where known (by the fit's world size)."""

    nodes_by_world_size: Mapping[int, int] = field(default_factory=dict)

    def nodes_of(self, fit: Fit) -> int | None:
        return self.nodes_by_world_size.get(fit.world_size)

    def assumed_nodes(self, fit: Fit) -> int:
        known = self.nodes_of(fit)
        if known is not None:
            return known
        if fit.world_size <= RANKS_PER_NODE_GUESS or fit.world_size % RANKS_PER_NODE_GUESS:
            return 1
        return fit.world_size // RANKS_PER_NODE_GUESS


def label(fit: Fit, shapes: Shapes) -> str:
    """``op algo backend xP`` and the nodes it was measured on, where known."""
    nodes = shapes.nodes_of(fit)
    where = f" on {nodes} node{'s' if nodes != 1 else ''}" if nodes is not None else ""
    return f"{fit.op} {fit.algo} {fit.backend} x{fit.world_size}{where}"


@dataclass(frozen=True, slots=True)
class Priced:
    """One (op, algo, backend) ready to price at the asked shape."""

    fit: Fit
    time_us: TimeFn
    latency_us: TimeFn
    basis: Callable[[float], str]
    measured_shape: bool
    scaled: ScaledFit | None
    fastest_us: TimeFn | None = None
    """The time had NCCL run, at each size, what the fitted figures price cheapest, where its own
    figures may pick another family (NVLS or the ring and tree: ``predict_native``); ``time_us`` where
    they agree. None where there is no such choice."""


def _count(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.3g}"


def structure_text(fit: Fit, scaled: ScaledFit, world_size: int, size_bytes: float = 1.0) -> str:
    """The algorithm's structure at ``world_size`` as the closed form gives it: its steps (rounds for a
    barrier), the messages its busiest port posts where they differ, the latency each costs, and
    whether bytes cross the port; a pipelined schedule's at ``size_bytes``, in the segments it runs
    that size in. Raises NotApplicableError where the algorithm has no formula for the op."""
    terms = cost_terms(fit.op, fit.algo, world_size, 1.0)
    segments = 1
    if fit.segment_bytes is not None:
        segments = segments_of(fit.algo, size_bytes, fit.segment_bytes)
        terms = fit.terms(size_bytes, world_size)
    payload = op_has_payload(fit.op)
    steps = f"{_count(terms.alpha)} {'step' if payload else 'round'}{'' if terms.alpha == 1 else 's'}"
    if segments > 1 and fit.segment_bytes is not None:
        steps += f" ({segments} segments of {format_bytes(fit.segment_bytes)})"
    if terms.messages is not None:
        steps += f", {_count(terms.message_count)} message{'' if terms.message_count == 1 else 's'} a port"
        each = "a message"
    else:
        each = "a step" if payload else "a round"
    text = f"{steps} at x{world_size}, {scaled.latency_per_message_us:.3g} us {each}"
    return text + (" + bytes over the busiest port" if payload and terms.beta > 0 else "")


def by_structure(fit: Fit, world_size: int, native: str = "") -> Priced:
    """``fit``'s algorithm priced at ``world_size`` from its own structure (``scaled.py``).

    ``native`` says what the backend's own collective runs, where that is known
    (``native_structure.py``): native is then priced by its formula at any shape, and the basis says
    so. Without it, native is priced so only at its measured shape (the caller's rule), where it is
    the fit itself. Raises NotApplicableError where the algorithm has no formula for the op.
    """
    scaled = ScaledFit.of(fit)
    at_shape = world_size == fit.world_size
    # A pipelined schedule (the trees) takes a step a segment: its steps, and so its latency, grow with
    # the size (256 MiB in 4 MiB segments: 64 more than at 1 MiB), as its time does.
    segmented = fit.segment_bytes is not None

    def basis_at(size: float) -> str:
        if fit.algo == "native" and (at_shape or not native):
            text = "the fit itself, at the shape it was measured at"
        elif fit.algo == "native":
            structure = structure_text(fit, scaled, world_size, size)
            text = (
                f"{native}; priced by native's formula, which has that structure ({structure}); "
                "an assumption where the backend's own scheduling differs"
            )
        else:
            text = f"its own structure: {structure_text(fit, scaled, world_size, size)}"
        return text + tail

    tail = ""
    if not at_shape and op_has_payload(fit.op):
        smallest = float(max(fit.min_bytes, 1))
        own = scaled.parts(smallest, fit.world_size)
        if own.time_us > 0 and own.latency_us < 0.5 * own.time_us:
            # The latency then comes from points that are mostly bandwidth: said, as the error is unknown.
            tail += (
                f"; its latency is barely measured (at its smallest size, {format_bytes(int(smallest))}, "
                f"latency is {own.latency_us / own.time_us:.0%} of the fitted time)"
            )
    if fit.points == 1 and at_shape:
        tail += "; one measured point (a barrier has no sizes): the prediction is its time, with no error figure"
    if not segmented:
        latency_us, basis = scaled.parts(1.0, world_size).latency_us, basis_at(1.0)
        return Priced(
            fit, lambda s: scaled.time_us(s, world_size), lambda s: latency_us, lambda s: basis, at_shape, scaled
        )
    return Priced(
        fit,
        lambda s: scaled.time_us(s, world_size),
        lambda s: scaled.parts(s, world_size).latency_us,
        basis_at,
        at_shape,
        scaled,
    )
