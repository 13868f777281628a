"""The symbolic verifier: proves, without running anything, that a schedule computes its op.

Every element of every rank's buffer holds a set of contributions (an int bitmask over ranks) and the
index of the element they came from (kept as an offset, ``shift``; 0 when data stays in place). Runs
of equal elements are kept as one piece, so the cost grows with the number of distinct ranges, not
with ``count``. The simulation follows ir.py's semantics under rendezvous: a step completes once every
partner of each of its transfers has posted the matching step; its sends carry the buffer as it was
when the step began, its receives are applied at its end, in order.

:func:`verify` raises :class:`ScheduleError` (naming rank, step and element) when a receive has no
matching send (or a different size), when ranks wait on each other for ever, when a reduction adds a
contribution twice, combines different elements or data that was never there, or when the final
state is not what the op requires. :func:`simulate` runs the same simulation for ``explain``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

from collbench.errors import CollbenchError
from collbench.schedules.contracts import contract
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op
from collbench.units import counted


class ScheduleError(CollbenchError):
    """A schedule that does not compute its op, or cannot run (unmatched transfer, deadlock)."""


@dataclass(frozen=True, slots=True)
class Piece:
    """Elements ``[start, stop)`` of one rank's buffer, all holding the same thing.

    ``contributors`` is a bitmask of the ranks whose data is combined there (0: nothing defined yet);
    the data is that of element ``i + shift`` of those ranks.
    """

    start: int
    stop: int
    contributors: int
    shift: int = 0

    def ranks(self) -> list[int]:
        """The contributing ranks, ascending."""
        mask, out, r = self.contributors, [], 0
        while mask:
            if mask & 1:
                out.append(r)
            mask >>= 1
            r += 1
        return out


class BufferState:
    """One rank's buffer as runs of equal elements (an interval map)."""

    def __init__(self, count: int, contributors: int = 0) -> None:
        self.count = count
        self._starts: list[int] = [0] if count else []
        self._masks: list[int] = [contributors] if count else []
        self._shifts: list[int] = [0] if count else []

    def set(self, start: int, stop: int, contributors: int) -> None:
        """Overwrite ``[start, stop)`` with the rank set ``contributors`` (in place, shift 0)."""
        if start >= stop:
            return
        self._write(start, [Piece(start, stop, contributors)], reduce=False, on_conflict=None)

    def pieces(self, start: int = 0, stop: int | None = None) -> list[Piece]:
        """The runs covering ``[start, stop)``, clipped to it."""
        stop = self.count if stop is None else stop
        out: list[Piece] = []
        if start >= stop:
            return out
        i = bisect_right(self._starts, start) - 1
        while i < len(self._starts) and self._starts[i] < stop:
            end = self._starts[i + 1] if i + 1 < len(self._starts) else self.count
            out.append(Piece(max(start, self._starts[i]), min(stop, end), self._masks[i], self._shifts[i]))
            i += 1
        return out

    def _cut(self, x: int) -> int:
        """Make ``x`` a run boundary; return the index of the run starting at ``x``."""
        if x >= self.count:
            return len(self._starts)
        i = bisect_right(self._starts, x) - 1
        if self._starts[i] != x:
            self._starts.insert(i + 1, x)
            self._masks.insert(i + 1, self._masks[i])
            self._shifts.insert(i + 1, self._shifts[i])
            i += 1
        return i

    def _write(
        self,
        at: int,
        incoming: list[Piece],
        *,
        reduce: bool,
        on_conflict: Callable[[int, Piece, int, int], None] | None,
    ) -> None:
        """Copy or reduce ``incoming`` (sender pieces, already moved to start at ``at``) into the buffer."""
        for piece in incoming:
            lo = self._cut(piece.start)
            hi = self._cut(piece.stop)
            if not reduce:
                del self._starts[lo:hi], self._masks[lo:hi], self._shifts[lo:hi]
                self._starts.insert(lo, piece.start)
                self._masks.insert(lo, piece.contributors)
                self._shifts.insert(lo, piece.shift)
                continue
            for i in range(lo, hi):
                mask, shift = self._masks[i], self._shifts[i]
                if on_conflict is not None:
                    on_conflict(self._starts[i], piece, mask, shift)
                self._masks[i] = mask | piece.contributors
        self._merge()

    def _merge(self) -> None:
        starts: list[int] = []
        masks: list[int] = []
        shifts: list[int] = []
        for s, m, h in zip(self._starts, self._masks, self._shifts, strict=True):
            if masks and masks[-1] == m and shifts[-1] == h:
                continue
            starts.append(s)
            masks.append(m)
            shifts.append(h)
        self._starts, self._masks, self._shifts = starts, masks, shifts


def _ranks_text(mask: int) -> str:
    """``rank 3`` or ``ranks {1, 2}``: the ranks of a contributor mask, counted in English."""
    ranks = Piece(0, 0, mask).ranks()
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks {" + ", ".join(str(r) for r in ranks) + "}"


def _contributions(mask: int) -> str:
    """``the contribution of rank 3`` or ``the contributions of ranks {1, 2}``."""
    plural = "s" if mask & (mask - 1) else ""
    return f"the contribution{plural} of {_ranks_text(mask)}"


def initial_states(schedule: Schedule) -> list[BufferState]:
    """Every rank's buffer before the first step, as ir.py defines it per op."""
    n, count, op = schedule.world_size, schedule.count, schedule.op
    extent = schedule.buffer_elems
    terms = contract(op)
    states = []
    for r in range(n):
        state = BufferState(extent)
        for start, stop in terms.holds(r, n, count, schedule.root):
            state.set(start, stop, 1 << r)
        states.append(state)
    return states


Observer = Callable[[int, list[tuple[int, int]], list[BufferState]], None]
"""Called after every wave with (wave index, the (rank, step) pairs that completed, every rank's state)."""


def _match(
    schedule: Schedule,
) -> tuple[dict[tuple[int, int, int], tuple[int, int, int]], list[list[list[tuple[int, int]]]]]:
    """Pair the k-th send a->b with the k-th receive on b from a. Returns, per receive (rank, step, index),
    its send (rank, step, index), and per (rank, step) the (partner, partner step) it waits for."""
    schedule.require_whole("the verifier")
    n, count = schedule.world_size, schedule.buffer_elems
    sends: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    recvs: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for r in range(n):
        for s, step in enumerate(schedule.steps[r]):
            for k, t in enumerate(step.sends):
                _check_transfer(r, s, "sends", t.peer, t.start, t.stop, n, count)
                sends.setdefault((r, t.peer), []).append((r, s, k))
            for k, rcv in enumerate(step.recvs):
                _check_transfer(r, s, "receives", rcv.peer, rcv.start, rcv.stop, n, count)
                recvs.setdefault((rcv.peer, r), []).append((r, s, k))
    matched: dict[tuple[int, int, int], tuple[int, int, int]] = {}
    waits: list[list[list[tuple[int, int]]]] = [[[] for _ in schedule.steps[r]] for r in range(n)]
    for pair in sorted(set(sends) | set(recvs)):
        a, b = pair
        out, into = sends.get(pair, []), recvs.get(pair, [])
        for k in range(max(len(out), len(into))):
            if k >= len(into):
                _, s, i = out[k]
                t = schedule.steps[a][s].sends[i]
                raise ScheduleError(
                    f"rank {a} step {s} sends elements [{t.start}, {t.stop}) to rank {b} (its message {k + 1} to "
                    f"{b}), but rank {b} posts only {counted(len(into), 'receive')} from rank {a}"
                )
            if k >= len(out):
                _, s, i = into[k]
                t2 = schedule.steps[b][s].recvs[i]
                raise ScheduleError(
                    f"rank {b} step {s} receives elements [{t2.start}, {t2.stop}) from rank {a} (message {k + 1}), "
                    f"but rank {a} sends only {counted(len(out), 'message')} to rank {b}"
                )
            (_, sa, ia), (_, sb, ib) = out[k], into[k]
            snd, rcv = schedule.steps[a][sa].sends[ia], schedule.steps[b][sb].recvs[ib]
            if a == b and sa != sb:
                raise ScheduleError(
                    f"rank {a} copies elements [{snd.start}, {snd.stop}) to itself in step {sa}, but the matching "
                    f"receive is in step {sb}: a local copy sends and receives in one step"
                )
            if snd.count != rcv.count:
                raise ScheduleError(
                    f"rank {a} step {sa} sends {counted(snd.count, 'element')} [{snd.start}, {snd.stop}) to rank {b}, "
                    f"but the matching receive (rank {b} step {sb}) expects {rcv.count} at element {rcv.start}"
                )
            matched[(b, sb, ib)] = (a, sa, ia)
            waits[a][sa].append((b, sb))
            waits[b][sb].append((a, sa))
    return matched, waits


def _check_transfer(rank: int, step: int, verb: str, peer: int, start: int, stop: int, n: int, count: int) -> None:
    if not 0 <= peer < n:
        raise ScheduleError(f"rank {rank} step {step} {verb} with peer {peer}, which is not a rank of {n}")
    if stop > count:
        raise ScheduleError(
            f"rank {rank} step {step} {verb} elements [{start}, {stop}), "
            f"beyond the buffer of {counted(count, 'element')}"
        )


def simulate(schedule: Schedule, observer: Observer | None = None) -> list[BufferState]:
    """Run the schedule symbolically; return every rank's final state.

    Raises ScheduleError for an unmatched transfer, a deadlock (naming the stuck ranks and whom they wait
    for), or a reduction that double-counts or mixes elements or undefined data.
    """
    n = schedule.world_size
    # An op without data (barrier) only merges who has been heard from.
    barrier = not schedule.op.spec.payload
    matched, waits = _match(schedule)
    states = initial_states(schedule)
    cur = [0] * n
    payloads: dict[tuple[int, int, int], list[Piece]] = {}

    def post(rank: int) -> None:
        # Sends carry the buffer as it is when the step begins, whenever the receiver takes them.
        s = cur[rank]
        if s < len(schedule.steps[rank]):
            for k, t in enumerate(schedule.steps[rank][s].sends):
                payloads[(rank, s, k)] = states[rank].pieces(t.start, t.stop)

    for r in range(n):
        post(r)
    wave = 0
    while True:
        ready = [
            r for r in range(n) if cur[r] < len(schedule.steps[r]) and all(cur[p] >= ps for p, ps in waits[r][cur[r]])
        ]
        if not ready:
            break
        for r in ready:
            s = cur[r]
            for k, rcv in enumerate(schedule.steps[r][s].recvs):
                src = matched[(r, s, k)]
                sent = schedule.steps[src[0]][src[1]].sends[src[2]]
                moved = rcv.start - sent.start
                incoming = [
                    Piece(p.start + moved, p.stop + moved, p.contributors, p.shift - moved) for p in payloads.pop(src)
                ]
                # A barrier's "reduce" merges who has been heard from: hearing twice is no error.
                check = None if barrier else _conflict_check(r, s, src[0], schedule.op)
                states[r]._write(rcv.start, incoming, reduce=rcv.reduce, on_conflict=check)
        for r in ready:
            cur[r] += 1
            post(r)
        if observer is not None:
            observer(wave, [(r, cur[r] - 1) for r in ready], states)
        wave += 1
    stuck = [r for r in range(n) if cur[r] < len(schedule.steps[r])]
    if stuck:
        parts = []
        for r in stuck[:8]:
            blockers = sorted({p for p, ps in waits[r][cur[r]] if cur[p] < ps})
            waited = ", ".join(str(p) for p in blockers) or "none"
            parts.append(f"rank {r} at step {cur[r]} waits for {'rank' if len(blockers) == 1 else 'ranks'} {waited}")
        more = f" (and {len(stuck) - 8} more)" if len(stuck) > 8 else ""
        raise ScheduleError(f"deadlock: {'; '.join(parts)}{more}")
    return states


def step_waves(schedule: Schedule) -> list[list[int]]:
    """When every step completes if all run as soon as rendezvous allows: ``waves[r][s]`` is the 0-based
    wave in which rank r's step s completes. ``1 + max`` over all is the critical path in steps (the
    latency term; a pipeline's ranks each take few steps but wait on each other along the chain).

    Raises ScheduleError for an unmatched transfer or a deadlock (a cycle of waits).
    """
    _, waits = _match(schedule)
    done: list[list[int]] = [[-1] * len(steps) for steps in schedule.steps]
    busy: set[tuple[int, int]] = set()

    def posted(r: int, s: int) -> int:
        # A step is posted once the rank's previous step completed (wave index + 1; 0 at the start).
        return 0 if s == 0 else done[r][s - 1] + 1

    for r0 in range(schedule.world_size):
        for s0 in range(len(schedule.steps[r0])):
            stack = [(r0, s0)]
            while stack:
                r, s = stack[-1]
                if done[r][s] >= 0:
                    stack.pop()
                    continue
                needs = [(r, s - 1)] if s > 0 else []
                needs += [(p, ps - 1) for p, ps in waits[r][s] if ps > 0]
                missing = [x for x in needs if done[x[0]][x[1]] < 0]
                if missing:
                    if (r, s) in busy:
                        raise ScheduleError(f"deadlock: rank {r} step {s} waits, through a cycle, on itself")
                    busy.add((r, s))
                    for x in missing:
                        if x in busy:
                            raise ScheduleError(
                                f"deadlock: rank {r} step {s} and rank {x[0]} step {x[1]} wait on each other"
                            )
                    stack.extend(missing)
                    continue
                busy.discard((r, s))
                start = max([posted(r, s)] + [posted(p, ps) for p, ps in waits[r][s]])
                done[r][s] = start
                stack.pop()
    return done


def _conflict_check(rank: int, step: int, src: int, op: Op) -> Callable[[int, Piece, int, int], None]:
    def check(element: int, incoming: Piece, mask: int, shift: int) -> None:
        where = f"rank {rank} step {step} reduces data from rank {src} into element {element}"
        if not op.spec.reduces:
            raise ScheduleError(f"{where}, but {op.value} never reduces")
        if mask == 0 or incoming.contributors == 0:
            raise ScheduleError(f"{where}, but one side holds no defined data yet")
        if shift != incoming.shift:
            raise ScheduleError(
                f"{where}: it combines element {element + incoming.shift} of the sender's data with element "
                f"{element + shift}"
            )
        twice = mask & incoming.contributors
        if twice:
            raise ScheduleError(f"{where}: {_contributions(twice)} would count twice")
        if op.spec.ordered:
            _check_order(where, incoming.contributors, mask)

    return check


def _contiguous(mask: int) -> bool:
    """Whether the ranks in ``mask`` are one run ``a..b`` (adding the lowest bit carries through it)."""
    low = mask & -mask
    total = mask + low
    return total & (total - 1) == 0


def _check_order(where: str, incoming: int, local: int) -> None:
    # ir.py: an ordered op's receive computes incoming op local. With every piece a run of ranks
    # combined in order, the result is right for any associative op exactly when the incoming run ends
    # just below where the local run starts.
    adjacent = incoming.bit_length() == (local & -local).bit_length() - 1
    if not (_contiguous(incoming) and _contiguous(local) and adjacent):
        raise ScheduleError(
            f"{where}: it combines {_ranks_text(incoming)} before {_ranks_text(local)}, which is not "
            "a prefix in rank order (the reduction need not commute: the incoming ranks must come right "
            "before the ones there)"
        )


def _expected(schedule: Schedule) -> list[list[tuple[int, int, int, int]]]:
    """Per rank, the (start, stop, contributors, shift) ranges the op requires at the end: elements
    [start, stop) must hold the data of ``contributors`` at element index + ``shift`` (its contract's)."""
    n, count, root = schedule.world_size, schedule.count, schedule.root
    return [contract(schedule.op).requires(r, n, count, root) for r in range(n)]


def verify(schedule: Schedule) -> None:
    """Prove that ``schedule`` computes its op on every rank; raise ScheduleError naming what is wrong."""
    states = simulate(schedule)
    for r, ranges in enumerate(_expected(schedule)):
        for a, z, want, shift in ranges:
            for piece in states[r].pieces(a, z):
                if piece.contributors != want or piece.shift != shift:
                    got = "no defined data" if piece.contributors == 0 else _contributions(piece.contributors)
                    if piece.shift and piece.contributors:
                        got += f" to element {piece.start + piece.shift}"
                    raise ScheduleError(
                        f"after its last step, rank {r} element {piece.start} holds {got}, but {schedule.op.value} "
                        f"needs {_contributions(want)} to element {piece.start + shift} there"
                    )
