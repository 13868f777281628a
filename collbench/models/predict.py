"""Predict times per algorithm at world sizes no one here has, from fitted models, and say how sure.

Each (op, algorithm, backend) is priced from one fit: the one measured at the shape asked if there is
one, else at the same kind of node count (one node, two, more), else at the largest world size.

* A named algorithm (ring, recursive doubling, ...) is priced from its own structure
  (``scaled.py``): its per-step latency times the messages its busiest port posts, its per-byte cost
  times the bytes over that port, and its reduction cost, each at the asked world size.
* ``native`` is the backend's own choice. For the five collectives NCCL tunes that is ring or tree,
  chosen and priced by NCCL's own cost model (``nccl_cost.py``), with its latency scale and bus
  bandwidth fitted to the measured curve: NCCL's structure with this machine's numbers
  (``predict_native.py``). The others (all-to-all, scatter, gather, send/recv, barrier) NCCL runs as
  grouped send/recv, which its model does not price: they are priced by native's formula, the
  structure of grouped point-to-point, and the basis says it is that assumption. For any other
  backend native's algorithm is unknown, so it is predicted only at the shape it was measured at, and
  refused elsewhere with one line.
* Barrier moves no data: a fit of it is a latency per round, its prediction one time (at size 0) per
  algorithm, with no bandwidth.

Every prediction carries the fit it came from, its scale ("x64 the measured world size") and, at the
measured shape and sizes, the model's error there. Crossing from the measured node count to another
needs inter-node parameters: a fit measured on several nodes gives them; otherwise a note says the
prediction assumes the measured links. Up to ``simulate_max_ranks`` ranks the real schedule (the
registry's builder) is also priced by the simulator on uniform links with the model's parameters, as
a check of the closed form on the actual schedule.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from collbench.backends import backend_named, measured_on_gpus
from collbench.errors import ConfigError, NotApplicableError, UserError
from collbench.models.crossover import Crossover, fastest_changes
from collbench.models.fit_choice import not_below_fewer_nodes, pick_for
from collbench.models.fitted import Fit, fitted_from, op_has_payload
from collbench.models.link_floor import link_floor
from collbench.models.native_structure import formula_disagreement, native_structure
from collbench.models.nccl_cost import NCCL_SOURCE
from collbench.models.nccl_graph import NodeFacts
from collbench.models.nccl_machine import LL128_MIN_SM, Arch, arch_assumed, arch_of, ll128_sm
from collbench.models.predict_defaults import refusals_briefly, remeasure_advice
from collbench.models.predict_native import NO_FACTS, native_nccl, nccl_barrier
from collbench.models.priced import RANKS_PER_NODE_GUESS, Priced, Shapes, by_structure, label
from collbench.models.simulator import UniformLinks, simulate
from collbench.schedules.ops import Op
from collbench.topology.bandwidth import compute_capability, gpu_links
from collbench.units import check_ranks, factor_text, gbps, time_text

DEFAULT_SIMULATE_MAX_RANKS = 64

__all__ = [
    "DEFAULT_SIMULATE_MAX_RANKS",
    "RANKS_PER_NODE_GUESS",
    "PredictReport",
    "PredictedRange",
    "Prediction",
    "Priced",
    "Shapes",
    "crossovers_of",
    "pick_fits",
    "predict",
    "predicted_ranges",
    "price_fits",
]


@dataclass(frozen=True, slots=True)
class Prediction:
    op: str
    algo: str
    backend: str
    world_size: int
    size_bytes: int
    time_us: float
    busbw_gbps: float | None
    """None for barrier: it moves no data, so it has no bandwidth (a time only)."""
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
    """How it was priced, in a few words (what measured the fit where it says, the algorithm's structure,
    or NCCL's model and its choice)."""
    fit_source: str = ""
    """What measured the fit (``Fit.source``): ``nccl-tests``, ``collbench``, ``mixed``; empty: not said."""

    @property
    def scale_text(self) -> str:
        """``x64 the measured world size``, or ``the measured world size``."""
        if self.world_size == self.fitted_world_size:
            return "the measured world size"
        return f"x{factor_text(self.scale)} the measured world size"

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
            "fit_source": self.fit_source,
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


def native_modelled(backend: str) -> bool:
    """Whether collbench models how ``backend``'s native collective chooses (NCCL's tuning model)."""
    named = backend_named(backend)
    return named is not None and named.native_formula


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


def _error_near(fit: Fit, size_bytes: float) -> float | None:
    """The model's median error near a size at its own shape, where a measured point is near (none for
    a model of one point, a barrier's: it reproduces that point, which says nothing of its error)."""
    if fit.points == 1:
        return None
    if not fit.min_bytes / 2 <= size_bytes <= 2 * max(fit.max_bytes, 1):
        return None
    segment = fit.segment_at(size_bytes)
    value = segment.median_abs_pct_error if segment is not None else fit.median_abs_pct_error
    return value if math.isfinite(value) else None


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


def price_fits(
    fits: Sequence[Fit],
    world_size: int,
    nodes: int,
    *,
    ops: Sequence[str] | None = None,
    shapes: Shapes | None = None,
    nccl_arch: Arch | None = None,
    nccl_nvlink: bool = True,
    nccl_facts: NodeFacts | None = None,
) -> tuple[list[Priced], list[str], list[str]]:
    """Every usable (op, algo, backend) ready to price at ``world_size`` ranks on ``nodes`` nodes.

    ``nccl_arch``: the GPU generation for NCCL's model; None reads it from each fit's device
    (``arch_of``). ``nccl_facts``: the nodes' NICs, CollNet plugin and NVLS setting, where declared
    (NCCL's model's channels, NVLS, NVLS-tree and CollNet; the NICs' floor across nodes; the links'
    floor within one node). Returns (priced, refused: ``op algo: why`` each, notes: what the prices
    assume).
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
    usable_of: dict[tuple[str, str, str], list[Fit]] = {}
    for (op, algo, backend), members in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
        usable = usable_of[(op, algo, backend)] = [f for f in members if not f.distrust()]
        if not usable:
            worst = max(members, key=lambda f: f.world_size)
            refused.append(f"{op} {algo}: {worst.distrust()}")
            continue
        fit = pick_for(usable, world_size, nodes, shapes)
        fit_label = label(fit, shapes)
        at_shape = fit.world_size == world_size and shapes.assumed_nodes(fit) == nodes
        known = native_structure(backend, op) if algo == "native" else None
        gpu = gpu_links(fit.device) if fit.device else None
        # RCCL's choice is not NCCL's (its own tuning tables): not even at the measured shape is its
        # native NCCL's model; there it is the fit itself, elsewhere refused below.
        modelled = native_modelled(backend) and (gpu is None or gpu.vendor == "NVIDIA")
        if algo != "native" or (at_shape and (not modelled or known is not None)):
            entry: Priced | None = _by_structure(fit, world_size, refused)
            if entry is not None:
                priced.append(entry)
                if algo != "native":
                    linked.setdefault((op, backend, fit.world_size, shapes.nodes_of(fit)), []).append(algo)
            continue
        if known is not None:
            disagreement = formula_disagreement(backend, op)
            if disagreement:
                refused.append(f"{op} native: {disagreement}; not predicted at another shape")
                continue
            entry = _by_structure(fit, world_size, refused, known.what)
            if entry is not None:
                priced.append(entry)
                linked.setdefault((op, backend, fit.world_size, shapes.nodes_of(fit)), []).append(algo)
            continue
        if gpu is not None and gpu.vendor != "NVIDIA":
            refused.append(
                f"{op} native: measured on {gpu.vendor} {gpu.name} GPUs (RCCL), whose choice NCCL's cost model "
                f"({NCCL_SOURCE}) does not describe; not predicted at another shape"
            )
            continue
        if not modelled and backend_named(backend) is None and measured_on_gpus(backend):
            # A GPU library read from its tests' logs (rccl-tests), whose GPU the rows may not name.
            refused.append(
                f"{op} native: measured with {backend} (its tests' log), whose choice NCCL's cost model "
                f"({NCCL_SOURCE}) does not describe; not predicted at another shape"
            )
            continue
        if not modelled:
            refused.append(
                f"{op} native: {backend} picks its own algorithm, unknown to its fit (x{fit.world_size}); "
                "not predicted at another shape"
            )
            continue
        arch = nccl_arch if nccl_arch is not None else arch_of(gpu, fit.device)
        if nccl_arch is None and arch_assumed(gpu, fit.device):
            # The basis names the generation either way; without this it read as read from the fit
            # (an A100 log without device names was priced with Hopper's tables unsaid).
            notes.append(
                f"{fit_label}: the fit does not name its GPU; NCCL's model taken for {arch} (--gpu names the "
                "GPU, its links and generation; --nccl-arch the generation alone)"
            )
        if not ll128_sm(fit.device):
            sm = compute_capability(fit.device)
            notes.append(
                f"{fit_label}: LL128 off, as NCCL sets it below sm {LL128_MIN_SM / 10:.1f} ({NCCL_SOURCE} line "
                f"534): {fit.device} is sm {sm / 10:.1f}"
            )
        if shapes.nodes_of(fit) is None and not at_shape:
            notes.append(
                f"{fit_label}: the fit does not say how many nodes it was measured on; taken as "
                f"{shapes.assumed_nodes(fit)} ({RANKS_PER_NODE_GUESS} ranks a node; give --measured-nodes)"
            )
        if not op_has_payload(op):
            priced.append(nccl_barrier(fit, world_size, nodes, shapes, arch, nccl_nvlink))
            continue
        try:
            entry, more = native_nccl(
                fit, usable, world_size, nodes, shapes, arch, at_shape, nccl_nvlink, nccl_facts or NO_FACTS
            )
        except NotApplicableError as exc:
            refused.append(f"{op} native: {exc}")
            continue
        priced.append(entry)
        notes.extend(more)
    if len(fits) > 1:

        def alone(fit: Fit, ranks: int, fewer: int) -> list[Priced]:
            return price_fits([fit], ranks, fewer, ops=[fit.op], shapes=shapes, nccl_arch=nccl_arch,
                              nccl_nvlink=nccl_nvlink, nccl_facts=nccl_facts)[0]  # fmt: skip

        priced = [
            not_below_fewer_nodes(e, usable_of[(e.fit.op, e.fit.algo, e.fit.backend)], world_size, nodes, shapes, alone)
            for e in priced
        ]
    floored = [_floored(e, world_size, nodes, nccl_facts) for e in priced]
    return floored, refused, _links_notes(linked, nodes) + notes


def _floored(entry: Priced, world_size: int, nodes: int, facts: NodeFacts | None = None) -> Priced:
    """``entry`` never below what each GPU must send over its links, or each node over its NICs
    (``link_floor.py``), where known; a time raised to it says so in its basis."""
    floor = link_floor(entry.fit.op, world_size, nodes, entry.fit.device, facts)
    if floor is None:
        return entry
    time_us, basis = entry.time_us, entry.basis

    def floored_us(size: float) -> float:
        return max(time_us(size), floor.time_us(size))

    def floored_basis(size: float) -> str:
        text = basis(size)
        if time_us(size) < floor.time_us(size):
            text += f"; raised from {time_text(time_us(size))} to the links' floor: {floor.text()}"
        return text

    fastest = entry.fastest_us
    # The floor bounds whatever runs over these links: the family NCCL passes over too.
    floored_fastest = None if fastest is None else (lambda size: max(fastest(size), floor.time_us(size)))
    return dataclasses.replace(entry, time_us=floored_us, basis=floored_basis, fastest_us=floored_fastest)


def _sizes_of(op: str, sizes: Sequence[int]) -> list[int]:
    """The sizes ``op`` is predicted at: those asked, or for barrier (no payload) its one call, 0 bytes."""
    return list(sizes) if op_has_payload(op) else [0]


def _by_structure(fit: Fit, world_size: int, refused: list[str], native: str = "") -> Priced | None:
    """``priced.by_structure``, or None with the refusal noted where the algorithm has no formula for the op."""
    try:
        return by_structure(fit, world_size, native)
    except UserError as exc:
        refused.append(f"{fit.op} {fit.algo}: {exc}")
        return None


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
    if world_size % nodes:
        return None  # the simulator's links need every node full (a default count may leave one part-full)
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
        changes = fastest_changes([(e.fit.algo, e.time_us) for e in members], lo, hi)
        out.extend(Crossover(op, backend, world_size, size, below, above) for size, below, above in changes)
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
    nccl_arch: Arch | None = None,
    nccl_nvlink: bool = True,
    nccl_facts: NodeFacts | None = None,
) -> PredictReport:
    """Predicted time and busbw per (op, algorithm) at ``world_size`` ranks for every size (bytes).

    ``measured_nodes`` maps a fit's world size to the nodes it was measured on, where known;
    ``nccl_arch`` and ``nccl_nvlink`` describe the GPUs for NCCL's model of native (``nccl_arch`` None:
    from each fit's device, else hopper), ``nccl_facts`` the nodes' NICs, CollNet plugin and NVLS
    setting (``NodeFacts``).
    Raises ConfigError for a world size below 2, more nodes than ranks, no sizes, no fits left
    for the ops asked, or none that may be used.
    """
    check_ranks(world_size, 2, "predict")
    if nodes < 1 or nodes > world_size:
        raise ConfigError(f"{world_size} ranks cannot fill {nodes} nodes (at least one rank a node)")
    if not sizes:
        raise ConfigError("no sizes to predict")
    picked = pick_fits(fits, ops)
    if not picked:
        asked = ", ".join(ops) if ops else "any op"
        raise ConfigError(f"no fits for {asked}; the fits cover: {', '.join(sorted({f.op for f in fits}))}")
    shapes = Shapes(dict(measured_nodes or {}))
    entries, refused, notes = price_fits(
        fits,
        world_size,
        nodes,
        ops=ops,
        shapes=shapes,
        nccl_arch=nccl_arch,
        nccl_nvlink=nccl_nvlink,
        nccl_facts=nccl_facts,
    )
    if not entries:
        unusable = any(f.distrust() for f in fits)
        raise ConfigError(
            ("no fit explains its data well enough to extrapolate (" if unusable else "nothing to predict (")
            + refusals_briefly(refused)
            + ")"
            + (f"; {remeasure_advice(fits)}" if unusable else "")
        )
    preds: list[Prediction] = []
    for e in entries:
        f = e.fit
        factor = Op.parse(f.op).spec.busbw_factor(world_size)
        fit_label = label(f, shapes)
        # What measured it, where the fit says: a published log's numbers are someone else's machine.
        source = fitted_from(f)
        for size in _sizes_of(f.op, sizes):
            t = e.time_us(size)
            sim = _simulated(e, world_size, nodes, size, elem_bytes) if world_size <= simulate_max_ranks else None
            # Barrier moves nothing: no bandwidth to claim (its factor is 0, and 0 GB/s would read as slow).
            busbw = None if not op_has_payload(f.op) else gbps(size, t) * factor
            error = _error_near(f, size) if e.measured_shape else None
            basis = f"{source}; {e.basis(size)}" if source else e.basis(size)
            preds.append(
                Prediction(
                    f.op, f.algo, f.backend, world_size, size, t, busbw, sim, f.world_size,
                    latency_us=e.latency_us(size), fit=fit_label, scale=world_size / f.world_size,
                    error_pct=error, basis=basis, fit_source=f.source,
                )
            )  # fmt: skip
    sized = [e for e in entries if op_has_payload(e.fit.op)]
    crossovers = crossovers_of(sized, world_size, float(min(sizes)), float(max(sizes)))
    choice: list[dict[str, Any]] = []
    groups: dict[tuple[str, str], list[Priced]] = {}
    for e in entries:
        groups.setdefault((e.fit.op, e.fit.backend), []).append(e)
    for (op, backend), members in sorted(groups.items()):
        for size in _sizes_of(op, sizes):
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
    nccl_arch: Arch | None = None,
    nccl_facts: NodeFacts | None = None,
) -> tuple[list[PredictedRange], list[str], list[str]]:
    """The fastest predicted algorithm per size range of ``op`` at a shape, switching where predictions
    cross between the smallest and the largest size the fits measured (below and above, the winner at
    that end holds, as a measured rule set's first and last rules do); and (refused, notes) as
    :func:`price_fits` gives them (``nccl_facts`` as there: ``--no-nvls``). Each range is priced at
    ``at_bytes``, the geometric middle of its part inside the sizes measured. An empty list when no fit
    of ``op`` may be used."""
    entries, refused, notes = price_fits(
        fits, world_size, nodes, ops=[op], shapes=shapes, nccl_arch=nccl_arch, nccl_facts=nccl_facts
    )
    if not entries:
        return [], refused, notes
    # Crossings below the smallest size measured were placed from 1 byte (rules 'from 0 B to 1 B'),
    # and a range reaching 0 B was priced at 1 B: sizes no fit saw, latencies extrapolated past them.
    lo = float(max(1, min(e.fit.min_bytes for e in entries)))
    hi = float(max(e.fit.max_bytes for e in entries))
    starts = [0] + [c.size_bytes for c in crossovers_of(entries, world_size, lo, hi)]
    native = next((e for e in entries if e.fit.algo == "native"), None)
    out: list[PredictedRange] = []
    for i, start in enumerate(starts):
        end = starts[i + 1] - 1 if i + 1 < len(starts) else None
        first, last = max(float(start), lo), hi if end is None else min(float(end), hi)
        at = max(1, int(math.sqrt(first * max(first, last))))
        best = _fastest(entries, at)
        time_us = best.time_us(at)
        native_us = native.time_us(at) if native is not None else None
        if out and out[-1].algo == best.fit.algo:
            # The same winner on both sides of a crossing between two others: one range.
            start = out.pop().min_bytes
        out.append(PredictedRange(start, end, best.fit.algo, at, time_us, native_us))
    return out, refused, notes
