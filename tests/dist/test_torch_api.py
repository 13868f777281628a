"""collbench.torch inside real torch.distributed jobs (gloo, local processes, a file store).

* all_reduce runs the profile's choice per size and gives what dist.all_reduce gives;
* DDP with ddp_comm_hook(profile) trains to the same parameters as DDP's default hook.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

from collbench.errors import UserError
from collbench.profile.document import Profile, ProfileLayout, RuleSet
from collbench.profile.rules import Rule
from collbench.runtime.ddp import bucket_bytes

pytestmark = pytest.mark.dist

P = {"segment_bytes": None, "layout": "rank-order"}


def make_profile(world: int, *, pair: bool = True) -> Profile:
    # Several algorithms across sizes, so a training run crosses rules (DDP buckets differ in size).
    rules = (
        Rule("all-reduce", 0, 255, "native", P),
        Rule("all-reduce", 256, 1023, "recursive-doubling", P),
        Rule("all-reduce", 1024, 4095, "tree", {"segment_bytes": 1024, "layout": "rank-order"}),
        Rule("all-reduce", 4096, 8191, "two-tree", P),
        Rule("all-reduce", 8192, 16383, "rabenseifner", P),
        Rule("all-reduce", 16384, None, "ring", {"segment_bytes": 4096, "layout": "topology"}),
    )
    # The ring rule was "measured" on a recorded layout: the ring in reverse rank order.
    layout = ProfileLayout("topology", rings=(tuple(reversed(range(world))),))
    # A second shape, two ranks, where one algorithm runs at every size: a subgroup of two must use it.
    sets = [RuleSet(world, 1, rules, layout=layout)]
    if pair and world != 2:
        sets.append(RuleSet(2, 1, (Rule("all-reduce", 0, None, "recursive-doubling", P),)))
    return Profile(fingerprint="test", host="test", backend="gloo", rule_sets=tuple(sets))


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    # Parameter sizes 4*64*4 B... chosen so that buckets of several sizes occur.
    return torch.nn.Sequential(
        torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 32), torch.nn.Tanh(), torch.nn.Linear(32, 3)
    )


def _train(rank: int, hook: Any) -> list[torch.Tensor]:
    from torch.nn.parallel import DistributedDataParallel as DDP

    # Small buckets (bucket_cap_mb in MiB) so that one step all-reduces several buckets of different sizes.
    model = DDP(_model(), bucket_cap_mb=0.004)
    if hook is not None:
        model.register_comm_hook(None, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(100 + rank)  # each rank sees different data
    for _ in range(4):
        x = torch.randn(8, 16, generator=gen)
        y = torch.randn(8, 3, generator=gen)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def _worker(rank: int, world: int, store_path: str, out_dir: str) -> None:
    import collbench.torch as ctorch

    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
    try:
        profile = make_profile(world)
        results: dict[str, Any] = {"algos": {}}
        # all_reduce against dist.all_reduce, at sizes in every rule, with odd element counts.
        for count in (1, 7, 100, 333, 700, 1500, 5000, 20011):
            base = torch.arange(count, dtype=torch.float64) * (rank + 1) + rank
            ours, ref = base.clone(), base.clone()
            rule = ctorch.all_reduce(ours, profile=profile)
            dist.all_reduce(ref)
            assert torch.equal(ours, ref), (count, rule.algo)
            results["algos"][count] = str(rule.algo)
        # A parameter (a leaf that requires grad), as dist.all_reduce takes it: at a schedule's size it
        # raised "a view of a leaf Variable that requires grad is being used in an in-place operation".
        for count in (7, 5000):
            param = torch.full((count,), float(rank + 1), requires_grad=True)
            ctorch.all_reduce(param, profile=profile)
            assert torch.equal(param.detach(), torch.full((count,), world * (world + 1) / 2)), count
        avg = torch.full((10, 10), float(rank), dtype=torch.float32)  # 400 B: recursive doubling
        ctorch.all_reduce(avg, profile=profile, op="avg")
        assert torch.allclose(avg, torch.full_like(avg, (world - 1) / 2))
        # torch.distributed's own reduction arguments, at a native size and at a schedule's.
        for count in (7, 5000):
            for torch_op in (dist.ReduceOp.MAX, dist.ReduceOp.RedOpType.MIN, dist.ReduceOp(dist.ReduceOp.PRODUCT)):
                base = (torch.arange(count, dtype=torch.float64) % 5 + 1) * (rank + 1)
                ours, ref = base.clone(), base.clone()
                ctorch.all_reduce(ours, profile=profile, op=torch_op)
                dist.all_reduce(ref, op=torch_op)
                assert torch.equal(ours, ref), (count, torch_op)
        results["default"] = _train(rank, None)
        results["hooked"] = _train(rank, ctorch.ddp_comm_hook(profile))
        if world > 2:
            # Every rank creates the group (torch's rule); only its members call the collective.
            pair_group = dist.new_group([0, 1])
            if rank < 2:
                sub, ref = (
                    torch.arange(5000, dtype=torch.float64) + rank,
                    torch.arange(5000, dtype=torch.float64) + rank,
                )
                results["pair_algo"] = str(ctorch.all_reduce(sub, profile=profile, group=pair_group).algo)
                dist.all_reduce(ref, group=pair_group)
                assert torch.equal(sub, ref)
        try:
            ctorch.all_reduce(torch.ones(4), profile=make_profile(world + 1, pair=False))
        except UserError as exc:
            results["mismatch"] = str(exc)
        torch.save(results, f"{out_dir}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 3])
def test_ddp_hook_matches_default_and_all_reduce_matches_native(tmp_path: Path, world: int) -> None:
    mp.start_processes(
        _worker, args=(world, str(tmp_path / "store"), str(tmp_path)), nprocs=world, join=True, start_method="spawn"
    )
    results = [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]
    for res in results:
        # Every rule of the profile was exercised by the size sweep.
        assert set(res["algos"].values()) == {
            "native",
            "recursive-doubling",
            "tree",
            "two-tree",
            "rabenseifner",
            "ring",
        }
        assert len(res["default"]) == len(res["hooked"]) == 6
        for a, b in zip(res["default"], res["hooked"], strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        # The hook changed nothing DDP relies on: all ranks hold the same parameters.
        for a, b in zip(results[0]["hooked"], res["hooked"], strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
        assert f"no rules for {world} ranks" in res["mismatch"]
    if world > 2:
        # The subgroup of two took the profile's two-rank rules, not the world's (ring at 40 KB).
        assert [r.get("pair_algo") for r in results] == ["recursive-doubling", "recursive-doubling", None]


def _recording(seen: list[int]) -> Any:
    """torch's own allreduce_hook, noting each bucket's size in bytes."""

    def hook(state: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        seen.append(bucket.buffer().numel() * bucket.buffer().element_size())
        return allreduce_hook(state, bucket)

    # DDP compares the annotations with the objects; this module's are strings (postponed evaluation).
    hook.__annotations__ = {"state": Any, "bucket": dist.GradBucket, "return": torch.futures.Future[torch.Tensor]}
    return hook


def _register_worker(rank: int, world: int, store_path: str, out_dir: str) -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    import collbench.torch as ctorch
    from collbench.errors import ConfigError

    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
    try:
        # _model()'s gradients: 12 B (the smallest bias) to 13,068 B in all. DDP's default caps give one
        # bucket of all of them (13,068 B); caps of 4,194 B (bucket_cap_mb=0.004) give 8,716 and 4,352 B
        # once DDP rebuilds its buckets, 13,068 B for the first step.
        ring = {"segment_bytes": None, "layout": "rank-order"}
        profiles = {
            "all native": (Rule("all-reduce", 0, None, "native", P),),
            "collbench below the smallest gradient": (
                Rule("all-reduce", 0, 11, "ring", ring),
                Rule("all-reduce", 12, None, "native", P),
            ),
            "collbench above all gradients": (
                Rule("all-reduce", 0, 13068, "native", P),
                Rule("all-reduce", 13069, None, "ring", ring),
            ),
            # A bucket could hold 12 to 13,068 B, but this model's never hold less than 4,352 B.
            "collbench below the buckets": (
                Rule("all-reduce", 0, 1000, "ring", ring),
                Rule("all-reduce", 1001, None, "native", P),
            ),
            "collbench at the whole model": (
                Rule("all-reduce", 0, 13000, "native", P),
                Rule("all-reduce", 13001, None, "ring", ring),
            ),
        }
        results: dict[str, Any] = {}
        for cap in (None, 0.004):
            for name, rules in profiles.items():
                profile = Profile(fingerprint="t", host="t", backend="gloo", rule_sets=(RuleSet(world, 1, rules),))
                model = DDP(_model()) if cap is None else DDP(_model(), bucket_cap_mb=cap)
                with warnings.catch_warnings(record=True) as said:
                    warnings.simplefilter("always")
                    hook = ctorch.register_comm_hook(model, profile)
                told = [str(w.message) for w in said if w.category is ctorch.DDPDefaultPath]
                results[name, cap] = (hook is not None, len(model._comm_hooks), told)
        # The sizes DDP hands a hook, against those register_comm_hook looked the rules up for.
        for cap in (None, 0.004):
            model = DDP(_model()) if cap is None else DDP(_model(), bucket_cap_mb=cap)
            seen: list[int] = []
            model.register_comm_hook(None, _recording(seen))
            for _ in range(3):
                model(torch.randn(4, 16)).sum().backward()
            results["seen", cap] = (sorted(set(seen)), bucket_bytes(model))
        try:
            ctorch.register_comm_hook(_model(), make_profile(world))
        except ConfigError as exc:
            results["not ddp"] = str(exc)
        torch.save(results, f"{out_dir}/register{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_register_comm_hook_keeps_ddps_own_all_reduce_where_every_bucket_size_is_native(tmp_path: Path) -> None:
    params = [p.numel() * p.element_size() for p in _model().parameters()]
    assert (min(params), sum(params)) == (12, 13068)  # the bounds the profiles below are drawn around
    mp.start_processes(
        _register_worker, args=(2, str(tmp_path / "store"), str(tmp_path)), nprocs=2, join=True, start_method="spawn"
    )
    for rank in range(2):
        res = torch.load(tmp_path / f"register{rank}.pt")
        assert res["seen", None] == ([13068], (13068,))
        assert res["seen", 0.004] == ([4352, 8716, 13068], (4352, 8716, 13068))
        for cap in (None, 0.004):
            for name in ("all native", "collbench below the smallest gradient", "collbench above all gradients"):
                assert res[name, cap][:2] == (False, 0)
            # Failed before the buckets were computed as DDP computes them: a bucket of the 12 B bias
            # alone was thought possible, and the hook was registered.
            assert res["collbench below the buckets", cap][:2] == (False, 0)
            assert res["collbench at the whole model", cap][:2] == (True, 1)
            told = res["collbench below the buckets", cap][2]
            # Said on rank 0 only, naming the sizes looked up.
            assert len(told) == (rank == 0)
            shown = "(12.8 KiB)" if cap is None else "(4.25 KiB, 8.51 KiB, 12.8 KiB)"
            assert rank != 0 or (shown in told[0] and "no hook registered" in told[0])
        assert "needs a DistributedDataParallel model, got Sequential" in res["not ddp"]


# --- all-to-all, scatter, gather, the ring shift and barrier ---------------------------------------------

BLOCKS = (1, 7, 33, 100, 700)
"""Elements per rank's block: float64 buffers of world * block elements cross every rule below."""


def new_ops_profile(world: int) -> Profile:
    rules = (
        Rule("all-to-all", 0, 255, "native", P),
        Rule("all-to-all", 256, 1023, "pairwise", P),
        Rule("all-to-all", 1024, 4095, "bruck", P),
        Rule("all-to-all", 4096, None, "linear", P),
        Rule("scatter", 0, 255, "native", P),
        Rule("scatter", 256, 4095, "binomial", P),
        Rule("scatter", 4096, None, "linear", P),
        Rule("gather", 0, 255, "native", P),
        Rule("gather", 256, 4095, "binomial", P),
        Rule("gather", 4096, None, "linear", P),
        Rule("sendrecv", 0, 255, "native", P),
        Rule("sendrecv", 256, None, "ring", P),
        Rule("barrier", 0, None, "tree" if world == 2 else "dissemination", P),
    )
    sets = [RuleSet(world, 1, rules)]
    if world != 2:
        # A subgroup of two takes these: collbench's algorithms at every size, so the group's ranks are mapped.
        pair = (
            Rule("scatter", 0, None, "binomial", P),
            Rule("gather", 0, None, "linear", P),
            Rule("sendrecv", 0, 99, "native", P),
            Rule("sendrecv", 100, None, "ring", P),
            Rule("all-to-all", 0, None, "pairwise", P),
        )
        sets.append(RuleSet(2, 1, pair))
    return Profile(fingerprint="test", host="test", backend="gloo", rule_sets=tuple(sets))


def _new_ops_worker(rank: int, world: int, store_path: str, out_dir: str) -> None:
    import time

    import collbench.torch as ctorch

    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
    try:
        profile = new_ops_profile(world)
        used: dict[str, list[str]] = {"all-to-all": [], "scatter": [], "gather": [], "sendrecv": []}
        root = world - 1  # not rank 0: the schedules take any root
        for block in BLOCKS:
            n = world * block
            data = torch.arange(n, dtype=torch.float64) + 1000 * rank
            ours, ref = torch.empty(n, dtype=torch.float64), torch.empty(n, dtype=torch.float64)
            used["all-to-all"].append(str(ctorch.all_to_all_single(ours, data, profile=profile).algo))
            dist.all_to_all_single(ref, data)
            assert torch.equal(ours, ref), ("all-to-all", block)

            pieces = list(data.split(block)) if rank == root else None
            ours_b, ref_b = torch.empty(block, dtype=torch.float64), torch.empty(block, dtype=torch.float64)
            used["scatter"].append(str(ctorch.scatter(ours_b, pieces, profile=profile, src=root).algo))
            dist.scatter(ref_b, pieces, src=root)
            assert torch.equal(ours_b, ref_b), ("scatter", block)

            mine = data[:block].clone()
            got = [torch.empty(block, dtype=torch.float64) for _ in range(world)] if rank == root else None
            want = [torch.empty(block, dtype=torch.float64) for _ in range(world)] if rank == root else None
            used["gather"].append(str(ctorch.gather(mine, got, profile=profile, dst=root).algo))
            dist.gather(mine, want, dst=root)
            if got is not None and want is not None:
                assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True)), ("gather", block)

            shifted = torch.empty(n, dtype=torch.float64)
            used["sendrecv"].append(str(ctorch.ring_shift(shifted, data, profile=profile).algo))
            # torch's own ring shift: every rank sends to the next and receives from the previous.
            expect = torch.empty(n, dtype=torch.float64)
            ops = [dist.P2POp(dist.isend, data, (rank + 1) % world), dist.P2POp(dist.irecv, expect, (rank - 1) % world)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()
            assert torch.equal(shifted, expect), ("sendrecv", block)
        if world > 2:
            # Every rank creates the group (torch's rule); ranks 1 and 2 call, with global ranks as src/dst.
            pair_group = dist.new_group([1, 2])
            if rank in (1, 2):
                used["pair"] = _pair_calls(ctorch, profile, pair_group, rank)
        # Barrier: every rank arrives late by its rank's share of a second, and none leaves before the last arrives.
        time.sleep(0.3 * rank)
        Path(out_dir, f"arrived{rank}").touch()
        barrier_algo = str(ctorch.barrier(profile=profile).algo)
        arrived = sorted(p.name for p in Path(out_dir).glob("arrived*"))
        torch.save({"used": used, "barrier": barrier_algo, "arrived": arrived}, f"{out_dir}/newops{rank}.pt")
    finally:
        dist.destroy_process_group()


def _pair_calls(ctorch: Any, profile: Profile, group: Any, rank: int) -> list[str]:
    """Scatter from global rank 2, gather to it, a ring shift and an all-to-all in the group {1, 2}, each
    checked against torch's own call on the group; returns the algorithms that ran."""
    algos = []
    data = torch.arange(10, dtype=torch.float64) + 100 * rank
    pieces = list(data.split(5)) if rank == 2 else None
    ours, ref = torch.empty(5, dtype=torch.float64), torch.empty(5, dtype=torch.float64)
    algos.append(ctorch.scatter(ours, pieces, profile=profile, src=2, group=group).algo)
    dist.scatter(ref, pieces, src=2, group=group)
    assert torch.equal(ours, ref)
    got = [torch.empty(5, dtype=torch.float64) for _ in range(2)] if rank == 2 else None
    want = [torch.empty(5, dtype=torch.float64) for _ in range(2)] if rank == 2 else None
    algos.append(ctorch.gather(data[:5], got, profile=profile, dst=2, group=group).algo)
    dist.gather(data[:5], want, dst=2, group=group)
    if got is not None and want is not None:
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    other = 3 - rank  # in a group of two, the next rank and the previous are the other one
    for n in (10, 20):  # 80 B: torch's own send/recv to the group's global ranks; 160 B: collbench's ring
        shifted = torch.empty(n, dtype=torch.float64)
        algos.append(ctorch.ring_shift(shifted, data.repeat(2)[:n], profile=profile, group=group).algo)
        assert torch.equal(shifted, (torch.arange(10, dtype=torch.float64) + 100 * other).repeat(2)[:n])
    out, ref_out = torch.empty(10, dtype=torch.float64), torch.empty(10, dtype=torch.float64)
    algos.append(ctorch.all_to_all_single(out, data, profile=profile, group=group).algo)
    dist.all_to_all_single(ref_out, data, group=group)
    assert torch.equal(out, ref_out)
    return [str(a) for a in algos]  # plain text: torch.load(weights_only) refuses AlgoRef


@pytest.mark.parametrize("world", [2, 3])
def test_new_ops_match_torch_and_follow_the_profile(tmp_path: Path, world: int) -> None:
    mp.start_processes(
        _new_ops_worker,
        args=(world, str(tmp_path / "store"), str(tmp_path)),
        nprocs=world,
        join=True,
        start_method="spawn",
    )
    profile = new_ops_profile(world)
    for rank in range(world):
        res = torch.load(tmp_path / f"newops{rank}.pt")
        pair = res["used"].pop("pair", None)
        in_pair = world == 3 and rank in (1, 2)
        assert pair == (["binomial", "linear", "native", "ring", "pairwise"] if in_pair else None)
        for op, algos in res["used"].items():
            # The rule of each call's size (float64, world * block elements) is the one that ran.
            want = [profile.select(op, world * b * 8, world_size=world).algo for b in BLOCKS]
            assert algos == want, op
            assert set(algos) == {r.algo for r in profile.rules_for(op)}, op  # every rule was exercised
        assert res["barrier"] == ("tree" if world == 2 else "dissemination")
        assert res["arrived"] == [f"arrived{r}" for r in range(world)]


# --- tensors that require grad, as torch.distributed takes them ------------------------------------------


def _leaf(count: int) -> torch.Tensor:
    """A parameter's kind of tensor: a leaf that requires grad, written in place by the call."""
    return torch.zeros(count, dtype=torch.float64, requires_grad=True)


def _written_leaf(tensor: torch.Tensor, want: torch.Tensor) -> bool:
    """Whether the call wrote ``want`` into ``tensor`` and left it a leaf, as torch's own call leaves it."""
    return tensor.is_leaf and tensor.requires_grad and torch.equal(tensor.detach(), want)


def _grad_worker(rank: int, world: int, store_path: str, out_dir: str) -> None:
    from datetime import timedelta

    import collbench.torch as ctorch

    # A call that raises on one rank only leaves the other waiting: the timeout ends the test instead.
    dist.init_process_group(
        "gloo", init_method=f"file://{store_path}", rank=rank, world_size=world, timeout=timedelta(seconds=60)
    )
    try:
        profile = new_ops_profile(world)
        scans = (Rule("scan", 0, None, "recursive-doubling", P), Rule("exscan", 0, None, "linear", P))
        scan_profile = Profile(fingerprint="t", host="t", backend="gloo", rule_sets=(RuleSet(world, 1, scans),))
        said: list[warnings.WarningMessage] = []
        for block in (1, 100):  # 16 B: native for every op; 1,600 B: collbench's schedules
            n = world * block
            data = torch.arange(n, dtype=torch.float64) + 1000 * rank
            out, ref = _leaf(n), torch.empty(n, dtype=torch.float64)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                ctorch.all_to_all_single(out, data, profile=profile)
            said += caught
            dist.all_to_all_single(ref, data)
            assert _written_leaf(out, ref), ("all-to-all", block)
            # An input that requires grad gives no gradient to the output, as torch's call does not.
            out = torch.empty(n, dtype=torch.float64)
            ctorch.all_to_all_single(out, data.clone().requires_grad_(), profile=profile)
            assert torch.equal(out, ref) and not out.requires_grad, ("all-to-all from a leaf", block)

            pieces = [p.clone().requires_grad_() for p in data.split(block)] if rank == 0 else None
            got, ref_b = _leaf(block), torch.empty(block, dtype=torch.float64)
            ctorch.scatter(got, pieces, profile=profile, src=0)
            dist.scatter(ref_b, [p.detach() for p in pieces] if pieces else None, src=0)
            assert _written_leaf(got, ref_b), ("scatter", block)

            gathered = [_leaf(block) for _ in range(world)] if rank == 0 else None
            want = [torch.empty(block, dtype=torch.float64) for _ in range(world)] if rank == 0 else None
            ctorch.gather(data[:block].clone().requires_grad_(), gathered, profile=profile, dst=0)
            dist.gather(data[:block].clone(), want, dst=0)
            if gathered is not None and want is not None:
                assert all(_written_leaf(g, w) for g, w in zip(gathered, want, strict=True)), ("gather", block)

            shifted = _leaf(n)
            ctorch.ring_shift(shifted, data.clone().requires_grad_(), profile=profile)
            previous = (rank - 1) % world
            assert _written_leaf(shifted, torch.arange(n, dtype=torch.float64) + 1000 * previous), ("shift", block)

            for exclusive in (False, True):
                param = torch.full((block,), float(rank + 1), dtype=torch.float64, requires_grad=True)
                ctorch.scan(param, profile=scan_profile, exclusive=exclusive)
                upto = rank if exclusive and rank else rank + 1  # exscan's rank 0 keeps its tensor
                assert _written_leaf(param, torch.full((block,), upto * (upto + 1) / 2)), ("scan", exclusive, block)
        # avg at a native size: the backend's sum, then a division in place (gloo has no AVG).
        param = torch.full((7,), float(rank), requires_grad=True)
        ctorch.all_reduce(param, profile=make_profile(world), op="avg")
        assert _written_leaf(param, torch.full((7,), (world - 1) / 2)), "avg"
        # The group's shape is said at the user's line (this file), not at torch's no_grad wrapper.
        shown = [w.filename for w in said if w.category is ctorch.GroupShape]
        assert shown == ([__file__] if rank == 0 else []), shown
        Path(out_dir, f"grad{rank}").touch()
    finally:
        dist.destroy_process_group()


def test_tensors_that_require_grad_are_written_as_torch_writes_them(tmp_path: Path) -> None:
    # Before: all_to_all_single, scatter and the ring shift at a schedule's size, gather and exscan at every
    # size raised "a leaf Variable that requires grad is being used in an in-place operation", scatter
    # from such a list "cat(): functions with out=... arguments don't support automatic differentiation",
    # all_reduce's avg at a native size the same leaf error; an output from such an input required grad.
    mp.start_processes(
        _grad_worker, args=(2, str(tmp_path / "store"), str(tmp_path)), nprocs=2, join=True, start_method="spawn"
    )
    assert sorted(p.name for p in tmp_path.glob("grad*")) == ["grad0", "grad1"]
