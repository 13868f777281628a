"""The stall summary a sweep and a tune print: each point named by its op, and no line repeating the
one before it (it printed one line per point, each ending in the same cause word for word)."""

from __future__ import annotations

import itertools

from collbench.runtime.sweep.stalls import stall_report
from tests.synthetic_rows import point_row


def test_stall_lines_name_each_points_op_and_do_not_repeat() -> None:
    rows = [
        point_row("ring", 16384, 900.0, stall_fraction=0.92),
        point_row("pairwise", 4096, 700.0, op="all-to-all", in_place=False, stall_fraction=0.6),
        point_row("tree", 1024, 300.0, stall_fraction=0.3),
        point_row("tree", 2048, 300.0, stall_fraction=0.0),
        point_row("ring", 8192, 300.0, stall_fraction=0.0, bimodal=True),
    ]
    lines = stall_report(rows)
    assert lines[0].startswith("4 of 5 points stalled")
    worst = next(line for line in lines if line.startswith("most stalled"))
    assert worst.endswith(
        "all-reduce ring at 16 KiB (in place): 92%, all-to-all pairwise at 4 KiB (out of place): 60%, "
        "all-reduce tree at 1 KiB (in place): 30%"
    )
    for before, after in itertools.pairwise(lines):
        assert before.split(":")[-1] != after.split(":")[-1], (before, after)


def test_a_point_in_two_modes_is_named_with_its_op() -> None:
    lines = stall_report([point_row("ring", 8192, 300.0, stall_fraction=0.0, bimodal=True)])
    assert lines[-1] == "iterations fell into two modes more than 2x apart: all-reduce ring at 8 KiB (in place)"


def test_a_point_stalled_in_two_rounds_is_named_once_at_its_worst() -> None:
    rows = [point_row("ring", 16384, 900.0, stall_fraction=f, tune_round=i) for i, f in enumerate((0.1, 0.3))]
    assert stall_report(rows)[-1].endswith(": all-reduce ring at 16 KiB (in place): 30%")


def test_the_first_line_says_where_the_stalled_points_are_marked() -> None:
    rows = [point_row("ring", 16384, 900.0, stall_fraction=0.92), point_row("tree", 2048, 300.0)]
    # A sweep prints its table of points with a * beside each stalled time.
    assert stall_report(rows)[0].startswith("1 of 2 points stalled (marked *): their times include waits")
    # A tune prints no table of points: it said "(marked *)" of marks nowhere on the screen.
    tuned = stall_report(rows, marked="ringed in red in the report")
    assert tuned[0].startswith("1 of 2 points stalled (ringed in red in the report): their times")
    assert stall_report(rows, marked="")[0].startswith("1 of 2 points stalled: their times include")
