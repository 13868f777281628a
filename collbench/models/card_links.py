"""Whether NCCL sees NVLink between the GPUs of a node of PCIe cards, as it decides LL128 and latencies.

NCCL v2.30.7 ``src/graph/tuning.cc`` enables LL128 only where the graph's path within a node is NVLink,
through at most one GPU (lines 518-536: ``pEnable &= (graphs[a]->typeIntra <= PATH_NVB)``), and prices
a node's hops with NVLink's latencies only there (line 285: ``typeIntra == LINK_NVL``, else PCI's).
A PCIe card's NVLink, where it has any, is a bridge joining it to one other card
(``topology/bandwidth.nvlink_bridge``): three or more cards a node reach each other over PCIe, one
card a node has no path within it (``search.cc``'s ``minTypeIntra = PATH_LOC`` for one GPU), and two
are NVLink only where a bridge joins them. Whether one does, collbench is told by the card's name (most
cards take no bridge) or by the fit's own data (two cards on one node whose ring carried no more than
PCIe x16 carries crossed no bridge); where neither tells, a bridge is taken and the note says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.topology.bandwidth import nvlink_bridge, pcie_card

LL128_RULE = "LL128 needs NVLink between every GPU of a node"


@dataclass(frozen=True, slots=True)
class CardLinks:
    """How the GPUs of a node of PCIe cards are joined, as far as collbench can tell."""

    bridged: bool
    """Two GPUs of a node are joined by an NVLink bridge."""
    why: str
    """What tells it, in a few words (predict's note)."""
    assumed: bool
    """Nothing named or measured tells it: taken."""

    def nvlink(self, gpus_a_node: int) -> bool:
        """NVLink between every GPU of a node of ``gpus_a_node`` (NCCL's ``typeIntra <= PATH_NVB``)."""
        return gpus_a_node <= 1 or (gpus_a_node == 2 and self.bridged)


def card_links(device: str, pair_bus_gbps: float | None) -> CardLinks | None:
    """The links of a node of ``device`` cards; None where ``device`` is not a PCIe card (its node's
    links are then the caller's). ``pair_bus_gbps``: the bus bandwidth fitted to a run of two of them
    on one node, None where no such run was measured."""
    if not pcie_card(device):
        return None
    bridge = nvlink_bridge(device)
    if bridge is None:
        return CardLinks(False, f"{device} takes no NVLink bridge, so its GPUs reach each other over PCIe", False)
    if pair_bus_gbps is None:
        return CardLinks(
            True,
            f"{device} taken as joined in pairs by its NVLink bridge ({bridge.bridge_gbps:g} GB/s a direction), "
            "which nothing measured tells",
            True,
        )
    x16 = f"PCIe {bridge.pcie_generation} x16's {bridge.pcie_x16_gbps:.3g} GB/s"
    measured = f"its fit of 2 GPUs on one node carried {pair_bus_gbps:.3g} GB/s bus"
    if pair_bus_gbps <= bridge.pcie_x16_gbps:
        return CardLinks(
            False,
            f"{measured}, within {x16} and below its NVLink bridge's {bridge.bridge_gbps:g}: no bridge joins them",
            False,
        )
    return CardLinks(True, f"{measured}, above {x16}: an NVLink bridge joins them", False)


def card_notes(links: CardLinks, device: str, gpus_a_node: int, nodes: int, source: str) -> list[str]:
    """What predict's note says of a node of ``gpus_a_node`` PCIe cards (``source``: NCCL's, cited)."""
    if gpus_a_node >= 3:
        return [
            f"LL128 off and PCI latencies at {gpus_a_node} ranks a node, as NCCL sets them ({source}: {LL128_RULE}): "
            f"{device} is a PCIe card, whose NVLink bridge joins two GPUs at most"
        ]
    if gpus_a_node == 2 and not links.bridged:
        return [
            f"LL128 off and PCI latencies at 2 ranks a node, as NCCL sets them ({source}: {LL128_RULE}): {links.why}"
        ]
    if gpus_a_node == 2 and links.assumed:
        return [
            f"LL128 on and NVLink latencies at 2 ranks a node: {links.why}; without a bridge NCCL turns LL128 "
            f"off ({source}: {LL128_RULE})"
        ]
    if gpus_a_node == 1 and nodes > 1:
        # tuning.cc's other condition on LL128 is the path from each GPU to its NIC (typeInter up to
        # PATH_PXB, PATH_PXN from Hopper on), which nothing given here tells.
        return [
            f"LL128 kept at 1 rank a node ({source}: no link within a node), taking each GPU's NIC to sit "
            "behind its PCIe switches, as NCCL needs for LL128 across nodes"
        ]
    return []
