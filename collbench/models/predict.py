"""Predict times per algorithm at world sizes no one here has, from fitted models, and say how sure.

Each (op, algorithm, backend) is priced from one fit: the one measured at the shape asked if there is
one, else at the same kind of node count (one node, two, more), else at the largest world size.

* A named algorithm (ring, recursive doubling, ...) is priced from its own structure
  (``scaled.py``): its per-step latency times the messages its busiest port posts, its per-byte cost
  times the bytes over that port, and its reduction cost, each at the asked world size.
* ``native`` is the backend's own choice. For NCCL that is ring or tree, chosen and priced by NCCL's
  own cost model (``nccl_cost.py``), with its latency scale and bus bandwidth fitted to the measured
  curve: NCCL's structure with this machine's numbers. For any other backend its algorithm is unknown,
  so it is predicted only at the shape it was measured at, and refused elsewhere with one line.

Every prediction carries the fit it came from, its scale ("x64 the measured world size") and, at the
measured shape and sizes, the model's error there. Crossing from the measured node count to another
needs inter-node parameters: a fit measured on several nodes gives them; otherwise a note says the
prediction assumes the measured links. Up to ``simulate_max_ranks`` ranks the real schedule (the
registry's builder) is also priced by the simulator on uniform links with the model's parameters, as
a check of the closed form on the actual schedule.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from collbench.errors import ConfigError, UserError
from collbench.models.crossover import Crossover, time_crossings
from collbench.models.fitted import Fit
from collbench.models.nccl_cost import NCCL_SOURCE, Arch, NcclMachine, calibrate, nccl_choice
from collbench.models.predict_defaults import remeasure_advice
from collbench.models.scaled import ScaledFit
from collbench.models.simulator import UniformLinks, simulate
from collbench.schedules.ops import Op

DEFAULT_SIMULATE_MAX_RANKS = 64
RANKS_PER_NODE_GUESS = 8
"""Ranks a node is taken to hold when a fit does not say its node count (8 GPUs, as most GPU nodes)."""
_CALIBRATION_POINTS = 40

TimeFn = Callable[[float], float]


@dataclass(frozen=True, slots=True)
class Prediction:
    op: str
    algo: str
    backend: str
    world_size: int
    size_bytes: int
    time_us: float
    busbw_gbps: float
    simulated_us: float | None
    """The real schedule priced by the simulator (small world sizes only), else None; None also for
    one-shot and direct, whose latency per message the simulator does not model."""
    fitted_world_size: int
    latency_us: float = 0.0
    """The latency part of ``time_us`` (steps or messages times the per-step latency)."""
    fit: str = ""
    """The fit it came from: ``op algo backend xP`` (and its nodes where known)."""
    scale: float = 1.0
    """The asked world size over the measured one."""
    error_pct: float | None = None
    """The model's median error on its measured points near this size, at the measured shape; None
    where no measured point is near (another world size, or sizes beyond those measured)."""
    basis: str = ""
    """How it was priced, in a few words (the algorithm's structure, or NCCL's model and its choice)."""

    @property
    def scale_text(self) -> str:
        """``x64 the measured world size``, or ``the measured world size``."""
        if self.world_size == self.fitted_world_size:
            return "the measured world size"
        return f"x{self.scale:.3g} the measured world size"

    @property
    def certainty(self) -> str:
        """One line a reader can judge the number by."""
        if self.error_pct is not None:
            return f"within {self.error_pct:.1f}% (median) of the measured points at this shape"
        return f"{self.scale_text}: no measured point near; error unknown"

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "algo": self.algo,
            "backend": self.backend,
            "world_size": self.world_size,
            "size_bytes": self.size_bytes,
            "time_us": self.time_us,
            "latency_us": self.latency_us,
            "busbw_gbps": self.busbw_gbps,
            "simulated_us": self.simulated_us,
            "fitted_world_size": self.fitted_world_size,
            "fit": self.fit,
            "scale": self.scale,
            "scale_text": self.scale_text,
            "error_pct": self.error_pct,
            "certainty": self.certainty,
            "basis": self.basis,
        }


@dataclass(frozen=True, slots=True)
class PredictReport:
    world_size: int
    nodes: int
    predictions: list[Prediction]
    crossovers: list[Crossover]
    choice: list[dict[str, Any]]
    """Per op and size: the algorithm with the lowest predicted time."""
    refused: list[str] = field(default_factory=list)
    """Fits not used, one ``op algo: why`` each (``Fit.distrust``, or native of an unknown algorithm)."""
    notes: list[str] = field(default_factory=list)
    """What the predictions assume (links between nodes, node counts), one line each."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "world_size": self.world_size,
            "nodes": self.nodes,
            "predictions": [p.to_dict() for p in self.predictions],
            "crossovers": [c.to_dict() for c in self.crossovers],
            "choice": list(self.choice),
            "refused": list(self.refused),
            "notes": list(self.notes),
        }


def pick_fits(fits: Sequence[Fit], ops: Sequence[str] | None = None) -> list[Fit]:
    """One fit per (op, algo, backend): the one measured at the largest world size."""
    wanted = {Op.parse(o).value for o in ops} if ops else None
    best: dict[tuple[str, str, str], Fit] = {}
    for f in fits:
        if wanted is not None and f.op not in wanted:
            continue
        key = (f.op, f.algo, f.backend)
        if key not in best or f.world_size > best[key].world_size:
            best[key] = f
    return sorted(best.values(), key=lambda f: (f.op, f.backend, f.algo))


def _node_class(nodes: int) -> int:
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


def _pick_for(candidates: Sequence[Fit], world_size: int, nodes: int, shapes: Shapes) -> Fit:
    """The fit to price a shape from: the shape itself, else its node class, else the largest."""

    def rank(f: Fit) -> tuple[int, int, int]:
        same = f.world_size == world_size and shapes.assumed_nodes(f) == nodes
        same_class = _node_class(shapes.assumed_nodes(f)) == _node_class(nodes)
        return (int(same), int(same_class), f.world_size)

    return max(candidates, key=rank)


def _label(fit: Fit, shapes: Shapes) -> str:
    nodes = shapes.nodes_of(fit)
    where = f" on {nodes} node{'s' if nodes != 1 else ''}" if nodes is not None else ""
    return f"{fit.op} {fit.algo} {fit.backend} x{fit.world_size}{where}"


def _error_near(fit: Fit, size_bytes: float) -> float | None:
    """The model's median error near a size at its own shape, where a measured point is near."""
    if not fit.min_bytes / 2 <= size_bytes <= 2 * max(fit.max_bytes, 1):
        return None
    segment = fit.segment_at(size_bytes)
    value = segment.median_abs_pct_error if segment is not None else fit.median_abs_pct_error
    return value if math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class Priced:
    """One (op, algo, backend) ready to price at the asked shape."""

    fit: Fit
    time_us: TimeFn
    latency_us: TimeFn
    basis: Callable[[float], str]
    measured_shape: bool
    scaled: ScaledFit | None


def _links_notes(linked: Mapping[tuple[str, str, int, int | None], list[str]], nodes: int) -> list[str]:
    """One line per (op, backend, measured shape) whose node count differs from the asked one.

    Crossing node counts needs the links between nodes: a fit measured on several nodes gives them;
    otherwise the prediction assumes the measured ones, and says so.
    """
    out: list[str] = []
    for (op, backend, world, measured), algos in sorted(linked.items(), key=lambda kv: str(kv[0])):
        which = f"{op} {', '.join(algos)} ({backend} x{world}"
        if measured is None:
            if nodes > 1 or world > RANKS_PER_NODE_GUESS:
                out.append(
                    f"{which}): the fits do not say their node count; predicted with the measured links "
                    "wherever the ranks are (give --measured-nodes)"
                )
        elif measured == nodes:
            continue
        elif measured == 1:
            out.append(
                f"{which}, measured on 1 node): predicted on {nodes} nodes with the measured links between "
                "them too; no inter-node parameters were measured"
            )
        elif nodes == 1:
            out.append(f"{which}, measured on {measured} nodes): predicted on 1 node with those links within it")
        else:
            out.append(f"{which}): inter-node parameters from its measurement on {measured} nodes")
    return out


def _named(fit: Fit, world_size: int) -> Priced:
    scaled = ScaledFit.of(fit)
    terms = scaled.parts(1.0, world_size)
    what = "a step" if scaled.terms0.messages is None else "a message"
    if fit.algo == "native":
        basis = "the fit itself, at the shape it was measured at"
    else:
        basis = f"its own structure: {scaled.latency_per_message_us:.3g} us {what} + bytes over the busiest port"
    return Priced(
        fit,
        lambda s: scaled.time_us(s, world_size),
        lambda s: terms.latency_us,
        lambda s: basis,
        world_size == fit.world_size,
        scaled,
    )


def _calibration_points(fit: Fit) -> tuple[list[float], list[float]]:
    """The fit's curve at its own shape, sampled evenly in log size over its measured sizes."""
    lo, hi = max(float(fit.min_bytes), 1.0), max(float(fit.max_bytes), 2.0)
    if hi <= lo:
        hi = lo * 2
    sizes = [lo * (hi / lo) ** (i / (_CALIBRATION_POINTS - 1)) for i in range(_CALIBRATION_POINTS)]
    scaled = ScaledFit.of(fit)
    return sizes, [scaled.time_us(s, fit.world_size) for s in sizes]


def nccl_machine_for(fit: Fit, nodes: int, arch: Arch, nvlink: bool = True) -> NcclMachine:
    """NCCL's model calibrated to ``fit``'s curve at its own shape (``nodes`` nodes)."""
    sizes, times = _calibration_points(fit)
    start = NcclMachine(bus_bw_gbps=1.0, arch=arch, nvlink=nvlink)
    return calibrate(start, fit.op, fit.world_size, nodes, sizes, times)


def _native_nccl(
    fit: Fit,
    others: Sequence[Fit],
    world_size: int,
    nodes: int,
    shapes: Shapes,
    arch: Arch,
    at_shape: bool,
    nvlink: bool = True,
) -> tuple[Priced, list[str]]:
    """NCCL's native at a shape: NCCL's model with this machine's fitted numbers.

    At the measured shape the fit itself prices every size, except more than a doubling below the
    measured sizes where the fit's smallest size is mostly bandwidth (its latency was not measured):
    there NCCL's model does, capped by the fit's time at that edge so that the time never falls with
    size. The model is
    calibrated only where it is used.
    """
    measured_nodes = shapes.assumed_nodes(fit)
    notes: list[str] = []
    inter_fit: Fit | None = None
    if _node_class(nodes) == 3 and _node_class(measured_nodes) < 3 and not at_shape:
        beyond = [f for f in others if f is not fit and _node_class(shapes.assumed_nodes(f)) == 3]
        if beyond:
            inter_fit = max(beyond, key=lambda f: f.world_size)
        else:
            notes.append(
                f"{_label(fit, shapes)}: NCCL uses its inter-node bandwidth beyond 2 nodes; none was measured, "
                "so the prediction assumes the measured bus bandwidth there too"
            )

    @functools.cache
    def machine() -> NcclMachine:
        own = nccl_machine_for(fit, measured_nodes, arch, nvlink)
        if inter_fit is None:
            return own
        inter = nccl_machine_for(inter_fit, shapes.assumed_nodes(inter_fit), arch, nvlink)
        return dataclasses.replace(own, inter_bus_bw_gbps=inter.bus_bw_gbps)

    # A fit speaks for its measured sizes and one doubling below them, as far as its error is shown.
    lo = fit.min_bytes / 2
    scaled = ScaledFit.of(fit) if at_shape else None
    # The fit's latency is its own where its smallest size is mostly latency.
    smallest = float(fit.min_bytes)
    fit_below = scaled is not None and (
        scaled.parts(smallest, world_size).latency_us >= 0.5 * scaled.time_us(smallest, world_size)
    )

    def from_fit(size: float) -> bool:
        return scaled is not None and (size >= lo or fit_below)

    def time_us(size: float) -> float:
        if scaled is not None and from_fit(size):
            return scaled.time_us(size, world_size)
        model = nccl_choice(machine(), fit.op, world_size, nodes, size, smooth=True).time_us
        return model if scaled is None else min(scaled.time_us(lo, world_size), model)

    def latency_us(size: float) -> float:
        if scaled is not None and from_fit(size):
            return scaled.parts(size, world_size).latency_us
        return nccl_choice(machine(), fit.op, world_size, nodes, size, smooth=True).latency_us

    def basis(size: float) -> str:
        if from_fit(size):
            return "the fit itself, at the shape it was measured at"
        m = machine()
        c = nccl_choice(m, fit.op, world_size, nodes, size, smooth=True)
        below = " (below the measured sizes)" if scaled is not None else ""
        inter = ""
        if m.inter_bus_bw_gbps is not None and inter_fit is not None:
            inter = f"; beyond 2 nodes the bus bandwidth of x{inter_fit.world_size} ({m.inter_bus_bw_gbps:.3g} GB/s)"
        return (
            f"NCCL's model ({NCCL_SOURCE}, {arch}) picks {c.algo}/{c.proto}{below}; fitted: latencies "
            f"x{m.latency_scale:.2g}, bus {m.bus_bw_gbps:.3g} GB/s{inter}"
        )

    return Priced(fit, time_us, latency_us, basis, at_shape, None), notes


def price_fits(
    fits: Sequence[Fit],
    world_size: int,
    nodes: int,
    *,
    ops: Sequence[str] | None = None,
    shapes: Shapes | None = None,
    nccl_arch: Arch = "hopper",
    nccl_nvlink: bool = True,
) -> tuple[list[Priced], list[str], list[str]]:
    """Every usable (op, algo, backend) ready to price at ``world_size`` ranks on ``nodes`` nodes.

    Returns (priced, refused: ``op algo: why`` each, notes: what the prices assume).
    """
    shapes = shapes or Shapes()
    wanted = {Op.parse(o).value for o in ops} if ops else None
    groups: dict[tuple[str, str, str], list[Fit]] = {}
    refused: list[str] = []
    for f in fits:
        if wanted is not None and f.op not in wanted:
            continue
        groups.setdefault((f.op, f.algo, f.backend), []).append(f)
    priced: list[Priced] = []
    notes: list[str] = []
    linked: dict[tuple[str, str, int, int | None], list[str]] = {}
    for (op, algo, backend), members in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
        usable = [f for f in members if not f.distrust()]
        if not usable:
            worst = max(members, key=lambda f: f.world_size)
            refused.append(f"{op} {algo}: {worst.distrust()}")
            continue
        fit = _pick_for(usable, world_size, nodes, shapes)
        label = _label(fit, shapes)
        at_shape = fit.world_size == world_size and shapes.assumed_nodes(fit) == nodes
        if algo != "native" or (at_shape and backend != "nccl"):
            priced.append(_named(fit, world_size))
            if algo != "native":
                linked.setdefault((op, backend, fit.world_size, shapes.nodes_of(fit)), []).append(algo)
            continue
        if backend != "nccl":
            refused.append(
                f"{op} native: {backend} picks its own algorithm, unknown to its fit (x{fit.world_size}); "
                "not predicted at another shape"
            )
            continue
        if shapes.nodes_of(fit) is None and not at_shape:
            notes.append(
                f"{label}: the fit does not say how many nodes it was measured on; taken as "
                f"{shapes.assumed_nodes(fit)} ({RANKS_PER_NODE_GUESS} ranks a node; give --measured-nodes)"
            )
        entry, more = _native_nccl(fit, usable, world_size, nodes, shapes, nccl_arch, at_shape, nccl_nvlink)
        priced.append(entry)
        notes.extend(more)
    return priced, refused, _links_notes(linked, nodes) + notes


def _simulated(entry: Priced, world_size: int, nodes: int, size_bytes: int, elem_bytes: int) -> float | None:
    from collbench.schedules.registry import algorithm_names, get_algorithm

    fit, scaled = entry.fit, entry.scaled
    # The simulator prices a step at one latency however many messages it posts: where an algorithm
    # posts one per peer (a star), it would check another model than the one predicted.
    if scaled is None or fit.algo not in algorithm_names() or scaled.terms0.messages is not None:
        return None
    spec = get_algorithm(fit.algo)
    op = Op.parse(fit.op)
    if spec.builder is None or not spec.supports(op):
        return None
    count = max(size_bytes // elem_bytes, 1)
    alpha, beta = scaled.per_step_params(size_bytes)
    try:
        schedule = spec.build(op, world_size, count)
    except UserError:
        return None
    links = UniformLinks(alpha, beta, world_size, nodes)
    return simulate(schedule, links, elem_bytes=elem_bytes, gamma_us_per_byte=scaled.gamma_us_per_byte).time_us


def _fastest(entries: Sequence[Priced], size_bytes: float) -> Priced:
    return min(entries, key=lambda e: e.time_us(size_bytes))


def crossovers_of(entries: Sequence[Priced], world_size: int, lo: float, hi: float) -> list[Crossover]:
    """Sizes in [lo, hi] where the fastest of each (op, backend)'s priced algorithms changes."""
    groups: dict[tuple[str, str], list[Priced]] = {}
    for e in entries:
        groups.setdefault((e.fit.op, e.fit.backend), []).append(e)
    out: list[Crossover] = []
    for (op, backend), members in sorted(groups.items()):
        if len(members) < 2:
            continue
        candidates: set[int] = set()
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                candidates.update(time_crossings(a.time_us, b.time_us, lo, hi))
        prev = _fastest(members, max(lo, 1.0)).fit.algo
        for size in sorted(candidates):
            now = _fastest(members, size).fit.algo
            if now != prev:
                out.append(Crossover(op, backend, world_size, size, prev, now))
                prev = now
    return out


def predict(
    fits: Sequence[Fit],
    world_size: int,
    sizes: Sequence[int],
    *,
    nodes: int = 1,
    ops: Sequence[str] | None = None,
    simulate_max_ranks: int = DEFAULT_SIMULATE_MAX_RANKS,
    elem_bytes: int = 4,
    measured_nodes: Mapping[int, int] | None = None,
    nccl_arch: Arch = "hopper",
    nccl_nvlink: bool = True,
) -> PredictReport:
    """Predicted time and busbw per (op, algorithm) at ``world_size`` ranks for every size (bytes).

    ``measured_nodes`` maps a fit's world size to the nodes it was measured on, where known;
    ``nccl_arch`` and ``nccl_nvlink`` describe the GPUs for NCCL's model of native (the fits do not).
    Raises ConfigError for a world size below 2, nodes that do not divide it, no sizes, no fits left
    for the ops asked, or none that may be used.
    """
    if world_size < 2:
        raise ConfigError(f"--ranks must be at least 2, got {world_size}")
    if nodes < 1 or world_size % nodes:
        raise ConfigError(f"{world_size} ranks do not spread evenly over {nodes} nodes")
    if not sizes:
        raise ConfigError("no sizes to predict")
    picked = pick_fits(fits, ops)
    if not picked:
        asked = ", ".join(ops) if ops else "any op"
        raise ConfigError(f"no fits for {asked}; the fits cover: {', '.join(sorted({f.op for f in fits}))}")
    shapes = Shapes(dict(measured_nodes or {}))
    entries, refused, notes = price_fits(
        fits, world_size, nodes, ops=ops, shapes=shapes, nccl_arch=nccl_arch, nccl_nvlink=nccl_nvlink
    )
    if not entries:
        raise ConfigError(
            "no fit explains its data well enough to extrapolate ("
            + "; ".join(refused)
            + "); "
            + remeasure_advice(fits)
        )
    preds: list[Prediction] = []
    for e in entries:
        f = e.fit
        factor = Op.parse(f.op).spec.busbw_factor(world_size)
        label = _label(f, shapes)
        for size in sizes:
            t = e.time_us(size)
            sim = _simulated(e, world_size, nodes, size, elem_bytes) if world_size <= simulate_max_ranks else None
            busbw = size / t / 1e3 * factor if t > 0 else 0.0
            error = _error_near(f, size) if e.measured_shape else None
            basis = e.basis(size)
            preds.append(
                Prediction(
                    f.op, f.algo, f.backend, world_size, size, t, busbw, sim, f.world_size,
                    latency_us=e.latency_us(size), fit=label, scale=world_size / f.world_size,
                    error_pct=error, basis=basis,
                )
            )  # fmt: skip
    crossovers = crossovers_of(entries, world_size, float(min(sizes)), float(max(sizes)))
    choice: list[dict[str, Any]] = []
    groups: dict[tuple[str, str], list[Priced]] = {}
    for e in entries:
        groups.setdefault((e.fit.op, e.fit.backend), []).append(e)
    for (op, backend), members in sorted(groups.items()):
        for size in sizes:
            best = _fastest(members, size)
            choice.append(
                {"op": op, "backend": backend, "size_bytes": size, "algo": best.fit.algo, "time_us": best.time_us(size)}
            )
    return PredictReport(world_size, nodes, preds, crossovers, choice, refused, notes)


@dataclass(frozen=True, slots=True)
class PredictedRange:
    """Sizes ``[min_bytes, max_bytes]`` (None: unbounded) where ``algo`` is predicted fastest."""

    min_bytes: int
    max_bytes: int | None
    algo: str
    at_bytes: int
    time_us: float
    native_us: float | None
    """Native's predicted time at ``at_bytes``; None where native is not predicted (unknown algorithm)."""


def predicted_ranges(
    fits: Sequence[Fit],
    op: str,
    world_size: int,
    nodes: int,
    *,
    shapes: Shapes | None = None,
    nccl_arch: Arch = "hopper",
) -> tuple[list[PredictedRange], list[str], list[str]]:
    """The fastest predicted algorithm per size range of ``op`` at a shape, from 1 byte up to the
    largest size measured, switching where predictions cross; and (refused, notes) as
    :func:`price_fits` gives them. An empty list when no fit of ``op`` may be used."""
    entries, refused, notes = price_fits(fits, world_size, nodes, ops=[op], shapes=shapes, nccl_arch=nccl_arch)
    if not entries:
        return [], refused, notes
    hi = float(max(e.fit.max_bytes for e in entries))
    starts = [0] + [c.size_bytes for c in crossovers_of(entries, world_size, 1.0, hi)]
    native = next((e for e in entries if e.fit.algo == "native"), None)
    out: list[PredictedRange] = []
    for i, start in enumerate(starts):
        end = starts[i + 1] - 1 if i + 1 < len(starts) else None
        at = max(1, int(math.sqrt(max(start, 1) * end)) if end is not None else start)
        best = _fastest(entries, at)
        time_us = best.time_us(at)
        native_us = native.time_us(at) if native is not None else None
        if out and out[-1].algo == best.fit.algo:
            # The same winner on both sides of a crossing between two others: one range.
            start = out.pop().min_bytes
        out.append(PredictedRange(start, end, best.fit.algo, at, time_us, native_us))
    return out, refused, notes
