"""ddp_comm_hook overlaps with backward as DDP's default hook does, in real gloo jobs.

DDP's contract for a communication hook (torch.distributed.algorithms.ddp_comm_hooks, and the
default ``allreduce_hook`` in ``ddp_comm_hooks/default_hooks.py``): the hook is called with a
``GradBucket`` as soon as the bucket's gradients are ready, and returns a ``torch.futures.Future``
whose value is the reduced bucket; DDP waits on the futures only at the end of backward. A hook that
all-reduces before returning serialises communication with the rest of backward.

* The hook returns while the bucket's all-reduce is still in flight: here the peer has not even
  called the hook yet when the first rank's hook has returned (native rule and collbench's schedule),
  on every call after the group's first (which reads the nodes its ranks run on, with the peer).
* Each bucket shape's schedule is compiled once, however many steps run.
* Training with the hook gives plain DDP's parameters, with rules that mix native and collbench's
  algorithms across buckets.

The hook reads only ``bucket.buffer()`` from the GradBucket (as ``allreduce_hook`` does), so a bucket
here is a small object with that method where the test must control when each rank calls the hook.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule

pytestmark = pytest.mark.dist

P = {"segment_bytes": None, "layout": "rank-order"}
TIMEOUT_S = 60
RD_FROM, RING_FROM = 16000, 25000
"""Rule boundaries (bytes) between the sizes of the model's buckets below (12,672, 19,604, 32,276 B)."""


def _profile(world: int) -> Profile:
    rules = (
        Rule("all-reduce", 0, RD_FROM - 1, "native", P),
        Rule("all-reduce", RD_FROM, RING_FROM - 1, "recursive-doubling", P),
        Rule("all-reduce", RING_FROM, None, "ring", {"segment_bytes": 4096, "layout": "rank-order"}),
    )
    return Profile(fingerprint="test", host="test", backend="gloo", rule_sets=(RuleSet(world, 1, rules),))


class _Bucket:
    """The part of dist.GradBucket a comm hook uses: the flat buffer of the bucket's gradients."""

    def __init__(self, buffer: torch.Tensor) -> None:
        self._buffer = buffer

    def buffer(self) -> torch.Tensor:
        return self._buffer


def _overlap_worker(rank: int, world: int, store_path: str, out_dir: str) -> None:
    import collbench.torch as ctorch

    store = dist.FileStore(store_path, world)
    dist.init_process_group(
        "gloo", store=store, rank=rank, world_size=world, timeout=datetime.timedelta(seconds=TIMEOUT_S)
    )
    try:
        hook = ctorch.ddp_comm_hook(_profile(world))
        # The hook's first call on a group reads the nodes its ranks run on (one all-gather, which every
        # rank joins as DDP calls every rank's hook for each bucket), so it returns once the peer has come:
        # register_comm_hook reads them at registration instead. Every call after it is checked below.
        first = torch.ones(100)
        torch.testing.assert_close(hook(None, _Bucket(first)).wait(), first)  # type: ignore[arg-type]
        done_at_return: dict[str, bool] = {}
        # 100 float32 = 400 B: native; 8000 = 32 KB: collbench's ring.
        for count in (100, 8000, 100, 8000):
            tag = f"{count}-{len(done_at_return)}"
            buffer = torch.arange(count, dtype=torch.float32) * (rank + 1)
            if rank != 0:
                # Only after rank 0's hook has returned: a hook that all-reduced before returning
                # would wait for this rank forever (until the group's timeout), and fail the test.
                store.wait([f"returned-{tag}"], datetime.timedelta(seconds=TIMEOUT_S))
            future = hook(None, _Bucket(buffer))  # type: ignore[arg-type]
            if rank == 0:
                done_at_return[tag] = future.done()
                store.set(f"returned-{tag}", "1")
            else:
                done_at_return[tag] = False
            result = future.wait()
            expected = torch.arange(count, dtype=torch.float32) * sum(r + 1 for r in range(world)) / world
            torch.testing.assert_close(result, expected)
            assert result.data_ptr() == buffer.data_ptr()  # in place, as DDP expects of the bucket
        torch.save({"done_at_return": done_at_return}, f"{out_dir}/overlap{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_the_hook_returns_before_the_bucket_is_reduced(tmp_path: Path) -> None:
    world = 2
    mp.start_processes(
        _overlap_worker,
        args=(world, str(tmp_path / "store"), str(tmp_path)),
        nprocs=world,
        join=True,
        start_method="spawn",
    )
    seen = torch.load(tmp_path / "overlap0.pt")["done_at_return"]
    assert len(seen) == 4
    # The peer had not called the hook: no all-reduce, native or collbench's, can have completed.
    assert not any(seen.values()), seen


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(32, 96), torch.nn.Tanh(), torch.nn.Linear(96, 48), torch.nn.Tanh(), torch.nn.Linear(48, 5)
    )


def _train(rank: int, hook: Any, bucket_mb: float) -> list[torch.Tensor]:
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(_model(), bucket_cap_mb=bucket_mb)
    if hook is not None:
        model.register_comm_hook(None, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(7 + rank)  # each rank sees different data
    for _ in range(5):
        x, y = torch.randn(16, 32, generator=gen), torch.randn(16, 5, generator=gen)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def _train_worker(rank: int, world: int, store_path: str, out_dir: str) -> None:
    import collbench.torch as ctorch

    dist.init_process_group(
        "gloo",
        init_method=f"file://{store_path}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=TIMEOUT_S),
    )
    try:
        from collbench.runtime.executor import plan_cache

        built: list[int] = []
        real_build = plan_cache.build_schedule

        def counting_build(key: plan_cache.PlanKey) -> Any:
            built.append(key.count)  # the bucket's element count
            return real_build(key)

        plan_cache.build_schedule = counting_build  # type: ignore[assignment]
        sizes: list[int] = []
        inner = ctorch.ddp_comm_hook(_profile(world))

        def recording_hook(group: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
            sizes.append(bucket.buffer().numel() * bucket.buffer().element_size())
            return inner(group, bucket)

        recording_hook.__annotations__ = inner.__annotations__
        out: dict[str, Any] = {}
        # Buckets capped at 2 KB hold one layer each (DDP never splits a parameter): 12,672 B
        # (native) and 19,604 B (recursive doubling); DDP's default caps give one bucket of the whole
        # model, 32,276 B (ring).
        for name, bucket_mb in (("small", 0.002), ("default", 25.0)):
            out[f"plain-{name}"] = _train(rank, None, bucket_mb)
            out[f"hooked-{name}"] = _train(rank, recording_hook, bucket_mb)
        out["sizes"] = sizes
        out["built"] = built
        torch.save(out, f"{out_dir}/train{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 3])
def test_training_with_the_hook_gives_plain_ddp_parameters_and_compiles_each_bucket_once(
    tmp_path: Path, world: int
) -> None:
    mp.start_processes(
        _train_worker,
        args=(world, str(tmp_path / "store"), str(tmp_path)),
        nprocs=world,
        join=True,
        start_method="spawn",
    )
    results = [torch.load(tmp_path / f"train{r}.pt") for r in range(world)]
    for res in results:
        for name in ("small", "default"):
            for plain, hooked in zip(res[f"plain-{name}"], res[f"hooked-{name}"], strict=True):
                torch.testing.assert_close(hooked, plain, rtol=1e-5, atol=1e-6)
        for mine, rank0s in zip(res["hooked-small"], results[0]["hooked-small"], strict=True):
            assert torch.equal(mine, rank0s)  # every rank holds the same parameters
        sizes = res["sizes"]
        # The buckets crossed all three rules, each several times over the steps.
        assert min(sizes) < RD_FROM and any(RD_FROM <= s < RING_FROM for s in sizes) and max(sizes) >= RING_FROM
        collbench_sizes = {s for s in sizes if s >= RD_FROM}
        assert len(sizes) > 2 * len(set(sizes))
        # One compiled schedule per bucket size that collbench runs, however often it came.
        assert sorted(n * 4 for n in res["built"]) == sorted(collbench_sizes)
