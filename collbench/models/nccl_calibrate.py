"""NCCL's cost model calibrated to a measured curve: its latency scale and bus bandwidth fitted.

NCCL's structure (``nccl_cost.py``: which algorithm and protocol at which size, how latency and
bandwidth grow with ranks and nodes) is kept; only the two numbers a machine sets are fitted.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from collbench.errors import ConfigError
from collbench.models.nccl_cost import NcclMachine, algorithm_bw_gbps, nccl_choice, peak_bus_bw_gbps, size_terms
from collbench.schedules.ops import Op

LATENCY_SHARE_TO_FIT = 0.2
"""The least share of the time at the smallest measured size that latency must take for the points to
tell a latency scale; below it NCCL's own latencies are kept."""


def calibrate(
    machine: NcclMachine, op: Op | str, ranks: int, nodes: int, sizes: list[float], times_us: list[float]
) -> NcclMachine:
    """``machine`` with the latency scale and bus bandwidth that make NCCL's model (smoothed) follow the
    measured times at their own shape best, in squared log error.

    NCCL's structure (which algorithm and protocol at which size, how latency and bandwidth grow with
    ranks and nodes) is kept; only the two numbers a machine sets are fitted, by a coarse grid then a
    finer one around its best. Where the sizes cannot tell the latency (NCCL's latency is under
    ``LATENCY_SHARE_TO_FIT`` of its time even at the smallest size), the scale stays 1: NCCL's own.
    """
    # First: an op NCCL does not tune is refused before anything else is read.
    times = SizeCurve(machine, op, ranks, nodes, sizes)
    if not sizes:
        raise ConfigError("no measured points to calibrate NCCL's model on")
    logs = np.log(np.asarray(times_us, dtype=np.float64))
    peak = peak_bus_bw_gbps(op, ranks, sizes, times_us)
    smallest = nccl_choice(_replace(machine, 1.0, peak), op, ranks, nodes, min(sizes), smooth=True)
    # Where even the smallest measured size is mostly bandwidth, the points cannot tell the latency:
    # NCCL's own latencies stand, and only the bandwidth is fitted.
    latency_measured = smallest.latency_us >= LATENCY_SHARE_TO_FIT * smallest.time_us

    def loss(scale: float, bus: float) -> float:
        model = np.log(times.at(_replace(machine, scale, bus)))
        return float(np.sum((model - logs) ** 2))

    best = (loss(1.0, peak), 1.0, peak)
    for span, centre_scale, centre_bus in ((4.0, 1.0, peak), (0.5, None, None)):
        cs = best[1] if centre_scale is None else centre_scale
        cb = best[2] if centre_bus is None else centre_bus
        for i in range(-8, 9) if latency_measured else (0,):
            scale = cs * 2.0 ** (span * i / 8)
            for j in range(-8, 9):
                bus = cb * 2.0 ** (span / 4 * j / 8)
                value = loss(scale, bus)
                if value < best[0]:
                    best = (value, scale, bus)
    return _replace(machine, best[1], best[2])


class SizeCurve:
    """``nccl_time_us(..., smooth=True)`` at fixed sizes and shape for many (latency scale, bus
    bandwidth) pairs, as the calibration's grid asks: what depends on the size alone (the tree's
    correction, the ring's plateau factor, each candidate's unscaled latency) is worked out once, and
    each pair costs one bandwidth per candidate and a few array operations, in the same order of
    operations as ``nccl_choice`` (so the same times, to the last bit)."""

    __slots__ = ("_candidates", "_nodes", "_op", "_ranks", "_sizes")

    def __init__(self, machine: NcclMachine, op: Op | str, ranks: int, nodes: int, sizes: list[float]) -> None:
        self._op, self._ranks, self._nodes = op, ranks, nodes
        self._sizes = np.asarray(sizes, dtype=np.float64)
        self._candidates = size_terms(machine, op, ranks, nodes, sizes)

    def at(self, machine: NcclMachine) -> np.ndarray:
        """The cheapest candidate's time (us) at each size on ``machine`` (only its latency scale and
        bandwidths may differ from the machine the curve was made for)."""
        best = np.full(len(self._sizes), np.inf)
        for algo, proto, latency, correction in self._candidates:
            bw = algorithm_bw_gbps(machine, self._op, algo, proto, self._ranks, self._nodes) * correction
            best = np.minimum(best, latency * machine.latency_scale + self._sizes / (1e3 * bw))
        return best


def _replace(machine: NcclMachine, latency_scale: float, bus_bw_gbps: float) -> NcclMachine:
    return dataclasses.replace(machine, latency_scale=latency_scale, bus_bw_gbps=bus_bw_gbps)
