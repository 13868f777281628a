"""The layout handed to schedule builders: ring orders and tree shapes over ranks 0..n-1."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Layout:
    """Ring orders (one per channel) and up to two trees given as parent arrays (root: -1).

    Empty ``rings``/``trees`` mean: the builder uses rank order and the standard trees.
    """

    rings: tuple[tuple[int, ...], ...] = ()
    trees: tuple[tuple[int, ...], ...] = ()
    name: str = "rank-order"
    ring_bandwidths_gbps: tuple[float, ...] = field(default=())

    def __post_init__(self) -> None:
        for ring in self.rings:
            assert sorted(ring) == list(range(len(ring))), f"a ring visits every rank once: {ring}"
        for parent in self.trees:
            roots = [r for r, p in enumerate(parent) if p == -1]
            assert len(roots) == 1, f"a tree has one root: {parent}"

    @property
    def world_size(self) -> int | None:
        if self.rings:
            return len(self.rings[0])
        if self.trees:
            return len(self.trees[0])
        return None
