"""The least time a collective can take: what each GPU must send over its links, or each node over its
NICs, at their nominal bandwidth (issue 32, item 3).

A fit extrapolated to another shape can promise more than the hardware carries (a GB200 fit once
predicted 994 GB/s busbw for 2 ranks, where each byte crosses NVLink 5 at 900 GB/s a direction).
Every prediction on one node of a GPU whose links are known (``topology/bandwidth.py``'s
``gpu_links``, from the device name the rows carry) is held at or above this floor:

* all-reduce: without a reduction in the switch each GPU sends at least ``2 (n-1)/n`` of the buffer
  (the bandwidth-optimal bound, Patarasuk and Yuan 2009, which the ring meets); with NVLink SHARP
  (NCCL's NVLS, unless the runs set ``NCCL_NVLS_ENABLE=0``) the switch reduces, and each GPU sends the
  switch its whole buffer once, so the floor is ``min(2 (n-1)/n, 1)`` of it;
* reduce-scatter and all-gather: ``(n-1)/n`` of the buffer (the blocks the other ranks need or
  hold), or with NVLink SHARP ``1/n`` (its own block, once, to the switch, which multicasts it);
* the other ops: no floor here (none is claimed).

Across m nodes the NICs decide, where their count and speed are known (``predict --nics --nic-gbps``):
each node is one participant of the same bounds over m, its ranks' data combined inside it first, so
its NICs together carry at least ``2 (m-1)/m`` of the buffer for all-reduce (``min(2 (m-1)/m, 1)``
with a CollNet plugin, the network switch reducing) and ``(m-1)/m`` for reduce-scatter and
all-gather (what a node receives or sends of the other nodes' blocks); spread evenly, the busiest
NIC carries its share of that at its nominal speed. Where the NICs are not known no floor is claimed
across nodes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from collbench.errors import ConfigError
from collbench.models.fitted import Fit
from collbench.models.nccl_graph import NodeFacts
from collbench.schedules.ops import Op
from collbench.topology.bandwidth import gpu_links
from collbench.units import counted


@dataclass(frozen=True, slots=True)
class LinkFloor:
    """The floor for one (op, world size, nodes): a share of the buffer over links of a bandwidth."""

    share: float
    """Bytes the busiest GPU (one node) or node (several) must send, as a share of the buffer."""
    gbps: float
    """Its links' nominal bandwidth together, GB/s a direction."""
    links: str
    """Whose links, in words ("each NVIDIA H100's NVLinks", "each node's 8 NICs of 50 GB/s")."""
    reduced_in_switch: bool = False

    def time_us(self, size_bytes: float) -> float:
        # GB/s is 10^3 bytes per microsecond.
        return self.share * size_bytes / (self.gbps * 1e3)

    def text(self) -> str:
        switch = ", reduced in the switch" if self.reduced_in_switch else ""
        return f"{self.share:.3g} of the buffer from {self.links} at {self.gbps:g} GB/s a direction{switch}"


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


_COLLNET_REDUCES: dict[Op, bool] = {Op.ALL_REDUCE: True, Op.REDUCE_SCATTER: False, Op.ALL_GATHER: False}
"""Per op with a floor here, whether a CollNet switch's reduction lowers what a node's NICs carry: an
all-reduce's node sends its buffer once; a reduce-scatter's or all-gather's still sends or receives the
other nodes' blocks."""


def link_floor(op: str, world_size: int, nodes: int, device: str, facts: NodeFacts | None = None) -> LinkFloor | None:
    """The floor for ``op`` at ``world_size`` ranks on ``nodes`` nodes of GPU ``device``, or None where
    none is known (one node of a GPU without listed links; several nodes whose NICs are not given in
    ``facts``; an op without a floor here)."""
    share_of = _SHARES.get(Op.parse(op))
    if share_of is None or world_size < 2:
        return None
    if nodes > 1:
        if facts is None or not facts.nic_known() or facts.nic_gbps is None:
            return None
        # A CollNet switch reduces an all-reduce across nodes as NVLink SHARP does within one (a node
        # sends its buffer once); the nodes of a reduce-scatter or all-gather still receive, or send,
        # the other nodes' blocks.
        reduced = facts.collnet and _COLLNET_REDUCES[Op.parse(op)]
        share = share_of(nodes, reduced)
        nics = f"each node's {counted(facts.nics, 'NIC')} of {facts.nic_gbps:g} GB/s"
        return LinkFloor(share, facts.nics * facts.nic_gbps, nics, reduced)
    gpu = gpu_links(device) if device else None
    if gpu is None or gpu.nvlink_gbps is None:
        return None
    # With NCCL_NVLS_ENABLE=0 the switch does not reduce: each GPU's links carry the ring's share.
    reduced = gpu.nvswitch_reduction and (facts is None or facts.nvls)
    share = share_of(world_size, reduced)
    return LinkFloor(share, gpu.nvlink_gbps, f"each {gpu.name} over its NVLinks", reduced)


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
