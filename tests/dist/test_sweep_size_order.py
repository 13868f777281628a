"""A tune's sweep on 2 gloo processes measures each size's likely fast algorithms first
(runtime/sweep/order.py), the same on both ranks, and resumes as it ran: only the points missing,
in the same order, the rows found again by their keys and returned in the plan's order."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.results.io import read_jsonl
from collbench.results.row import ResultRow
from collbench.runtime.sweep.faults import FAULT_ENV
from collbench.runtime.sweep.plan import SweepConfig
from collbench.runtime.sweep.run import run_sweep

pytestmark = pytest.mark.dist

SIZES = (8 << 10, 16 << 10, 32 << 10)
PLAN = ("tree", "ring", "native")


def _config(tmp_path: Path, **changes: object) -> SweepConfig:
    return SweepConfig(
        world_size=2,
        backend="gloo",
        ops=("all-reduce",),
        algos=PLAN,
        min_bytes=SIZES[0],
        max_bytes=SIZES[-1],
        step_factor=2.0,
        warmup=1,
        point_budget_s=0.05,
        in_place=(True,),
        timeout_s=60,
        interleave=True,
        cut_behind=2.0,  # as tune's rounds (tuning/sweeps.py round_sweep)
        stream=tmp_path / "stream.jsonl",
        **changes,  # type: ignore[arg-type]
    )


def _expected(rows: list[ResultRow], size: int) -> list[str]:
    """The order.py rule, from the rows of the size below: within 2x of its fastest first, in the
    plan's order, then the others, the fastest there first."""
    below = {r.algo: r.time_us for r in rows if r.size_bytes == size // 2}
    best = min(below.values())
    fast = [a for a in PLAN if below[a] <= 2.0 * best]
    return fast + sorted((a for a in PLAN if a not in fast), key=below.__getitem__)


def test_each_size_measures_the_algorithms_fast_below_first_and_resumes_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tree, first in the plan, is made 0.4 s late per call on rank 1 at the smallest size (point 0):
    # nothing was measured before it there, so it ran in full; at the sizes after, it comes last.
    monkeypatch.setenv(FAULT_ENV, "rank=1,point=0,mode=slow,seconds=0.4")
    rows = run_sweep(_config(tmp_path))
    monkeypatch.delenv(FAULT_ENV)
    assert all(r.wrong == 0 for r in rows)
    # Returned in the plan's order (op, size, algorithm), whatever order they were measured in.
    assert [(r.size_bytes, r.algo) for r in rows] == [(s, a) for s in SIZES for a in PLAN]
    (slow,) = [r for r in rows if r.algo == "tree" and r.size_bytes == SIZES[0]]
    assert slow.time_us >= 0.4e6 and slow.cut_short is None and slow.iters >= 5

    stream = tmp_path / "stream.jsonl"
    streamed = list(read_jsonl(stream))  # in the order measured
    ran = [[r.algo for r in streamed if r.size_bytes == size] for size in SIZES]
    assert ran[0] == list(PLAN)  # nothing below the smallest size: the plan's order
    assert ran[1] == _expected(rows, SIZES[1]) and ran[1][-1] == "tree"
    assert ran[2] == _expected(rows, SIZES[2])

    # Interrupted after the first point of the second size: the rows kept lead the order as measured
    # ones did (every rank gets them with the plan).
    lines = stream.read_text().splitlines()
    stream.write_text("\n".join(lines[:4]) + "\n")
    again = run_sweep(_config(tmp_path, resume=True))
    assert [r.key for r in again] == [r.key for r in rows]
    kept = {r.key: r.timestamp for r in streamed[:4]}
    assert all(r.timestamp == kept[r.key] for r in again if r.key in kept)  # untouched
    resumed = list(read_jsonl(stream))
    assert len(resumed) == len(rows) and [r.key for r in resumed[:4]] == [r.key for r in streamed[:4]]
    assert [r.algo for r in resumed[4:] if r.size_bytes == SIZES[1]] == _expected(rows, SIZES[1])[1:]
    assert [r.algo for r in resumed if r.size_bytes == SIZES[2]] == _expected(again, SIZES[2])
