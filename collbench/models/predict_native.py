"""NCCL's native at another shape, for the collectives NCCL tunes: NCCL's own model with this machine's numbers.

For the five collectives NCCL picks an algorithm and protocol for (``NCCL_TUNED_OPS``), its native is
priced by NCCL's own cost model (``nccl_cost.py``, ``src/graph/tuning.cc``), with its latency scale and
bus bandwidth fitted to the measured curve. The others (all-to-all, scatter, gather, send/recv,
barrier) NCCL runs as grouped point-to-point, which tuning.cc does not price: ``priced.by_structure``
prices those by native's formula and says so.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

from collbench.models.fitted import Fit
from collbench.models.nccl_cost import NCCL_SOURCE, Arch, NcclMachine, calibrate, nccl_choice
from collbench.models.priced import Priced, Shapes, label, node_class
from collbench.models.scaled import ScaledFit

_CALIBRATION_POINTS = 40


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


def native_nccl(
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
    if node_class(nodes) == 3 and node_class(measured_nodes) < 3 and not at_shape:
        beyond = [f for f in others if f is not fit and node_class(shapes.assumed_nodes(f)) == 3]
        if beyond:
            inter_fit = max(beyond, key=lambda f: f.world_size)
        else:
            notes.append(
                f"{label(fit, shapes)}: NCCL uses its inter-node bandwidth beyond 2 nodes; none was measured, "
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
