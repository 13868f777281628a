"""collbench.torch.scan on 2 and 3 gloo ranks: inclusive and exclusive, sum, prod, min and max, at
sizes that cross a profile's rules for linear, recursive-doubling and blelloch, each rank's result
equal to the reference computed from every rank's known input (torch.distributed has no scan to
compare with); exscan's rank 0 keeps its tensor; a native rule and avg are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule

pytestmark = pytest.mark.dist

P = {"segment_bytes": None, "layout": "rank-order"}
COUNTS = (1, 7, 40, 300)
"""float64 elements: 8 B, 56 B, 320 B and 2,400 B cross every rule below."""


def scan_profile(world: int) -> Profile:
    rules = []
    for op in ("scan", "exscan"):
        rules += [
            Rule(op, 0, 63, "linear", P),
            Rule(op, 64, 1023, "recursive-doubling", P),
            Rule(op, 1024, None, "blelloch", P),
        ]
    return Profile(fingerprint="test", host="test", backend="gloo", rule_sets=(RuleSet(world, 1, tuple(rules)),))


def _input(rank: int, count: int) -> torch.Tensor:
    # Small integers (exact in float64 whatever the order), different per rank and element.
    return ((torch.arange(count, dtype=torch.float64) * 3 + rank * 5) % 7) - 3


def _reference(rank: int, count: int, redop: str, exclusive: bool) -> torch.Tensor:
    upto = rank if exclusive else rank + 1
    acc = _input(0, count)
    for r in range(1, upto):
        x = _input(r, count)
        acc = {"sum": acc + x, "prod": acc * x, "min": torch.minimum(acc, x), "max": torch.maximum(acc, x)}[redop]
    return acc


def _worker(rank: int, world: int, store_path: str, out_dir: str) -> None:
    import collbench.torch as ctorch
    from collbench.errors import ConfigError

    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
    try:
        profile = scan_profile(world)
        used: dict[str, list[str]] = {"scan": [], "exscan": []}
        for redop, torch_op in (("sum", "sum"), ("prod", dist.ReduceOp.PRODUCT), ("min", "min"), ("max", "max")):
            for count in COUNTS:
                for exclusive in (False, True):
                    tensor = _input(rank, count)
                    rule = ctorch.scan(tensor, profile=profile, op=torch_op, exclusive=exclusive)
                    # Plain text: torch.load(weights_only) refuses an AlgoRef (a str subclass).
                    used["exscan" if exclusive else "scan"].append(str(rule.algo))
                    if exclusive and rank == 0:
                        assert torch.equal(tensor, _input(0, count)), "exscan's rank 0 keeps its tensor"
                    else:
                        want = _reference(rank, count, redop, exclusive)
                        assert torch.equal(tensor, want), (redop, count, exclusive, tensor, want)
        # A 2-D, non-contiguous tensor: the result lands in it as it is laid out.
        grid = _input(rank, 12).reshape(3, 4).t()
        ctorch.scan(grid, profile=profile)
        assert torch.equal(grid, _reference(rank, 12, "sum", False).reshape(3, 4).t())
        native = Profile(
            fingerprint="test",
            host="test",
            backend="gloo",
            rule_sets=(RuleSet(world, 1, (Rule("scan", 0, None, "native", P),)),),
        )
        refused = []
        for prof, redop in ((profile, "avg"), (native, "sum")):
            try:
                ctorch.scan(_input(rank, 4), profile=prof, op=redop)
            except ConfigError as exc:
                refused.append(str(exc))
        torch.save({"used": used, "refused": refused}, Path(out_dir) / f"scan{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 3])
def test_scan_equals_the_reference_on_every_rank(tmp_path: Path, world: int) -> None:
    mp.start_processes(
        _worker, args=(world, str(tmp_path / "store"), str(tmp_path)), nprocs=world, join=True, start_method="spawn"
    )
    for rank in range(world):
        res = torch.load(tmp_path / f"scan{rank}.pt")
        for op in ("scan", "exscan"):
            # Four reductions, each at every count: the rule of each call's size is the one that ran.
            want = [scan_profile(world).select(op, c * 8, world_size=world).algo for c in COUNTS] * 4
            assert res["used"][op] == want, op
            assert set(res["used"][op]) == {"linear", "recursive-doubling", "blelloch"}
        assert len(res["refused"]) == 2
        assert "avg has no prefix form" in res["refused"][0]
        assert "torch.distributed has no scan" in res["refused"][1]
