"""NCCL on a real GPU: forced variants in their own communicators, CUDA-event timing, the versions, a
world-size-1 sweep end to end over every algorithm, and NCCL's TUNING lines read back (2+ GPUs)."""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.nccl.algorithms import algorithms_for
from collbench.nccl.support import CommShape, unsupported_reason
from collbench.nccl.tuning_log import choice_for
from collbench.nccl.variants import NativeVariant, all_variants, parse_version
from collbench.runtime.cuda import nccl
from collbench.runtime.cuda.timing import CudaEventTimer

pytestmark = pytest.mark.gpu


@pytest.fixture
def one_rank_group(tmp_path: Path) -> Iterator[None]:
    """torch.distributed with NCCL, world size 1, in this process."""
    store = dist.FileStore(str(tmp_path / "store"), 1)
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_versions_on_a_gpu() -> None:
    versions = nccl.nccl_versions()
    assert parse_version(versions["backend_version"]) >= (2, 0, 0)
    assert versions["cuda_version"] == torch.version.cuda
    assert torch.cuda.get_device_name(0) in versions["device_name"]
    nccl.check_nccl_usable(1)
    nccl.check_nccl_usable(torch.cuda.device_count())


@pytest.mark.parametrize("cuda_graph", [False, True])
def test_event_timer(cuda_graph: bool) -> None:
    x = torch.randn(1 << 20, device="cuda")

    def work() -> None:
        x.mul_(1.0001)

    work()
    timer = CudaEventTimer(cuda_graph=cuda_graph)
    times = timer.time_iterations(work, 7)
    assert len(times) == len(timer.sample_iters(7)) == (7 if cuda_graph else 1)
    assert all(math.isfinite(t) and t > 0 for t in times)
    many = CudaEventTimer(cuda_graph=cuda_graph).time_iterations(work, 45)
    assert len(many) == (45 if cuda_graph else 3)  # rounds of 15: none longer than ROUND_ITERS


def test_every_variant_in_its_own_communicator(one_rank_group: None) -> None:
    version = parse_version(nccl.nccl_versions()["backend_version"])
    for variant in all_variants():
        if variant.algo is not None and variant.algo not in algorithms_for(version):
            continue
        before = {k: os.environ.get(k) for k in ("NCCL_ALGO", "NCCL_PROTO")}
        with nccl.variant_group(variant) as group:
            x = torch.full((4099,), 3.0, device="cuda")
            dist.all_reduce(x, group=group)
            assert float(x.min()) == 3.0 == float(x.max())
            call = functools.partial(dist.all_reduce, x, group=group)
            for graph in (False, True):
                timer = CudaEventTimer(cuda_graph=graph)
                times = timer.time_iterations(call, 4)
                assert len(times) == len(timer.sample_iters(4)) and all(t > 0 for t in times)
        assert {k: os.environ.get(k) for k in ("NCCL_ALGO", "NCCL_PROTO")} == before


def _sweep(tmp_path: Path, algos: str, *extra: str) -> list[dict[str, object]]:
    out = tmp_path / "rows.jsonl"
    args = ["sweep", "--ranks", "1", "--backend", "nccl", "--op", "all-reduce", "--algo", algos]
    args += ["-b", "1K", "-e", "64K", "-f", "8", "-n", "5", "-w", "1", "--output", str(out), "--format", "json"]
    result = CliRunner().invoke(app, [*args, *extra])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("extra", [(), ("--cuda-graph",)], ids=["events", "cuda-graph"])
def test_sweep_world_size_one_every_algorithm(tmp_path: Path, extra: tuple[str, ...]) -> None:
    version = parse_version(nccl.nccl_versions()["backend_version"])
    one = CommShape(world_size=1, nodes=1)
    # The forced variants NCCL could run for all-reduce on one node: on one rank it runs none of them
    # (ncclLaunchOneRank, NCCL's src/enqueue.cc), so the sweep skips them and measures plain native.
    forced = [v for v in all_variants() if unsupported_reason("all-reduce", v.algo, None, version, one) is None]
    forced = [v for v in forced if v.name != "native"]
    names = ["all", "native", *(v.name for v in forced)]
    rows = _sweep(tmp_path, ",".join(names), *extra)
    seen = {str(r["algo"]) for r in rows}
    assert "native" in seen
    assert not seen & {v.name for v in forced}, "a forced variant ran on one rank"
    assert len(seen) > 1, "collbench's own algorithms ran too"
    for r in rows:
        assert r["backend"] == "nccl" and r["world_size"] == 1
        assert r["wrong"] == 0, r
        assert float(str(r["time_us"])) > 0
        assert r["backend_version"] and r["device_name"] and r["cuda_version"]
        assert r["nccl_algo"] == "" and r["nccl_proto"] == "", r  # no algorithm ran
        assert r["reduce_path"] is None, r  # nothing reduced on one rank


def _two_rank_worker(rank: int, store_path: str, log_dir: str) -> None:
    os.environ.update(nccl.tuning_log_env(Path(log_dir)))  # before this process's first NCCL call
    torch.cuda.set_device(rank)
    store = dist.FileStore(store_path, 2)
    dist.init_process_group("nccl", store=store, rank=rank, world_size=2)
    try:
        for variant in (NativeVariant(), NativeVariant("Ring", "LL"), NativeVariant("Tree")):
            with nccl.variant_group(variant) as group:
                for n in (256, 1 << 20):
                    x = torch.ones(n, device="cuda")
                    dist.all_reduce(x, group=group)
                    torch.cuda.synchronize()
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL writes TUNING lines only with 2+ ranks")
def test_tuning_lines_of_a_real_nccl(tmp_path: Path) -> None:
    import torch.multiprocessing as mp

    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    mp.spawn(_two_rank_worker, args=(str(tmp_path / "store"), str(log_dir)), nprocs=2, join=True)
    choices = nccl.read_tuning_logs(log_dir)
    version = parse_version(nccl.nccl_versions()["backend_version"])
    if version < (2, 20, 0):
        assert choices == []  # these versions log no per-call line
        return
    assert choice_for(choices, "allreduce", 4 * (1 << 20), 2) is not None
    assert ("Ring", "LL") in {(c.algo, c.proto) for c in choices}
    assert "Tree" in {c.algo for c in choices}
