"""The whiteboard behind `collbench explain`: pieces, moves and what every rank holds, step by step."""

from __future__ import annotations

from collbench.schedules.ops import Op
from collbench.schedules.registry import get_algorithm
from collbench.schedules.verifier import Piece
from collbench.schedules.whiteboard import (
    NOTHING,
    build_whiteboard,
    holding_label,
    pieces_text,
    rank_letter,
)


def test_rank_letters() -> None:
    assert [rank_letter(r) for r in (0, 1, 25, 26, 27, 51, 52)] == ["a", "b", "z", "aa", "ab", "az", "ba"]


def test_holding_labels() -> None:
    assert holding_label(Piece(0, 1, 0b111), 1, 3) == "a1+b1+c1"
    assert holding_label(Piece(0, 1, 0b101), 2, 3) == "a2+c2"
    assert holding_label(Piece(0, 1, 0), 0, 3) == NOTHING
    assert holding_label(Piece(0, 1, 0b11111), 4, 5) == "Σ4"
    assert holding_label(Piece(0, 1, 0b1011110), 0, 8) == "b0+…+e0+g0"


def test_pieces_text() -> None:
    assert pieces_text((3,)) == "3"
    assert pieces_text((0, 1, 2)) == "0-2"
    assert pieces_text((0, 2)) == "0,2"
    assert pieces_text(()) == "-"


def test_ring_all_reduce_three_ranks() -> None:
    board = build_whiteboard(get_algorithm("ring").build(Op.ALL_REDUCE, 3, 3))
    assert board.pieces == ((0, 1), (1, 2), (2, 3))
    assert board.initial == (("a0", "a1", "a2"), ("b0", "b1", "b2"), ("c0", "c1", "c2"))
    assert len(board.steps) == 4
    first = board.steps[0]
    assert first.labels == ("reduce-scatter 1/2",)
    assert [(m.src, m.dst, m.pieces, m.reduce) for m in first.moves] == [
        (0, 1, (2,), True),
        (1, 2, (0,), True),
        (2, 0, (1,), True),
    ]
    assert first.holdings[1] == ("b0", "b1", "a2+b2")
    # After the reduce-scatter each rank owns one complete sum...
    assert board.steps[1].holdings[0][0] == "a0+b0+c0"
    assert board.steps[1].holdings[1][1] == "a1+b1+c1"
    # ...and after the all-gather every rank holds every sum.
    assert board.steps[-1].holdings == tuple(("a0+b0+c0", "a1+b1+c1", "a2+b2+c2") for _ in range(3))
    assert not any(m.reduce for m in board.steps[-1].moves)


def test_all_gather_starts_with_nothing_elsewhere() -> None:
    board = build_whiteboard(get_algorithm("direct").build(Op.ALL_GATHER, 3, 3))
    assert board.initial == (("a0", NOTHING, NOTHING), (NOTHING, "b1", NOTHING), (NOTHING, NOTHING, "c2"))
    assert board.steps[-1].holdings == tuple(("a0", "b1", "c2") for _ in range(3))


def test_pipelined_broadcast_pieces_follow_segments() -> None:
    board = build_whiteboard(get_algorithm("tree").build(Op.BROADCAST, 3, 4, segments=2))
    assert board.pieces == ((0, 2), (2, 4))
    assert board.initial[1] == (NOTHING, NOTHING)
    assert board.steps[0].holdings[1] == ("a0", NOTHING)
    assert board.steps[-1].holdings == tuple(("a0", "a1") for _ in range(3))


def test_empty_schedule() -> None:
    board = build_whiteboard(get_algorithm("ring").build(Op.ALL_REDUCE, 4, 0))
    assert board.pieces == () and board.steps == ()
