"""What every builder shares: transfers collected round by round, and the layout's rings and trees.

Builders think in global rounds (all transfers of round t happen together); :class:`RoundBuilder` turns
that into per-rank steps (a rank's step for round t holds its sends and receives of that round; a rank
idle in a round has no step for it). Because every rank's steps keep the global round order, the
k-th send from a to b and the k-th receive on b from a always belong to the same round, and a round's
steps can all complete once every earlier round has: the schedule cannot deadlock.
"""

from __future__ import annotations

from collbench.errors import ConfigError
from collbench.layouts.model import Layout
from collbench.schedules.ir import Recv, Schedule, Send, Step
from collbench.schedules.ops import Op, chunk_bounds


class RoundBuilder:
    """Collects transfers by round and builds the :class:`Schedule`."""

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        # round -> rank -> (sends, recvs, labels); private and per-builder, never shared.
        self._rounds: list[dict[int, tuple[list[Send], list[Recv], list[str]]]] = []

    def _slot(self, rnd: int, rank: int) -> tuple[list[Send], list[Recv], list[str]]:
        while len(self._rounds) <= rnd:
            self._rounds.append({})
        slots = self._rounds[rnd]
        if rank not in slots:
            slots[rank] = ([], [], [])
        return slots[rank]

    def transfer(
        self,
        rnd: int,
        src: int,
        dst: int,
        start: int,
        stop: int,
        *,
        reduce: bool,
        label: str,
        dst_start: int | None = None,
    ) -> None:
        """In round ``rnd``, ``src`` sends ``[start, stop)`` to ``dst``, which reduces or copies it in.

        Empty ranges are dropped (both ends), so counts below the world size just leave ranks idle.
        ``src == dst`` is a local copy (ir.py), in the rank's step for that round.
        """
        if stop <= start:
            return
        at = start if dst_start is None else dst_start
        sends, _, src_labels = self._slot(rnd, src)
        sends.append(Send(dst, start, stop))
        if label not in src_labels:
            src_labels.append(label)
        _, recvs, dst_labels = self._slot(rnd, dst)
        recvs.append(Recv(src, at, at + stop - start, reduce))
        if label not in dst_labels:
            dst_labels.append(label)

    def build(
        self,
        op: Op,
        algo: str,
        count: int,
        *,
        root: int = 0,
        layout: str = "rank-order",
        params: tuple[tuple[str, int], ...] = (),
    ) -> Schedule:
        steps: list[list[Step]] = [[] for _ in range(self.world_size)]
        for slots in self._rounds:
            for rank, (sends, recvs, labels) in slots.items():
                steps[rank].append(Step(tuple(sends), tuple(recvs), ", ".join(labels)))
        return Schedule(
            op=op,
            algo=algo,
            world_size=self.world_size,
            count=count,
            steps=tuple(tuple(s) for s in steps),
            root=root,
            layout=layout,
            params=params,
        )


def check_count_and_segments(count: int, segments: int) -> None:
    """Raise ConfigError for a negative count or fewer than one segment."""
    if count < 0:
        raise ConfigError(f"element count must be >= 0, got {count}")
    if segments < 1:
        raise ConfigError(f"segments must be >= 1, got {segments}")


def split(start: int, stop: int, parts: int) -> list[tuple[int, int]]:
    """``[start, stop)`` cut into ``parts`` contiguous pieces (chunk_bounds, shifted)."""
    return [(start + a, start + b) for a, b in chunk_bounds(stop - start, parts)]


def segment_ranges(start: int, stop: int, segments: int) -> list[tuple[int, int]]:
    """``[start, stop)`` cut into pipeline segments: never more segments than elements, at least one."""
    return split(start, stop, max(1, min(segments, stop - start)))


def layout_name(layout: Layout | None) -> str:
    return "rank-order" if layout is None else layout.name


def layout_rings(layout: Layout | None, world_size: int) -> list[tuple[int, ...]]:
    """The layout's rings (one per channel), or rank order. Raises ConfigError for a size mismatch."""
    if layout is None or not layout.rings:
        return [tuple(range(world_size))]
    for ring in layout.rings:
        if len(ring) != world_size:
            raise ConfigError(
                f"layout {layout.name!r} has a ring of {len(ring)} ranks but the schedule has {world_size}; "
                "plan the layout for this world size"
            )
    return list(layout.rings)


def layout_trees(layout: Layout | None, world_size: int) -> list[tuple[int, ...]]:
    """The layout's trees (maybe none). Raises ConfigError for a size mismatch."""
    if layout is None:
        return []
    for parent in layout.trees:
        if len(parent) != world_size:
            raise ConfigError(
                f"layout {layout.name!r} has a tree of {len(parent)} ranks but the schedule has {world_size}; "
                "plan the layout for this world size"
            )
    return list(layout.trees)
