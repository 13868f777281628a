"""The least time a collective can take on one node: what each GPU must send over its links, at their
nominal bandwidth (issue 32, item 3).

A fit extrapolated to another shape can promise more than the hardware carries (a GB200 fit once
predicted 994 GB/s busbw for 2 ranks, where each byte crosses NVLink 5 at 900 GB/s a direction).
Every prediction on one node of a GPU whose links are known (``topology/bandwidth.py``'s
``gpu_links``, from the device name the rows carry) is held at or above this floor:

* all-reduce: without a reduction in the switch each GPU sends at least ``2 (n-1)/n`` of the buffer
  (the bandwidth-optimal bound, Patarasuk and Yuan 2009, which the ring meets); with NVLink SHARP
  (NCCL's NVLS) the switch reduces, and each GPU sends the switch its whole buffer once, so the
  floor is ``min(2 (n-1)/n, 1)`` of it;
* reduce-scatter and all-gather: ``(n-1)/n`` of the buffer (the blocks the other ranks need or
  hold), or with NVLink SHARP ``1/n`` (its own block, once, to the switch, which multicasts it);
* the other ops: no floor here (none is claimed).

Across nodes the NIC speed decides, and a log does not say it: no floor is claimed there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from collbench.errors import ConfigError
from collbench.models.fitted import Fit
from collbench.schedules.ops import Op
from collbench.topology.bandwidth import GpuLinks, gpu_links


@dataclass(frozen=True, slots=True)
class LinkFloor:
    """The floor for one (op, world size) on one node of one GPU model."""

    gpu: GpuLinks
    share: float
    """Bytes each GPU must send, as a share of the buffer."""
    gbps: float
    """Its links' nominal bandwidth, GB/s a direction."""

    def time_us(self, size_bytes: float) -> float:
        # GB/s is 10^3 bytes per microsecond.
        return self.share * size_bytes / (self.gbps * 1e3)

    def text(self) -> str:
        sharp = ", reduced in the NVSwitch" if self.gpu.nvswitch_reduction else ""
        return (
            f"{self.share:.3g} of the buffer from each {self.gpu.name} over its NVLinks at "
            f"{self.gbps:g} GB/s a direction{sharp}"
        )


def _all_reduce_share(n: int, nvswitch_reduction: bool) -> float:
    share = 2 * (n - 1) / n
    return min(share, 1.0) if nvswitch_reduction else share


def _chunked_share(n: int, nvswitch_reduction: bool) -> float:
    return 1 / n if nvswitch_reduction else (n - 1) / n


_SHARES: dict[Op, Callable[[int, bool], float]] = {
    Op.ALL_REDUCE: _all_reduce_share,
    Op.REDUCE_SCATTER: _chunked_share,
    Op.ALL_GATHER: _chunked_share,
}
"""Per op with a floor here, the share of the buffer each GPU's links carry at n ranks (with the NVSwitch
reducing, NVLS, or not)."""


def link_floor(op: str, world_size: int, nodes: int, device: str) -> LinkFloor | None:
    """The floor for ``op`` at ``world_size`` ranks on ``nodes`` nodes of GPU ``device``, or None where
    none is known (several nodes, a GPU without listed links, an op without a floor here)."""
    gpu = gpu_links(device) if device else None
    if nodes != 1 or gpu is None or gpu.nvlink_gbps is None or world_size < 2:
        return None
    n = world_size
    share_of = _SHARES.get(Op.parse(op))
    if share_of is None:
        return None
    return LinkFloor(gpu, share_of(n, gpu.nvswitch_reduction), gpu.nvlink_gbps)


def with_gpu(fits: Sequence[Fit], name: str) -> list[Fit]:
    """The fits with GPU ``name`` (``predict --gpu``) where they name none that is listed.

    Raises ConfigError for a name that is not a listed GPU, or a fit that names another listed one
    (what was measured is not overwritten by a guess)."""
    given = gpu_links(name)
    if given is None:
        raise ConfigError(f"--gpu {name!r}: not a GPU whose links are known here (e.g. GB200, B200, H100, A100)")
    out = []
    for fit in fits:
        own = gpu_links(fit.device) if fit.device else None
        if own is None:
            fit = dataclasses.replace(fit, device=name)
        elif own.name != given.name:
            raise ConfigError(f"--gpu {name}: the fit {fit.op} {fit.algo} was measured on {fit.device}")
        out.append(fit)
    return out
