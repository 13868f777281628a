"""NCCL's native at another shape: NCCL's own model with this machine's numbers, where NCCL has one.

For the five collectives NCCL picks an algorithm and protocol for (``NCCL_TUNED_OPS``), its native is
priced by NCCL's own cost model (``nccl_cost.py``, ``src/graph/tuning.cc``), with its latency scale and
bus bandwidth fitted to the measured curve. The others (all-to-all, scatter, gather, send/recv) NCCL
runs as grouped point-to-point, which tuning.cc does not price: ``priced.by_structure`` prices those
by native's formula where it has their structure (``native_structure.py``) and says so. Barrier
through ``torch.distributed`` is an all-reduce of one byte: :func:`nccl_barrier` prices it with
NCCL's model of that all-reduce, its latencies scaled to the measured time.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

from collbench.models.fitted import Fit
from collbench.models.nccl_cost import NCCL_SOURCE, Arch, NcclMachine, calibrate, nccl_choice
from collbench.models.priced import Priced, Shapes, label, node_class
from collbench.models.scaled import ScaledFit
from collbench.schedules.ops import Op

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


BARRIER_BYTES = 1.0
"""The all-reduce ``torch.distributed``'s NCCL barrier runs: one element of one byte
(``ProcessGroupNCCL::barrier``: "All reduce to achieve the barrier", an ``at::kByte`` tensor of 1)."""


def nccl_barrier(fit: Fit, world_size: int, nodes: int, shapes: Shapes, arch: Arch, nvlink: bool = True) -> Priced:
    """NCCL's native barrier at a shape: through ``torch.distributed`` it is an all-reduce of one byte,
    priced by NCCL's own model (``nccl_cost.py``) with its latencies scaled so that it takes the
    measured time at the measured shape. At one byte the time is latency (the bandwidth part is under
    a nanosecond at any bus bandwidth NCCL's model allows a GPU), so the scale is all the fit tells.
    """
    measured_nodes = shapes.assumed_nodes(fit)
    machine = NcclMachine(bus_bw_gbps=1.0, arch=arch, nvlink=nvlink)
    there = nccl_choice(machine, Op.ALL_REDUCE, world_size, nodes, BARRIER_BYTES, smooth=True)
    here = nccl_choice(machine, Op.ALL_REDUCE, fit.world_size, measured_nodes, BARRIER_BYTES, smooth=True)
    measured = fit.predict_us(0.0)
    scale = measured / here.latency_us if here.latency_us > 0 else 0.0
    time_us = there.latency_us * scale
    at_shape = fit.world_size == world_size and measured_nodes == nodes
    if at_shape:
        basis = "the fit itself, at the shape it was measured at; one measured point, with no error figure"
    else:
        basis = (
            "torch's NCCL barrier is an all-reduce of one byte (ProcessGroupNCCL::barrier): NCCL's model "
            f"({NCCL_SOURCE}) picks {there.algo}/{there.proto} at x{world_size} on {nodes} node"
            f"{'s' if nodes != 1 else ''}, its latencies scaled x{scale:.3g} to the {measured:.4g} us measured "
            f"at x{fit.world_size}"
        )
    return Priced(fit, lambda s: time_us, lambda s: time_us, lambda s: basis, at_shape, None)
