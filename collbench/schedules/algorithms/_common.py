"""What every builder shares: transfers collected round by round, and the layout's rings and trees.

Builders think in global rounds (all transfers of round t happen together); :class:`RoundBuilder` turns
that into per-rank steps (a rank's step for round t holds its sends and receives of that round; a rank
idle in a round has no step for it). Because every rank's steps keep the global round order, the
k-th send from a to b and the k-th receive on b from a always belong to the same round, and a round's
steps can all complete once every earlier round has: the schedule cannot deadlock.

**One rank's build.** A rank that runs a schedule needs only its own steps; at 16,384 ranks every
rank's steps are hundreds of millions of transfers. Every builder takes ``rank`` (None: the whole
build) and hands it to ``RoundBuilder(world_size, rank)``, which keeps only the transfers with an end
at that rank and builds a one-rank :class:`~collbench.schedules.ir.Schedule` (ir.py). The contract a
builder keeps, which ``tests/unit/test_schedules_per_rank.py`` checks for every registered algorithm:

* the one-rank build for r equals ``whole.for_rank(r)`` step for step: the same transfers, in the
  same order within a step, with the same labels;
* its time and memory are O(that rank's steps) plus O(world) for the tables every rank shares (a
  ring's order, a tree's parent array): never O(world x steps). So a builder enumerates only the
  transfers that touch the kept rank (:meth:`RoundBuilder.kept` for a rank's own transfers,
  :meth:`RoundBuilder.ring_positions` for ring hops and shifts, :meth:`RoundBuilder.spokes` for a
  root's star, :meth:`RoundBuilder.pairs` for every pair at once, the rank's parent and children for a
  tree, its partners for an exchange) and calls ``transfer`` for those, in
  the order the whole build calls them. Calling ``transfer`` for the others is correct (they are
  dropped) but costs the whole build's time.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from collbench.errors import ConfigError
from collbench.layouts.model import Layout
from collbench.schedules.ir import Recv, Schedule, Send, Step, only_steps
from collbench.schedules.ops import Op, chunk_bounds


class RoundBuilder:
    """Collects transfers by round and builds the :class:`Schedule`: every rank's, or one rank's."""

    def __init__(self, world_size: int, rank: int | None = None) -> None:
        assert rank is None or 0 <= rank < world_size, f"rank {rank} of a world of {world_size}"
        self.world_size = world_size
        self.rank = rank
        """The rank whose steps are kept; None: every rank's."""
        # round -> rank -> (sends, recvs, labels); private and per-builder, never shared.
        self._rounds: list[dict[int, tuple[list[Send], list[Recv], list[str]]]] = []
        # A one-rank build's: round -> (sends, recvs, labels), no dict per round (a ring's 32,766 rounds
        # at 16,384 ranks are as many containers for the garbage collector to walk).
        self._own: dict[int, tuple[list[Send], list[Recv], list[str]]] = {}

    def keeps(self, rank: int) -> bool:
        """Whether ``rank``'s steps are built."""
        return self.rank is None or rank == self.rank

    def kept(self) -> Sequence[int]:
        """The ranks whose steps are built: every rank, or the kept one."""
        return range(self.world_size) if self.rank is None else (self.rank,)

    def ring_positions(self, ring: Sequence[int], hop: int = 1) -> Sequence[int]:
        """The positions p of ``ring`` whose transfer ``ring[p] -> ring[(p + hop) % len(ring)]`` touches
        a kept rank, ascending: every position in a whole build; in a one-rank build the kept rank's
        and the one ``hop`` before it (whose transfer reaches it). ``range(n)`` as the ring gives the
        rank-order shifts ``r -> r + hop``. O(len(ring)) to find the rank in a ring, O(1) in a range."""
        n = len(ring)
        if self.rank is None:
            return range(n)
        pos = ring.index(self.rank)
        return sorted({pos, (pos - hop) % n})

    def spokes(self, hub: int, ranks: Sequence[int]) -> Sequence[int]:
        """The ranks of ``ranks`` (in order) whose transfer with ``hub``, either way, touches a kept rank:
        all of them when ``hub`` is kept (a root's star, a whole build), else the kept rank alone when it
        is among them. O(len(ranks)) to look for it."""
        if self.rank is None or self.rank == hub:
            return ranks
        return (self.rank,) if self.rank in ranks else ()

    def pairs(self, n: int) -> Iterator[tuple[int, int]]:
        """The ordered pairs (src, dst) of ranks 0..n-1, src then dst ascending (the order of the whole
        build's two nested loops), that touch a kept rank: all n^2 in a whole build; in a one-rank build
        the kept rank's 2n - 1 (its pair with itself once)."""
        if self.rank is None:
            for src in range(n):
                for dst in range(n):
                    yield src, dst
            return
        me = self.rank
        for src in range(n):
            if src == me:
                for dst in range(n):
                    yield me, dst
            else:
                yield src, me

    def _slot(self, rnd: int, rank: int) -> tuple[list[Send], list[Recv], list[str]]:
        if self.rank is not None:
            slot = self._own.get(rnd)
            if slot is None:
                slot = self._own[rnd] = ([], [], [])
            return slot
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
        ``src == dst`` is a local copy (ir.py), in the rank's step for that round. An end that is not
        kept (a one-rank build) is dropped.
        """
        if stop <= start:
            return
        at = start if dst_start is None else dst_start
        if self.rank is None or src == self.rank:
            sends, _, src_labels = self._slot(rnd, src)
            sends.append(Send(dst, start, stop))
            if label not in src_labels:
                src_labels.append(label)
        if self.rank is None or dst == self.rank:
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
        """The schedule: every rank's steps, or the kept rank's (a one-rank schedule, ir.py)."""
        if self.rank is None:
            steps: list[list[Step]] = [[] for _ in range(self.world_size)]
            for slots in self._rounds:
                for rank, (sends, recvs, labels) in slots.items():
                    steps[rank].append(Step(tuple(sends), tuple(recvs), ", ".join(labels)))
            per_rank = tuple(tuple(s) for s in steps)
        else:
            own = tuple(
                Step(tuple(sends), tuple(recvs), ", ".join(labels))
                for _, (sends, recvs, labels) in sorted(self._own.items())
            )
            per_rank = only_steps(self.world_size, self.rank, own)
        return Schedule(
            op=op,
            algo=algo,
            world_size=self.world_size,
            count=count,
            steps=per_rank,
            root=root,
            layout=layout,
            params=params,
            rank=self.rank,
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
