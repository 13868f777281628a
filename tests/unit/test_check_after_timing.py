"""A point's data check reads what its first call left, after the timed calls (runtime/sweep/worker.py):
the first call is the warm-up right before the timing, as nccl-tests makes one untimed call before its
timed loop; a copy of that call's output (``buffers.kept_output``) is what the check reads, since the
calls after it overwrite it (in place, their own input too). nccl-tests checks after its timed loop
too, but a call of its own: it fills its buffers again and calls once more (src/common.cu, BenchTime)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist

from collbench.results.row import ResultRow
from collbench.runtime.executor.buffers import PointBuffers, fill, kept_output, make_buffers
from collbench.runtime.launch.ranks import RankContext
from collbench.runtime.sweep import memory, plan, worker
from collbench.runtime.sweep.plan import SweepConfig
from collbench.schedules.ops import Op


def _sweep(tmp_path: Path, **config: Any) -> list[ResultRow]:
    """Rank 0's rows of a one-rank gloo sweep of native all-reduce at 64 B (needs ``one_rank_gloo``)."""
    settings: dict[str, Any] = {"algos": ("native",), "min_bytes": 64, "max_bytes": 64} | config
    job = plan.validate(SweepConfig(world_size=1, backend="gloo", stream=tmp_path / "s.jsonl", **settings))
    ctx = RankContext(rank=0, world_size=1, local_rank=0, backend="gloo", device=torch.device("cpu"), timeout_s=30)
    ctx.control = dist.group.WORLD
    return worker.sweep_worker(ctx, job)


def _counted(monkeypatch: pytest.MonkeyPatch, first: float, later: float) -> tuple[list[int], list[int]]:
    """The calls the point makes (each adds ``first``, the first, or ``later`` to its output's first
    element) and, at each data check, how many calls had been made."""
    calls: list[int] = []
    checked_after: list[int] = []
    real_call, real_count = worker._native_call, worker._count_wrong

    def native_call(bufs: PointBuffers, *args: Any) -> Callable[[], None]:
        call = real_call(bufs, *args)

        def counted() -> None:
            call()  # on one rank, the identity: the buffer keeps its pattern, the expected result
            bufs.output[0] += first if not calls else later
            calls.append(1)

        return counted

    def count_wrong(*args: Any) -> int:
        checked_after.append(len(calls))
        return real_count(*args)

    monkeypatch.setattr(worker, "_native_call", native_call)
    monkeypatch.setattr(worker, "_count_wrong", count_wrong)
    return calls, checked_after


def _checked_before(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What the worker tells time_point, per point: whether the data check came after the first call."""
    told: list[bool] = []
    real = worker.time_point

    def time_point(*args: Any, **kwargs: Any) -> Any:
        told.append(kwargs["checked_before"])
        return real(*args, **kwargs)

    monkeypatch.setattr(worker, "time_point", time_point)
    return told


@pytest.mark.parametrize(
    ("first", "later", "wrong"),
    [
        # The first call leaves one wrong element, the later ones the right result: the point is wrong.
        (1.0, -1.0, 1),
        # The first call is right; each later one changes what it left, as an in-place all-reduce on n
        # ranks does (it reduces the previous result, n times it): the point is right.
        (0.0, 1.0, 0),
    ],
    ids=["a wrong first call fails the point", "later calls overwriting it do not"],
)
def test_the_check_reads_the_first_calls_output_after_every_timed_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_rank_gloo: None, first: float, later: float, wrong: int
) -> None:
    calls, checked_after = _counted(monkeypatch, first, later)
    checked_before = _checked_before(monkeypatch)
    (row,) = _sweep(tmp_path, iters=5, warmup=0, in_place=(True,))
    # The first call, then the 5 timed ones, and only then the check (it came right after the first).
    assert len(calls) == 6 and checked_after == [6] and checked_before == [False]
    assert row.wrong == wrong and row.iters == 5


def test_warm_up_calls_asked_come_after_the_first_call_and_before_the_timing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_rank_gloo: None
) -> None:
    calls: list[int] = []
    real_call = worker._native_call

    def native_call(bufs: PointBuffers, *args: Any) -> Callable[[], None]:
        call = real_call(bufs, *args)
        return lambda: (call(), calls.append(1))[0]

    monkeypatch.setattr(worker, "_native_call", native_call)
    (row,) = _sweep(tmp_path, iters=3, warmup=2, in_place=(False,))
    assert len(calls) == 1 + 2 + 3 and row.wrong == 0


def test_the_kept_output_is_a_copy_where_anything_is_defined() -> None:
    count = 12
    b = make_buffers(Op.ALL_REDUCE, count, dtype=torch.float32, rank=0, world_size=1, in_place=True)
    fill(b, "sum")
    kept = kept_output(b)
    before = kept.output.clone()
    b.output.add_(1)  # the next calls overwrite the buffer (in place: the input too)
    assert torch.equal(kept.output, before) and kept.input is b.input and kept.whole is b.whole
    # A reduce's non-root has nothing defined in its output: nothing copied, nothing read.
    other = make_buffers(Op.REDUCE, count, dtype=torch.float32, rank=1, world_size=2, root=0, in_place=False)
    assert kept_output(other) is other


def test_the_memory_estimate_counts_the_kept_output() -> None:
    count = 1 << 20
    assert memory.kept_bytes(Op.ALL_REDUCE, count, elem_bytes=4, world_size=4) == (4 * count, 4 * count)
    # The root keeps its output; the other ranks of a reduce have none defined.
    assert memory.kept_bytes(Op.REDUCE, count, elem_bytes=4, world_size=4, root=2) == (4 * count, 0)
    # Reduce-scatter's output is the rank's chunk; barrier has none.
    most, least = memory.kept_bytes(Op.REDUCE_SCATTER, count, elem_bytes=4, world_size=4)
    assert most == least == count
    assert memory.kept_bytes(Op.BARRIER, 0, elem_bytes=4, world_size=4) == (0, 0)


@pytest.mark.parametrize(("first", "wrong"), [(1.0, 1), (0.0, 0)], ids=["wrong", "right"])
def test_a_point_past_the_copy_limit_is_checked_right_after_its_first_call_then_warmed_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_rank_gloo: None, first: float, wrong: int
) -> None:
    # Past buffers.KEEP_OUTPUT_BYTES no copy is kept (it would be one more buffer of the largest size a
    # rank holds): the check reads the first call's output at once, and one warm-up call comes between
    # the check and the timing even where the depth asks none (tune --quick's warmup 0).
    from collbench.runtime.executor import buffers

    monkeypatch.setattr(buffers, "KEEP_OUTPUT_BYTES", 32)  # the 64 B point is past it
    calls, checked_after = _counted(monkeypatch, first, later=0.0)
    checked_before = _checked_before(monkeypatch)
    (row,) = _sweep(tmp_path, iters=5, warmup=0, in_place=(True,))
    assert checked_after == [1] and len(calls) == 1 + 1 + 5
    # A point timed once first, to be cut short, gets that warm-up call before it too (timed.time_point).
    assert checked_before == [True]
    assert row.wrong == wrong and row.iters == 5


def test_no_copy_is_counted_past_the_copy_limit() -> None:
    from collbench.runtime.executor.buffers import KEEP_OUTPUT_BYTES

    largest = KEEP_OUTPUT_BYTES // 4
    assert memory.kept_bytes(Op.ALL_REDUCE, largest, elem_bytes=4, world_size=4) == (4 * largest, 4 * largest)
    assert memory.kept_bytes(Op.ALL_REDUCE, largest + 1, elem_bytes=4, world_size=4) == (0, 0)


def test_the_largest_point_with_a_copy_is_estimated_beside_the_largest_size() -> None:
    # 64 MiB with its copy is three buffers a rank, 72 MiB (past buffers.KEEP_OUTPUT_BYTES, no copy) two:
    # the estimate took the largest size alone, 192 MiB a rank where the 64 MiB point holds 236.
    job = plan.validate(
        SweepConfig(
            backend="gloo", world_size=2, algos=("ring",), dtype="int32", min_bytes=64 << 20, max_bytes=72 << 20,
            step_factor=1.125, stream=None,
        )
    )  # fmt: skip
    assert [s >> 20 for s in job.sizes] == [64, 72]
    alone = plan.validate(SweepConfig(backend="gloo", world_size=2, algos=("ring",), dtype="int32",
                                      min_bytes=64 << 20, max_bytes=64 << 20))  # fmt: skip
    both, at_64 = memory.largest_point(job, 2, 2), memory.largest_point(alone, 2, 2)
    assert both is not None and at_64 is not None
    assert both == at_64 and both.point == "all-reduce ring 64 MiB out-of-place"
