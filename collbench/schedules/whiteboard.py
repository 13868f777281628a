"""The data behind ``collbench explain``: a schedule drawn the way people draw it on a whiteboard.

Ranks are letters (a, b, c, ...). The buffer is cut into pieces at every boundary any transfer uses,
numbered from 0. After each step (one rendezvous wave of the symbolic simulation: every step that can
complete does), the board says which pieces went from which rank to which, and what each rank holds,
for example ``a1+b1+c1`` (the sum of piece 1 of ranks a, b and c), ``c2`` (c's piece 2, copied) or
``·`` (nothing defined yet).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from itertools import pairwise

from collbench.schedules.contracts import contract
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op
from collbench.schedules.verifier import BufferState, Piece, initial_states, simulate

NOTHING = "·"


def rank_letter(rank: int) -> str:
    """``a`` for rank 0 ... ``z`` for 25, then ``aa``, ``ab``..."""
    letters = ""
    r = rank
    while True:
        letters = chr(ord("a") + r % 26) + letters
        r = r // 26 - 1
        if r < 0:
            return letters


@dataclass(frozen=True, slots=True)
class Move:
    """Rank ``src`` sent pieces ``pieces`` (``elements`` elements) to ``dst``, which added or copied them."""

    src: int
    dst: int
    pieces: tuple[int, ...]
    """Where the data landed in ``dst``'s buffer."""
    elements: int
    reduce: bool
    from_pieces: tuple[int, ...] = ()
    """Where it was read in ``src``'s buffer, when that is elsewhere (all-to-all's blocks move from the
    input to the output region); empty when it lands where it was read."""

    @property
    def is_local_copy(self) -> bool:
        return self.src == self.dst


@dataclass(frozen=True, slots=True)
class BoardStep:
    index: int
    """1-based step (wave) number."""
    labels: tuple[str, ...]
    """What the steps that completed here do (``reduce-scatter 1/3``...)."""
    moves: tuple[Move, ...]
    holdings: tuple[tuple[str, ...], ...]
    """``holdings[rank][piece]``: what the rank holds there after this step."""


@dataclass(frozen=True, slots=True)
class Whiteboard:
    algo: str
    op: Op
    world_size: int
    count: int
    root: int
    pieces: tuple[tuple[int, int], ...]
    """The pieces' element ranges ``[start, stop)``."""
    initial: tuple[tuple[str, ...], ...]
    steps: tuple[BoardStep, ...]

    @property
    def letters(self) -> tuple[str, ...]:
        return tuple(rank_letter(r) for r in range(self.world_size))


def piece_ranges(schedule: Schedule) -> list[tuple[int, int]]:
    """Cut the buffer at every boundary a transfer (or, for ops that own chunks or blocks, a chunk or
    block) uses."""
    # The whole buffer: all-to-all's and send/recv's output after the input, barrier's one token.
    cuts = {0, schedule.count, schedule.buffer_elems}
    # Every rank's input, output and what the op requires there (and where that comes from) is a piece,
    # moved or not: the chunks of reduce-scatter and all-gather, the blocks of the block ops (all-to-all's
    # in the input and the output region), from the op's contract.
    terms = contract(schedule.op)
    n, count = schedule.world_size, schedule.count
    for r in range(n):
        cuts.update(terms.input_span(r, n, count))
        cuts.update(terms.output_span(r, n, count))
        for a, z, _, shift in terms.requires(r, n, count, schedule.root):
            cuts.update((a, z, a + shift, z + shift))
    for steps in schedule.steps:
        for step in steps:
            for t in step.sends:
                cuts.update((t.start, t.stop))
            for rcv in step.recvs:
                cuts.update((rcv.start, rcv.stop))
    points = sorted(cuts)
    return list(pairwise(points))


def holding_label(piece: Piece, piece_index: int, world_size: int) -> str:
    """``a1+b1+c1`` for the ranks in ``piece``; ``Σ1`` when every rank of a world of 5 or more is in."""
    ranks = piece.ranks()
    if not ranks:
        return NOTHING
    if world_size >= 5 and len(ranks) == world_size:
        return f"Σ{piece_index}"
    parts: list[str] = []
    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        # Runs of four or more consecutive ranks shrink to their ends, so wide worlds stay readable.
        if j - i >= 3:
            parts.append(f"{rank_letter(ranks[i])}{piece_index}+…+{rank_letter(ranks[j])}{piece_index}")
        else:
            parts.extend(f"{rank_letter(r)}{piece_index}" for r in ranks[i : j + 1])
        i = j + 1
    return "+".join(parts)


def _holdings(states: list[BufferState], pieces: list[tuple[int, int]], world_size: int) -> tuple[tuple[str, ...], ...]:
    starts = [a for a, _ in pieces]
    rows = []
    for state in states:
        row = []
        for a, z in pieces:
            labels = []
            for run in state.pieces(a, z):
                # The data may have come from another offset: name the piece it came from.
                origin = bisect_right(starts, run.start + run.shift) - 1 if run.contributors else 0
                labels.append(holding_label(run, origin, world_size))
            row.append("|".join(labels))
        rows.append(tuple(row))
    return tuple(rows)


def _covered(pieces: list[tuple[int, int]], start: int, stop: int) -> tuple[int, ...]:
    return tuple(k for k, (a, z) in enumerate(pieces) if a < stop and z > start)


def build_whiteboard(schedule: Schedule) -> Whiteboard:
    """Simulate ``schedule`` and record, step by step, the moves and what every rank holds.

    Raises ScheduleError if the schedule cannot run (see :func:`collbench.schedules.verifier.simulate`).
    """
    pieces = piece_ranges(schedule)
    n = schedule.world_size
    steps: list[BoardStep] = []
    # The k-th receive on b from a takes the k-th send from a to b (ir.py): where it was read.
    sent: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for r, rank_steps in enumerate(schedule.steps):
        for step in rank_steps:
            for t in step.sends:
                sent.setdefault((r, t.peer), []).append((t.start, t.stop))
    taken: dict[tuple[int, int], int] = {}

    def observe(wave: int, completed: list[tuple[int, int]], states: list[BufferState]) -> None:
        labels: list[str] = []
        moves: list[Move] = []
        for rank, s in completed:
            step = schedule.steps[rank][s]
            for label in step.label.split(", ") if step.label else []:
                if label not in labels:
                    labels.append(label)
            for rcv in step.recvs:
                k = taken.get((rcv.peer, rank), 0)
                taken[(rcv.peer, rank)] = k + 1
                start, stop = sent[(rcv.peer, rank)][k]
                landed = _covered(pieces, rcv.start, rcv.stop)
                read = _covered(pieces, start, stop) if start != rcv.start else ()
                moves.append(Move(rcv.peer, rank, landed, rcv.count, rcv.reduce, read))
        moves.sort(key=lambda m: (m.src, m.dst, m.pieces))
        steps.append(BoardStep(wave + 1, tuple(sorted(labels)), tuple(moves), _holdings(states, pieces, n)))

    initial = _holdings(initial_states(schedule), pieces, n)
    simulate(schedule, observe)
    return Whiteboard(
        algo=schedule.algo,
        op=schedule.op,
        world_size=n,
        count=schedule.count,
        root=schedule.root,
        pieces=tuple(pieces),
        initial=initial,
        steps=tuple(steps),
    )


def move_text(move: Move) -> str:
    """``2`` (piece 2 to the same place), ``1→4`` (read at piece 1, landed at piece 4)."""
    if move.from_pieces:
        return f"{pieces_text(move.from_pieces)}→{pieces_text(move.pieces)}"
    return pieces_text(move.pieces)


def pieces_text(pieces: tuple[int, ...]) -> str:
    """``3``, ``0-2`` or ``0,2,5``: piece indices, runs shortened."""
    if not pieces:
        return "-"
    if list(pieces) == list(range(pieces[0], pieces[-1] + 1)) and len(pieces) > 1:
        return f"{pieces[0]}-{pieces[-1]}"
    return ",".join(str(p) for p in pieces)
