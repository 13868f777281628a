"""NCCL's cost model calibrated to a measured curve: its latency scale and bandwidths fitted.

NCCL's structure (``nccl_cost.py``: which algorithm and protocol at which size, how latency and
bandwidth grow with ranks and nodes) is kept; only the numbers a machine sets are fitted: the latency
scale, the ring's bus bandwidth and NVLS's scale, each bandwidth from the sizes NCCL ran its
algorithms at (:func:`calibrate`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from collbench.errors import ConfigError
from collbench.models.nccl_cost import algorithm_bw_gbps, nccl_choice, peak_bus_bw_gbps, size_terms
from collbench.models.nccl_machine import NcclMachine
from collbench.models.nccl_switch import NVLS_ALGORITHMS
from collbench.schedules.ops import Op

LATENCY_SHARE_TO_FIT = 0.2
"""The least share of the time at the smallest measured size that latency must take for the points to
tell a latency scale; below it NCCL's own latencies are kept."""


def calibrate(
    machine: NcclMachine, op: Op | str, ranks: int, nodes: int, sizes: list[float], times_us: list[float]
) -> NcclMachine:
    """``machine`` with the latency scale and bandwidths that make NCCL's model (smoothed) follow the
    measured times at their own shape best, in squared log error, each bandwidth from the times of the
    algorithms it prices.

    NCCL's structure (which algorithm and protocol at which size, how latency and bandwidth grow with
    ranks and nodes) is kept; only the numbers a machine sets are fitted, by a coarse grid then a
    finer one around its best. Where the sizes cannot tell the latency (NCCL's latency is under
    ``LATENCY_SHARE_TO_FIT`` of its time even at the smallest size), the scale stays 1: NCCL's own.

    Where NCCL's search finds an NVLS graph at this shape, a measured size calibrates the family NCCL
    ran there, as NCCL chose it by its own figures (:meth:`NcclMachine.own_figures`): ring and tree
    (and CollNet, priced from the ring's graph) share one graph's links, each GPU's NVLinks and the
    NICs, so one bus bandwidth serves them; NVLS and NVLS-tree are bound by the NVSwitch's reduction
    (``nvlsEfficiency``), which a ring's time says nothing of, so they get a scale of their own
    (``nvls_scale``). A family whose bandwidth no measured size tells (NCCL did not run it, or ran it
    only where its time is latency: ``BANDWIDTH_SHARE_TO_FIT``) keeps NCCL's own figure.
    """
    # First: an op NCCL does not tune is refused before anything else is read.
    times = SizeCurve(machine, op, ranks, nodes, sizes)
    if not sizes:
        raise ConfigError("no measured points to calibrate NCCL's model on")
    own = machine.own_figures()
    if own is None or machine.nvls is None:
        scale, bus, told = _fit_ring(times, machine, op, ranks, nodes, sizes, times_us)
        return _replace(machine, scale, bus, told)
    ran_nvls = [nccl_choice(own, op, ranks, nodes, s, smooth=True).algo in NVLS_ALGORITHMS for s in sizes]
    ring_at = [i for i, on in enumerate(ran_nvls) if not on]
    nvls_at = [i for i, on in enumerate(ran_nvls) if on]

    def pick(idx: list[int]) -> tuple[list[float], list[float]]:
        return [sizes[i] for i in idx], [times_us[i] for i in idx]

    def with_bus(m: NcclMachine, bus: float) -> NcclMachine:
        return dataclasses.replace(m, bus_bw_gbps=bus)

    def with_nvls(m: NcclMachine, scale: float) -> NcclMachine:
        return dataclasses.replace(m, nvls_scale=scale)

    fitted = dataclasses.replace(own, ring_measured=False, nvls_measured=False)
    ring_told = nvls_told = False
    if ring_at:
        ring_sizes, ring_times = pick(ring_at)
        curve = SizeCurve(machine, op, ranks, nodes, ring_sizes, nvls=False)
        ring_told = _tells_bandwidth(curve, own, with_bus, own.bus_bw_gbps)
        fixed = None if ring_told else own.bus_bw_gbps
        scale, bus, told = _fit_ring(curve, machine, op, ranks, nodes, ring_sizes, ring_times, fixed)
        fitted = dataclasses.replace(_replace(fitted, scale, bus, told), ring_measured=ring_told)
    if nvls_at:
        nvls_sizes, nvls_times = pick(nvls_at)
        curve = SizeCurve(machine, op, ranks, nodes, nvls_sizes, nvls=True)
        nvls_told = _tells_bandwidth(curve, own, with_nvls, 1.0)
        if nvls_told or not ring_at:
            fitted = _fit_nvls(curve, fitted, nvls_times, fit_latency=not ring_at, fit_bandwidth=nvls_told)
    # A family whose bandwidth no measured size tells (NCCL did not run it, or only where its time is
    # latency) keeps NCCL's own figure, and the basis says it is unmeasured. The measured times would
    # bound it only if NCCL chose right: it ran the family its figures priced faster, and had that been
    # so in truth, the other took at least the measured time at every size NCCL ran the first. That
    # is an assumption a log can refute: the GCP H100 2-node log, told its NICs, ran NVLS-tree at
    # 16 MiB in 952 us where the ring took 253 us at 2 MiB; a bound from it would put the ring at 57
    # GB/s against NCCL's 360. So no bound is taken, and NCCL's figure stands as NCCL's, not as a
    # finding.
    return fitted


BANDWIDTH_SHARE_TO_FIT = 0.5
"""The least share of the time at the largest size a family ran that its bandwidth must take, as NCCL
prices it, for the points to tell that bandwidth; below it (latency, or LL's and LL128's per-channel
caps, which no bus bandwidth moves) NCCL's own figure is kept. A GCP H100 2-node fit told with its
NICs ran the ring up to 2 MiB only (NVLS-tree above), all LL: the ring's bus came out 40 GB/s."""


def _tells_bandwidth(
    times: SizeCurve, own: NcclMachine, with_bw: Callable[[NcclMachine, float], NcclMachine], bw: float
) -> bool:
    """Whether ``times``' sizes tell a bandwidth: doubling NCCL's own figure ``bw`` shortens the time at
    the largest of them by at least half ``BANDWIDTH_SHARE_TO_FIT`` (the bandwidth's share, halved)."""
    at_figure = float(times.at(with_bw(own, bw))[-1])
    doubled = float(times.at(with_bw(own, 2 * bw))[-1])
    return (at_figure - doubled) >= BANDWIDTH_SHARE_TO_FIT / 2 * at_figure


def _fit_ring(
    times: SizeCurve,
    machine: NcclMachine,
    op: Op | str,
    ranks: int,
    nodes: int,
    sizes: list[float],
    times_us: list[float],
    bus: float | None = None,
) -> tuple[float, float, bool]:
    """The (latency scale, bus bandwidth) that follow ``times_us`` best on ``times``' candidates, and
    whether the sizes told the latency scale (else it is NCCL's own, 1); with ``bus`` given, only the
    latency scale is fitted and the bus stays that."""
    logs = np.log(np.asarray(times_us, dtype=np.float64))
    peak = peak_bus_bw_gbps(op, ranks, sizes, times_us) if bus is None else bus
    smallest = nccl_choice(_replace(machine, 1.0, peak), op, ranks, nodes, min(sizes), smooth=True, nvls=times.nvls)
    # Where even the smallest measured size is mostly bandwidth, the points cannot tell the latency:
    # NCCL's own latencies stand, and only the bandwidth is fitted.
    latency_measured = smallest.latency_us >= LATENCY_SHARE_TO_FIT * smallest.time_us

    def loss(scale: float, bw: float) -> float:
        model = np.log(times.at(_replace(machine, scale, bw)))
        return float(np.sum((model - logs) ** 2))

    return (*_grid(loss, 1.0, peak, latency_measured, bus is None), latency_measured)


def _fit_nvls(
    times: SizeCurve, base: NcclMachine, times_us: list[float], fit_latency: bool, fit_bandwidth: bool
) -> NcclMachine:
    """``base`` with the NVLS scale (where ``fit_bandwidth``) and the latency scale (where
    ``fit_latency``) that follow ``times_us`` best on ``times``' NVLS candidates; the scale's centre
    the ratio at the largest size."""
    logs = np.log(np.asarray(times_us, dtype=np.float64))
    at_one = times.at(dataclasses.replace(base, nvls_scale=1.0, latency_scale=1.0))
    centre = float(at_one[-1] / times_us[-1]) if fit_bandwidth else base.nvls_scale
    latency_measured = fit_latency and float(times.latency_share(base)[0]) >= LATENCY_SHARE_TO_FIT

    def machine(scale: float, nvls: float) -> NcclMachine:
        return dataclasses.replace(base, latency_scale=scale if fit_latency else base.latency_scale, nvls_scale=nvls)

    def loss(scale: float, nvls: float) -> float:
        return float(np.sum((np.log(times.at(machine(scale, nvls))) - logs) ** 2))

    scale0 = 1.0 if fit_latency else base.latency_scale
    scale, nvls = _grid(loss, scale0, centre, latency_measured, fit_bandwidth)
    # Where the latency is fitted here, whether the sizes told it; else the ring's fit said it already.
    told = latency_measured if fit_latency else base.latency_measured
    return dataclasses.replace(
        machine(scale, nvls), nvls_measured=fit_bandwidth or base.nvls_measured, latency_measured=told
    )


def _grid(
    loss: Callable[[float, float], float],
    scale0: float,
    bw0: float,
    latency_measured: bool,
    bandwidth_measured: bool = True,
) -> tuple[float, float]:
    """The (latency scale, bandwidth) of least ``loss``: a coarse grid around (``scale0``, ``bw0``), then
    a finer one around its best; each stays at its start where its flag says the points cannot tell it."""
    best = (loss(scale0, bw0), scale0, bw0)
    for span, centre_scale, centre_bw in ((4.0, scale0, bw0), (0.5, None, None)):
        cs = best[1] if centre_scale is None else centre_scale
        cb = best[2] if centre_bw is None else centre_bw
        for i in range(-8, 9) if latency_measured else (0,):
            scale = cs * 2.0 ** (span * i / 8)
            for j in range(-8, 9) if bandwidth_measured else (0,):
                bw = cb * 2.0 ** (span / 4 * j / 8)
                value = loss(scale, bw)
                if value < best[0]:
                    best = (value, scale, bw)
    return best[1], best[2]


class SizeCurve:
    """``nccl_time_us(..., smooth=True)`` at fixed sizes and shape for many (latency scale, bus
    bandwidth) pairs, as the calibration's grid asks: what depends on the size alone (the tree's
    correction, the ring's plateau factor, each candidate's unscaled latency) is worked out once, and
    each pair costs one bandwidth per candidate and a few array operations, in the same order of
    operations as ``nccl_choice`` (so the same times, to the last bit)."""

    __slots__ = ("_candidates", "_nodes", "_op", "_ranks", "_sizes", "nvls")

    def __init__(
        self, machine: NcclMachine, op: Op | str, ranks: int, nodes: int, sizes: list[float], nvls: bool | None = None
    ) -> None:
        self._op, self._ranks, self._nodes, self.nvls = op, ranks, nodes, nvls
        self._sizes = np.asarray(sizes, dtype=np.float64)
        self._candidates = size_terms(machine, op, ranks, nodes, sizes, nvls)

    def __bool__(self) -> bool:
        """Whether any candidate is priced (none of a family NCCL does not enable at the shape)."""
        return bool(self._candidates)

    def latency_share(self, machine: NcclMachine) -> np.ndarray:
        """The cheapest candidate's latency over its time at each size, on ``machine``."""
        best = np.full(len(self._sizes), np.inf)
        share = np.zeros(len(self._sizes))
        for algo, proto, latency, correction in self._candidates:
            bw = algorithm_bw_gbps(machine, self._op, algo, proto, self._ranks, self._nodes) * correction
            lat = latency * machine.latency_scale
            time = lat + self._sizes / (1e3 * bw)
            share = np.where(time < best, lat / time, share)
            best = np.minimum(best, time)
        return share

    def at(self, machine: NcclMachine) -> np.ndarray:
        """The cheapest candidate's time (us) at each size on ``machine`` (only its latency scale and
        bandwidths may differ from the machine the curve was made for)."""
        best = np.full(len(self._sizes), np.inf)
        for algo, proto, latency, correction in self._candidates:
            bw = algorithm_bw_gbps(machine, self._op, algo, proto, self._ranks, self._nodes) * correction
            best = np.minimum(best, latency * machine.latency_scale + self._sizes / (1e3 * bw))
        return best


def _replace(
    machine: NcclMachine, latency_scale: float, bus_bw_gbps: float, latency_measured: bool = True
) -> NcclMachine:
    return dataclasses.replace(
        machine, latency_scale=latency_scale, bus_bw_gbps=bus_bw_gbps, latency_measured=latency_measured
    )
