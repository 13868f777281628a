"""Which pairs ``discover --probe`` measures: the rule, without torch (``discover --help`` states it).

Every pair of n ranks is n(n-1)/2 pairs in n-1 rounds, and a file listing them grows as n^2. Up to
:data:`ALL_PAIRS_MAX_RANKS` that is what ``auto`` measures; beyond it the probe goes by nodes: every
pair of ranks within each node, and between nodes one pair of ranks per pair of nodes in at most
:data:`NODE_ROUNDS` rounds (``collbench/runtime/probe.py``).
"""

from __future__ import annotations

from typing import Literal

ALL_PAIRS_MAX_RANKS = 64
"""Up to this many ranks ``pairs="auto"`` measures every pair of ranks (63 rounds, about 4 min at the
defaults); beyond it, by nodes."""
NODE_ROUNDS = 16
"""Rounds of pairs of nodes a probe by nodes measures: every pair of nodes up to 17 nodes, 16 partners
for each node beyond."""
Pairs = Literal["auto", "all", "nodes"]
PAIRS: tuple[Pairs, ...] = ("auto", "all", "nodes")


def by_nodes(pairs: Pairs, world_size: int) -> bool:
    """Whether the probe measures by nodes rather than every pair of ranks."""
    return pairs == "nodes" or (pairs == "auto" and world_size > ALL_PAIRS_MAX_RANKS)
