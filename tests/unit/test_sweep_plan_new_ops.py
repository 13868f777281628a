"""Planning a sweep of all-to-all, scatter, gather, send/recv and barrier (no rank starts here).

Counts follow nccl-tests (``ops.op_count``: whole blocks for the block ops, as its
``*GetCollByteCount``), so a row's size is what was moved; barrier is one point at 0 bytes; the
out-of-place-only ops measure no in-place points (torch.distributed takes two buffers for them); an
algorithm named for ops it does not do is skipped for those in one line, and so are points too small
to hold an element per rank, and the out-of-place-only ops, each reason once for all the ops it covers;
the memory estimate counts their buffers (``2 * count`` for all-to-all and send/recv).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch

from collbench.layouts.model import Layout
from collbench.runtime.sweep import memory, plan
from collbench.runtime.sweep.plan import SweepConfig
from collbench.runtime.sweep.points import SweepPoint, plan_points
from collbench.schedules.ops import Op
from collbench.schedules.registry import algorithms_for

NEW_OPS = (Op.ALL_TO_ALL, Op.SCATTER, Op.GATHER, Op.SENDRECV, Op.BARRIER)
CPU = torch.device("cpu")


def _job(tmp_path: Path, **changes: Any) -> plan.SweepJob:
    config = SweepConfig(
        world_size=3,
        backend="gloo",
        ops=tuple(op.value for op in NEW_OPS),
        algos=("native",),
        min_bytes=4,
        max_bytes=4096,
        step_factor=2.0,
        in_place=(False, True),
        stream=tmp_path / "s.jsonl",
    )
    return plan.validate(dataclasses.replace(config, **changes))


def test_all_includes_the_new_ops_with_their_registry_algorithms(tmp_path: Path) -> None:
    job = _job(tmp_path, ops=("all",), algos=("all",))
    assert set(NEW_OPS) <= set(job.ops)
    per_op = dict(job.algos)
    for op in NEW_OPS:
        assert list(per_op[op]) == [spec.name for spec in algorithms_for(op)]
        assert "native" in per_op[op]


def test_block_ops_move_whole_blocks_and_barrier_is_one_point(tmp_path: Path) -> None:
    points, notes = plan_points(_job(tmp_path), 3, CPU, "rank-order")
    by_op: dict[Op, list[SweepPoint]] = {}
    for p in points:
        by_op.setdefault(p.op, []).append(p)
    for op in (Op.ALL_TO_ALL, Op.SCATTER, Op.GATHER):
        counts = [p.count for p in by_op[op]]
        # 4 B .. 4 KiB of float32 on 3 ranks: 1, 2, 4 elements are less than a block each (skipped);
        # 8 -> 6, 16 -> 15, ... every count a multiple of 3, each measured once.
        assert all(c % 3 == 0 and c > 0 for c in counts)
        assert len(counts) == len(set(zip(counts, [p.in_place for p in by_op[op]], strict=True)))
        assert all(p.size_bytes == 4 * p.count for p in by_op[op])
        assert sorted({c for c in counts}) == [3, 6, 15, 30, 63, 126, 255, 510, 1023]
    # One note for the three ops, their sizes and algorithm named (it was one a point: 6 lines here).
    assert [n for n in notes if "less than one element" in n] == [
        "all-to-all, scatter, gather native 4 B, 8 B: less than one element per rank, skipped"
    ]
    # Send/recv moves the whole buffer: no rounding.
    assert [(p.count, p.size_bytes) for p in by_op[Op.SENDRECV]][:3] == [(1, 4), (2, 8), (4, 16)]
    [barrier] = by_op[Op.BARRIER]
    assert (barrier.count, barrier.size_bytes, barrier.in_place) == (0, 0, False)
    assert any(n.startswith("barrier moves no data: one point per algorithm at 0 bytes") for n in notes)


def test_out_of_place_only_ops_skip_in_place_points_and_say_so(tmp_path: Path) -> None:
    points, notes = plan_points(_job(tmp_path), 3, CPU, "rank-order")
    for op in (Op.ALL_TO_ALL, Op.SENDRECV):
        assert all(not p.in_place for p in points if p.op is op)
    # Said once for both (a line each before).
    assert [n for n in notes if "out of place only" in n] == [
        "all-to-all, sendrecv are out of place only (input then output): their in-place points are skipped"
    ]
    _, alone = plan_points(_job(tmp_path, ops=("all-to-all", "scatter")), 3, CPU, "rank-order")
    assert "all-to-all is out of place only (input then output): its in-place points are skipped" in alone
    for op in (Op.SCATTER, Op.GATHER):
        assert {p.in_place for p in points if p.op is op} == {False, True}
    only_in_place, _ = plan_points(_job(tmp_path, in_place=(True,)), 3, CPU, "rank-order")
    assert not [p for p in only_in_place if p.op in (Op.ALL_TO_ALL, Op.SENDRECV)]


def test_an_algorithm_named_for_ops_it_lacks_is_skipped_in_one_line_per_op(tmp_path: Path) -> None:
    job = _job(tmp_path, ops=("all-reduce", "all-to-all", "barrier"), algos=("ring", "native"))
    assert dict(job.algos)[Op.ALL_REDUCE] == ("ring", "native")
    if "ring" not in dict(job.algos)[Op.ALL_TO_ALL]:
        assert "all-to-all: ring does not implement it; skipped" in job.notes
        assert "barrier: ring does not implement it; skipped" in job.notes
    with pytest.raises(Exception, match="does none of the ops"):
        _job(tmp_path, ops=("barrier",), algos=("rabenseifner",))


def test_memory_counts_input_and_output_of_the_out_of_place_ops() -> None:
    count, n = 3 << 20, 3
    for op in (Op.ALL_TO_ALL, Op.SENDRECV):
        most, least = memory.point_bytes(op, "native", count, elem_bytes=4, world_size=n, in_place=False)
        assert most == least == 2 * count * 4
    block = count // n
    for op in (Op.SCATTER, Op.GATHER):
        assert memory.point_bytes(op, "native", count, elem_bytes=4, world_size=n, in_place=False)[0] == (
            (count + block) * 4
        )
        assert memory.point_bytes(op, "native", count, elem_bytes=4, world_size=n, in_place=True)[0] == count * 4
    assert memory.point_bytes(Op.BARRIER, "native", 0, elem_bytes=4, world_size=n, in_place=False)[0] == 4


def test_the_largest_point_holds_input_and_output(tmp_path: Path) -> None:
    job = _job(tmp_path, max_bytes=64 << 20, min_bytes=64 << 20)
    point = memory.largest_point(job, 3, 3)
    # Send/recv's 64 MiB in and 64 MiB out (all-to-all's are rounded down to whole blocks of 3).
    assert point is not None and point.point == "sendrecv native 64 MiB out-of-place"
    assert point.largest_rank_bytes >= 2 * (64 << 20)


def test_a_tune_of_six_ops_over_every_algorithm_says_each_skip_once_per_op(tmp_path: Path) -> None:
    """The issue's `tune --op all-to-all,scatter,gather,sendrecv,barrier,all-reduce`: tune names every
    algorithm for every op; what an op's algorithms lack is one note for that op, the op named first
    (it was one note per algorithm: 26 of them)."""
    from collbench.schedules.registry import algorithm_names, get_algorithm

    ops = ("all-to-all", "scatter", "gather", "sendrecv", "barrier", "all-reduce")
    # Every algorithm that does one of them, as tune names them (an algorithm doing none is refused).
    names = [a for a in algorithm_names() if any(get_algorithm(a).supports(Op.parse(op)) for op in ops)]
    job = _job(tmp_path, ops=ops, algos=("native", *names))
    skips = [n for n in job.notes if n.endswith("not implement it; skipped")]
    assert len(skips) == len(set(skips)) <= len(ops)
    assert sorted(n.split(":")[0] for n in skips) == sorted({n.split(":")[0] for n in skips})
    for note in skips:
        op = Op.parse(note.split(":")[0])
        named = note.split(": ", 1)[1].split(" do")[0].split(", ")
        assert named and all(name not in dict(job.algos)[op] for name in named), note


def test_a_layout_on_other_nodes_than_the_hosts_is_said() -> None:
    # The namespace benchmark's case (issue 35): a topology of 2 hosts, ranks on 4 namespace "nodes".
    two = Layout(nodes=((0, 1), (2, 3)), name="topology")
    assert plan.layout_nodes_note(two, 4) == (
        "the layout (topology) groups the ranks into 2 nodes, but they run on 4 nodes (by host name and "
        "boot id): rows record 4; hierarchical's rings follow the layout's 2"
    )
    assert plan.layout_nodes_note(two, 2) is None
    one = Layout(nodes=((0, 1, 2, 3),), name="topology")
    assert plan.layout_nodes_note(one, 4) == (
        "the layout (topology) groups the ranks into 1 node, but they run on 4 nodes (by host name and "
        "boot id): rows record 4; hierarchical's rings follow the layout's 1"
    )
    assert plan.layout_nodes_note(Layout(), 4) is None and plan.layout_nodes_note(None, 1) is None


def test_native_sizes_rounded_to_equal_chunks_are_said_once_per_op(tmp_path: Path) -> None:
    # torch's all_gather_into_tensor and reduce_scatter_tensor take equal chunks: on 3 ranks a native
    # 1 KiB point is 1020 B while ring's is 1 KiB, and the tables showed both sizes without a word.
    job = _job(tmp_path, ops=("all-gather", "reduce-scatter"), algos=("ring", "native"), min_bytes=1024)
    points, notes = plan_points(job, 3, CPU, "rank-order")
    for op in (Op.ALL_GATHER, Op.REDUCE_SCATTER):
        native = sorted({p.size_bytes for p in points if p.op is op and p.algo == "native"})
        ring = sorted({p.size_bytes for p in points if p.op is op and p.algo == "ring"})
        assert (native, ring) == ([1020, 2040, 4092], [1024, 2048, 4096])
        said = [n for n in notes if n.startswith(f"{op.value} native: the backend's call takes equal chunks")]
        assert said == [
            f"{op.value} native: the backend's call takes equal chunks, so its sizes are rounded down to a "
            "multiple of 3 elements, as nccl-tests rounds them (1 KiB measured as 1,020 B); collbench's own "
            "algorithms take each size as asked"
        ]
    # Sizes the world size divides are measured as asked, and nothing is said.
    _, even = plan_points(_job(tmp_path, world_size=2, ops=("all-gather",), min_bytes=1024), 2, CPU, "rank-order")
    assert not [n for n in even if "equal chunks" in n]


def test_block_sizes_rounded_to_whole_blocks_are_said_once_per_op(tmp_path: Path) -> None:
    # 'sweep --op scatter,gather --ranks 3 -b 1K' printed 1020B, 8190B in every algorithm's table
    # without a word: a block op moves one whole block per rank (nccl-tests' count), for every algorithm.
    job = _job(tmp_path, ops=("scatter", "gather", "all-to-all"), algos=("linear", "native"), min_bytes=1024)
    points, notes = plan_points(job, 3, CPU, "rank-order")
    for op in (Op.SCATTER, Op.GATHER, Op.ALL_TO_ALL):
        assert sorted({p.size_bytes for p in points if p.op is op}) == [1020, 2040, 4092]
        said = [n for n in notes if isinstance(n, str) and n.startswith(f"{op.value}: a call moves one whole")]
        assert said == [
            f"{op.value}: a call moves one whole block per rank, so its sizes are rounded down to a multiple "
            "of 3 elements, as nccl-tests rounds them (1 KiB measured as 1,020 B), for every algorithm"
        ]
    # Sizes the world size divides are measured as asked, and nothing is said.
    _, even = plan_points(_job(tmp_path, world_size=2, ops=("scatter",), min_bytes=1024), 2, CPU, "rank-order")
    assert not [n for n in even if isinstance(n, str) and "whole block" in n]


def test_a_skip_of_one_reason_is_said_once_for_every_op(tmp_path: Path) -> None:
    """'sweep --op all' on one node said 'hierarchical all-reduce: needs ranks on two or more nodes ...'
    again for reduce-scatter and all-gather, and 'less than one element per rank' once per op, algorithm
    and size (15 lines for 4 B on 3 ranks). Now one line per reason, naming the ops."""
    job = _job(tmp_path, ops=("all",), algos=("all",), max_bytes=64)
    _, notes = plan_points(job, 3, CPU, "rank-order")
    hierarchical = [n for n in notes if n.startswith("hierarchical ")]
    assert hierarchical == [
        "hierarchical all-reduce, reduce-scatter, all-gather: needs ranks on two or more nodes, and the layout has "
        "1 (on one node it is a ring; give --topology of several hosts); skipped"
    ]
    # Reduce-scatter's and all-gather's own algorithms run those sizes: only native is named there.
    small = [n for n in notes if "less than one element" in n or "fewer elements than needed" in n]
    assert small == [
        "reduce-scatter, all-gather native 4 B, 8 B: fewer elements than needed, skipped",
        "all-to-all, scatter, gather 4 B, 8 B (every algorithm): less than one element per rank, skipped",
    ]
