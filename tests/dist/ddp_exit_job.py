"""One rank of a training job that ends as a user's does: train with the DDP hook, destroy the group, exit.

Run by tests/dist/test_ddp_hook_exit.py as ``python ddp_exit_job.py RANK WORLD STORE_PATH``. The profile
gives the model's smaller buckets to native and the larger ones to collbench's ring, so the hook's
worker thread runs schedules up to the last step, and the job exits right after it.
"""

from __future__ import annotations

import datetime
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import collbench.torch as ctorch
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule

P = {"segment_bytes": None, "layout": "rank-order"}
RING_FROM = 8000
"""Bytes: the buckets of 524 B caps below are 8,320 to 16,640 B (ring) and 528 B (native)."""


def main(rank: int, world: int, store_path: str) -> None:
    torch.set_num_threads(1)
    rules = (Rule("all-reduce", 0, RING_FROM - 1, "native", P), Rule("all-reduce", RING_FROM, None, "ring", P))
    profile = Profile(fingerprint="t", host="t", backend="gloo", rule_sets=(RuleSet(world, 1, rules),))
    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    torch.manual_seed(0)
    model = DDP(
        torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32), torch.nn.Linear(32, 4)),
        bucket_cap_mb=0.0005,
    )
    sizes: list[int] = []
    inner = ctorch.ddp_comm_hook(profile)

    def hook(group: object, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        sizes.append(bucket.buffer().numel() * bucket.buffer().element_size())
        return inner(group, bucket)

    hook.__annotations__ = inner.__annotations__
    model.register_comm_hook(None, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(rank)
    for _ in range(4):
        opt.zero_grad()
        model(torch.randn(8, 64, generator=gen)).sum().backward()
        opt.step()
    print(f"buckets native {sum(n < RING_FROM for n in sizes)} ring {sum(n >= RING_FROM for n in sizes)}", flush=True)
    print("sum " + " ".join(f"{p.sum().item():.6e}" for p in model.parameters()), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
