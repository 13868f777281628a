"""Predict times per algorithm at world sizes no one here has, from fitted models.

Each (op, algorithm, backend) uses the fit measured at the largest world size available; its closed
form (``costs.py``) is re-evaluated at the asked world size, which prices thousands of ranks in
microseconds. Up to ``simulate_max_ranks`` ranks, the real schedule (the registry's builder) is also
priced by the simulator on uniform links with the fitted alpha, beta and gamma (and, with several nodes,
the same parameters between nodes unless given), as a check of the closed form on the actual schedule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from collbench.errors import ConfigError, UserError
from collbench.models.crossover import Crossover, fastest, find_crossovers
from collbench.models.fitted import Fit
from collbench.models.simulator import UniformLinks, simulate
from collbench.schedules.ops import Op

DEFAULT_SIMULATE_MAX_RANKS = 64


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
    """The real schedule priced by the simulator (small world sizes only), else None."""
    fitted_world_size: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "algo": self.algo,
            "backend": self.backend,
            "world_size": self.world_size,
            "size_bytes": self.size_bytes,
            "time_us": self.time_us,
            "busbw_gbps": self.busbw_gbps,
            "simulated_us": self.simulated_us,
            "fitted_world_size": self.fitted_world_size,
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
    """Fits not extrapolated, one ``op algo: why`` each (``Fit.distrust``)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "world_size": self.world_size,
            "nodes": self.nodes,
            "predictions": [p.to_dict() for p in self.predictions],
            "crossovers": [c.to_dict() for c in self.crossovers],
            "choice": list(self.choice),
            "refused": list(self.refused),
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


def _simulated(fit: Fit, world_size: int, nodes: int, size_bytes: int, elem_bytes: int) -> float | None:
    from collbench.schedules.registry import algorithm_names, get_algorithm

    if fit.algo not in algorithm_names():
        return None
    spec = get_algorithm(fit.algo)
    op = Op.parse(fit.op)
    if spec.builder is None or not spec.supports(op):
        return None
    count = max(size_bytes // elem_bytes, 1)
    alpha, beta = fit.params_at(size_bytes)
    try:
        schedule = spec.build(op, world_size, count)
    except UserError:
        return None
    links = UniformLinks(alpha, beta, world_size, nodes)
    return simulate(schedule, links, elem_bytes=elem_bytes, gamma_us_per_byte=fit.gamma_us_per_byte or 0.0).time_us


def predict(
    fits: Sequence[Fit],
    world_size: int,
    sizes: Sequence[int],
    *,
    nodes: int = 1,
    ops: Sequence[str] | None = None,
    simulate_max_ranks: int = DEFAULT_SIMULATE_MAX_RANKS,
    elem_bytes: int = 4,
) -> PredictReport:
    """Predicted time and busbw per (op, algorithm) at ``world_size`` ranks for every size (bytes).

    Raises ConfigError for a world size below 2, nodes that do not divide it, no sizes, or no fits
    left for the ops asked.
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
    # A fit that does not explain its own data is not extrapolated: its numbers would be noise.
    refused = [f"{f.op} {f.algo}: {f.distrust()}" for f in picked if f.distrust()]
    chosen = [f for f in picked if not f.distrust()]
    if not chosen:
        raise ConfigError(
            "no fit explains its data well enough to extrapolate (" + "; ".join(refused) + "); measure again "
            "on a quieter machine or with fewer ranks than cores"
        )
    preds: list[Prediction] = []
    for f in chosen:
        factor = Op.parse(f.op).spec.busbw_factor(world_size)
        for size in sizes:
            t = f.predict_us(size, world_size)
            sim = _simulated(f, world_size, nodes, size, elem_bytes) if world_size <= simulate_max_ranks else None
            busbw = size / t / 1e3 * factor if t > 0 else 0.0
            preds.append(Prediction(f.op, f.algo, f.backend, world_size, size, t, busbw, sim, f.world_size))
    lo, hi = min(sizes), max(sizes)
    crossovers = find_crossovers(chosen, world_size=world_size, lo_bytes=lo, hi_bytes=hi)
    choice: list[dict[str, Any]] = []
    groups: dict[tuple[str, str], list[Fit]] = {}
    for f in chosen:
        groups.setdefault((f.op, f.backend), []).append(f)
    for (op, backend), members in sorted(groups.items()):
        for size in sizes:
            best = fastest(members, size, world_size)
            choice.append(
                {
                    "op": op,
                    "backend": backend,
                    "size_bytes": size,
                    "algo": best.algo,
                    "time_us": best.predict_us(size, world_size),
                }
            )
    return PredictReport(world_size, nodes, preds, crossovers, choice, refused)
