"""An all-reduce leaves one value on every rank, to the last bit, for data that does not add exactly.

The sweep's data check fills buffers that reduce exactly in their dtype (buffers.pattern), so any order of
additions gives the same result there, and a schedule whose ranks added in different orders passed it.
Training data does not add exactly: one-shot's rank d added the others onto its own input (xd + x0 + x1
...), and on 3 ranks and more its last bits differed from rank 0's, so a DDP job on the hook drifted
apart (the page's train.py, docs/exports.md, printed another weights sum on rank 2 of 3 under a profile
that chose one-shot for its bucket). A reduction's result is one value on every rank: DDP assumes it
(it never compares the replicas' parameters after the first broadcast), and torch.distributed's own
all-reduce gives it on gloo and NCCL.

Every collbench algorithm of all-reduce, on 3 and 4 gloo processes, random float32 and bfloat16 inputs
(a different seed a rank), with and without segments: every rank's result equals rank 0's, bit for bit.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.distributed as dist

from collbench.layouts.model import Layout
from collbench.runtime.executor.schedule_runner import run_schedule
from collbench.runtime.launch.ranks import RankContext, launch
from collbench.schedules.ops import Op
from collbench.schedules.registry import algorithm_names, get_algorithm

pytestmark = pytest.mark.dist


def _worker(ctx: RankContext, payload: Any) -> list[tuple[str, int]]:
    n, rank = ctx.world_size, ctx.rank
    results: list[tuple[str, int]] = []
    for algo in algorithm_names():
        spec = get_algorithm(algo)
        if spec.builder is None or not spec.supports(Op.ALL_REDUCE):
            continue
        # hierarchical takes its nodes from the layout: two of n/2 ranks where n is even, else n of one.
        k = n // 2 if n % 2 == 0 else 1
        layout = Layout(nodes=tuple(tuple(range(i, i + k)) for i in range(0, n, k))) if spec.needs_nodes else None
        for dtype in (torch.float32, torch.bfloat16):
            for count, segment_bytes in ((7, None), (1000, None), (1000, 256)):
                case = f"{algo} {dtype} count={count} seg={segment_bytes}"
                ctx.doing(case)
                schedule = spec.build(Op.ALL_REDUCE, n, count, layout=layout, segments=1)
                gen = torch.Generator().manual_seed(1000 * (rank + 1) + count)
                buf = torch.randn(count, generator=gen).to(dtype)
                run_schedule(schedule, buf, "sum", segment_bytes=segment_bytes)
                every = [torch.empty_like(buf) for _ in range(n)]
                dist.all_gather(every, buf)
                differ = sum(int(torch.ne(every[0], other).sum()) for other in every[1:])
                results.append((case, differ))
    return results


@pytest.mark.parametrize("world", [3, 4])
def test_every_all_reduce_leaves_one_value_on_every_rank(world: int) -> None:
    outcomes = launch(world, _worker, None, backend="gloo", timeout_s=120)[0]
    ran = {case.split()[0] for case, _ in outcomes}
    assert "one-shot" in ran and "ring" in ran and "native" not in ran, ran
    differing = [(case, n) for case, n in outcomes if n]
    assert not differing, differing
