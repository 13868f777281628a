"""`collbench sweep --op all-to-all,scatter,gather,barrier,sendrecv --algo all` on real gloo ranks.

Every registered algorithm of each op runs (``native`` and whatever builders the registry holds), every
data point is checked against the op's definition (wrong 0), block ops move whole blocks, barrier is
one 0-byte point with no bandwidth and nothing to check, and one rank (what NCCL on one GPU is) runs
every op too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.results.io import read_rows
from collbench.results.row import ResultRow
from collbench.schedules.ops import Op
from collbench.schedules.registry import algorithms_for

pytestmark = pytest.mark.dist

RUNNER = CliRunner()
NEW_OPS = (Op.ALL_TO_ALL, Op.SCATTER, Op.GATHER, Op.BARRIER, Op.SENDRECV)
ARGS = ["--backend", "gloo", "--op", ",".join(op.value for op in NEW_OPS), "--algo", "all"]
ARGS += ["-b", "64", "-e", "4K", "-f", "8", "-n", "3", "-w", "1"]


def _sweep(tmp_path: Path, ranks: int, *extra: str) -> tuple[str, list[ResultRow]]:
    out = tmp_path / f"rows{ranks}.jsonl"
    result = RUNNER.invoke(app, ["sweep", "--ranks", str(ranks), *ARGS, "--output", str(out), *extra])
    assert result.exit_code == 0, result.output
    return result.output, read_rows(out)


def test_every_algorithm_of_the_new_ops_runs_checked_on_two_ranks(tmp_path: Path) -> None:
    output, rows = _sweep(tmp_path, 2, "--root", "1", "--both")
    for op in NEW_OPS:
        ran = {r.algo for r in rows if r.op == op.value}
        assert ran == {spec.name for spec in algorithms_for(op)}, op
    data = [r for r in rows if r.op != Op.BARRIER.value]
    assert data and all(r.wrong == 0 for r in data)
    assert all(r.algbw_gbps > 0 and r.time_us > 0 for r in data)
    for r in data:
        if Op(r.op).spec.blocks:
            assert r.count % 2 == 0 and r.size_bytes == 4 * r.count
        assert r.root == (1 if Op(r.op).spec.rooted else 0)
        # torch.distributed takes two buffers for these: out of place only.
        if Op(r.op).spec.out_of_place:
            assert not r.in_place
    assert {r.in_place for r in rows if r.op == "scatter"} == {False, True}
    barriers = [r for r in rows if r.op == Op.BARRIER.value]
    assert barriers and {r.algo for r in barriers} == {s.name for s in algorithms_for(Op.BARRIER)}
    for r in barriers:
        assert (r.size_bytes, r.count, r.algbw_gbps, r.busbw_gbps, r.wrong) == (0, 0, 0.0, 0.0, -1)
        assert r.time_us > 0
    assert len(barriers) == len({r.algo for r in barriers})  # one point per algorithm
    assert "barrier moves no data: nothing to check" in output
    assert "all-to-all, sendrecv are out of place only" in output
    assert "FAILED" not in output


def test_one_rank_runs_every_new_op(tmp_path: Path) -> None:
    # NCCL on one GPU is a world of one: every op must run there, and a shift of one rank is a copy.
    _, rows = _sweep(tmp_path, 1, "--out-of-place")
    assert {r.op for r in rows} == {op.value for op in NEW_OPS}
    assert all(r.wrong == 0 for r in rows if r.op != Op.BARRIER.value)
    assert all(r.world_size == 1 for r in rows)
