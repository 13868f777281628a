"""``--cuda-graph`` with forced NCCL variants: a variant's captured graph goes before its communicator.

Contracts faked here:

* NCCL (src/init.cc, from 2.26): communicator destruction polls "until all graphs referencing us
  die" (``while (comm->localPersistentRefs != 0)``), so a process group destroyed while a graph that
  captured its collectives lives hangs in ``destroy_process_group`` (NVIDIA's CUDA graph
  troubleshooting guide, "Process Hang": "CUDA graphs must be destroyed before NCCL communicators").
  ``FakeNccl`` fails the destruction of a group whose graph is still alive, where the real one waits.
* torch (torch/cuda/graphs.py): ``CUDAGraph.reset()`` deletes the instantiated graph; dropping the
  last reference does the same later, at the garbage collector's pleasure.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist

from collbench.backends.gloo import Gloo
from collbench.nccl.variants import NativeVariant, is_native
from collbench.runtime.cuda import nccl
from collbench.runtime.launch.ranks import RankContext
from collbench.runtime.sweep import plan, worker
from collbench.runtime.sweep.plan import SweepConfig
from collbench.schedules.ops import Op


class FakeNccl:
    """Variant groups, and which of them a live captured graph still references."""

    def __init__(self) -> None:
        self.current: str = "native"
        self.live_graphs: dict[int, str] = {}
        self.log: list[str] = []

    @contextlib.contextmanager
    def variant_group(self, variant: NativeVariant, ranks: list[int] | None = None) -> Iterator[Any]:
        self.log.append(f"create {variant.name}")
        self.current = variant.name
        try:
            yield None  # the default group: under gloo the native call runs for real
        finally:
            holding = sorted(g for g in self.live_graphs.values() if g == variant.name)
            assert not holding, f"destroying {variant.name} while its captured graph lives: NCCL would wait"
            self.log.append(f"destroy {variant.name}")
            self.current = "native"


class GraphTimer:
    """CudaEventTimer's graph keeping: one graph per timed function, kept until the next or release()."""

    def __init__(self, fake: FakeNccl) -> None:
        self.fake = fake
        self.kept: tuple[Callable[[], object], int] | None = None
        self.releases = 0

    def time_iterations(self, fn: Callable[[], object], iters: int) -> list[float]:
        if self.kept is None or self.kept[0] is not fn:
            if self.kept is not None:
                self.fake.live_graphs.pop(self.kept[1])
            fn()  # captured: it runs on the group the point runs on
            graph_id = len(self.fake.log) * 1000 + iters
            self.fake.live_graphs[graph_id] = self.fake.current
            self.kept = (fn, graph_id)
        return [1.0] * iters

    def sample_iters(self, iters: int) -> list[int]:
        return [1] * iters

    def release(self) -> None:
        self.releases += 1
        if self.kept is not None:
            self.fake.live_graphs.pop(self.kept[1])
            self.kept = None


def test_each_variants_graph_is_released_before_its_group_is_destroyed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_rank_gloo: None
) -> None:
    # Fails before NativeGroups' before_destroy: the timer kept native:ring's graph while its group went.
    fake = FakeNccl()
    timer = GraphTimer(fake)
    monkeypatch.setattr(nccl, "variant_group", fake.variant_group)
    # As on a CUDA device with --cuda-graph: native points are graph launches (native_groups.graph_policy).
    monkeypatch.setattr(worker, "graph_policy", lambda flag, device, algos: ({a for a in algos if is_native(a)}, ""))
    monkeypatch.setattr(worker, "make_timer", lambda device, cuda_graph=False: timer if cuda_graph else _Plain())
    # gloo stands in for NCCL here: its own check refuses --cuda-graph, its ranks being on the CPU.
    monkeypatch.setattr(Gloo, "check_sweep", lambda *_args: None)
    config = SweepConfig(
        world_size=1, backend="gloo", algos=("native",), min_bytes=64, max_bytes=256, iters=2, warmup=1
    )
    job = plan.validate(dataclasses.replace(config, stream=tmp_path / "s.jsonl", cuda_graph=True))
    job = dataclasses.replace(job, algos=((Op.ALL_REDUCE, ("native:ring", "native:tree", "native")),))
    ctx = RankContext(rank=0, world_size=1, local_rank=0, backend="gloo", device=torch.device("cpu"), timeout_s=30)
    ctx.control = dist.group.WORLD
    rows = worker.sweep_worker(ctx, job)
    assert {r.algo for r in rows} == {"native:ring", "native:tree", "native"} and all(r.wrong == 0 for r in rows)
    assert fake.log == ["create native:ring", "destroy native:ring", "create native:tree", "destroy native:tree"]
    assert timer.releases >= 2


class _Plain:
    def time_iterations(self, fn: Callable[[], object], iters: int) -> list[float]:
        return [1.0] * iters

    def sample_iters(self, iters: int) -> list[int]:
        return [1] * iters

    def release(self) -> None:
        pass
