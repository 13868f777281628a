"""World size 1 on NCCL: no algorithm runs, so none is forced, named in a row, or said to have reduced.

The contract (NVIDIA/nccl, src/enqueue.cc, v2.27.7-1 to v2.30.7-1): a collective on a communicator of
one rank calls ``ncclLaunchOneRank`` (src/device/onerank.cu) before any algorithm or protocol is
chosen: out of place a ``cudaMemcpyAsync``, in place nothing (avg alone runs one kernel multiplying
by 1). ``NCCL_ALGO``/``NCCL_PROTO`` are read but never used, and no TUNING line is logged. The fakes
here are a CUDA build with one GPU (what the checks before launching see) and a loaded kernel
extension.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from collbench.backends.nccl import ONE_RANK_NO_ALGORITHM
from collbench.errors import NotApplicableError
from collbench.results.fields import CUDA_KERNEL, REDUCE_PATHS
from collbench.runtime.cuda import kernels as cuda_kernels
from collbench.runtime.host import environment
from collbench.runtime.sweep import plan, points, worker
from collbench.runtime.sweep.plan import SweepConfig
from collbench.schedules.ops import Op
from collbench.schedules.registry import algorithm_names, get_algorithm

CUDA = torch.device("cuda", 0)


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUDA build with one GPU and NCCL 2.27.7, as far as the checks made before launching can tell."""
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    monkeypatch.setattr(environment, "nccl_version", lambda: "2.27.7")
    for name in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "NCCL_COLLNET_ENABLE"):
        monkeypatch.delenv(name, raising=False)


def test_forced_variants_are_skipped_on_one_rank(one_gpu: None) -> None:
    # Before: native:ring and native:nvls ran on one rank and their rows said Ring and NVLS.
    config = SweepConfig(world_size=1, backend="nccl", algos=("native", "native:ring", "native:nvls", "native:*/ll"))
    skipped: list[str] = []
    per_op = plan.resolve_algos(config, [Op.ALL_REDUCE, Op.ALL_GATHER], "nccl", skipped)
    assert per_op == {Op.ALL_REDUCE: ["native"], Op.ALL_GATHER: ["native"]}
    assert skipped == [
        f"{name}: {ONE_RANK_NO_ALGORITHM}, so there is nothing to force; skipped"
        for name in ("native:ring", "native:nvls", "native:*/ll")
    ]


def test_on_two_ranks_they_are_measured(one_gpu: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    config = SweepConfig(world_size=2, backend="nccl", algos=("native:ring", "native:nvls"))
    skipped: list[str] = []
    assert plan.resolve_algos(config, [Op.ALL_REDUCE], "nccl", skipped) == {
        Op.ALL_REDUCE: ["native:ring", "native:nvls"]
    }
    assert skipped == []


def test_only_forced_variants_on_one_rank_is_one_line(one_gpu: None, tmp_path: Path) -> None:
    config = SweepConfig(world_size=1, backend="nccl", algos=("native:pat",), stream=tmp_path / "s.jsonl")
    with pytest.raises(NotApplicableError, match="NCCL runs no algorithm on one rank") as info:
        plan.validate(config)
    assert "\n" not in str(info.value)


def _job(backend: str, algos: tuple[str, ...], tmp_path: Path) -> plan.SweepJob:
    config = SweepConfig(world_size=1, backend="gloo", algos=("ring",), min_bytes=64, max_bytes=64)
    job = plan.validate(dataclasses.replace(config, stream=tmp_path / "s.jsonl"))
    return dataclasses.replace(job, backend=backend, algos=((Op.ALL_REDUCE, algos),))


def test_native_rows_on_one_rank_say_why_they_name_no_algorithm(tmp_path: Path) -> None:
    cpu = torch.device("cpu")
    _, notes = points.plan_points(_job("nccl", ("ring", "native"), tmp_path), 1, cpu, "rank-order")
    assert f"{ONE_RANK_NO_ALGORITHM}: native rows carry no nccl_algo or nccl_proto" in notes
    for backend, world_size, algos in (("nccl", 2, ("native",)), ("gloo", 1, ("native",)), ("nccl", 1, ("ring",))):
        _, notes = points.plan_points(_job(backend, algos, tmp_path), world_size, cpu, "rank-order")
        assert not any(ONE_RANK_NO_ALGORITHM in n for n in notes)


def _point(algo: str, op: Op = Op.ALL_REDUCE) -> points.SweepPoint:
    return points.SweepPoint(op, algo, 4096, 1024, True, 1 << 20, "rank-order")


def test_nothing_is_reduced_on_one_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: a one-rank ring on a GPU with the kernels built said cuda-kernel, though no kernel ran.
    monkeypatch.setattr(cuda_kernels, "load_extension", lambda: object())
    monkeypatch.delenv("COLLBENCH_NO_CUDA_KERNELS", raising=False)
    assert worker._reduce_path(_point("ring"), CUDA, torch.float32, 1) is None
    assert worker._reduce_path(_point("ring"), CUDA, torch.float32, 2) == CUDA_KERNEL
    assert worker._reduce_path(_point("native"), CUDA, torch.float32, 2) is None
    assert worker._reduce_path(_point("ring", Op.ALL_GATHER), CUDA, torch.float32, 2) is None
    assert CUDA_KERNEL in REDUCE_PATHS


REDUCING_PAIRS = [
    (algo, op)
    for algo in algorithm_names()
    # hierarchical is refused on one rank (one node): tests/unit/test_hierarchical.py.
    if algo != "native" and not get_algorithm(algo).needs_nodes
    for op in Op
    if op.spec.reduces and get_algorithm(algo).supports(op)
]


@pytest.mark.parametrize(("algo", "op"), REDUCING_PAIRS, ids=[f"{a}-{o.value}" for a, o in REDUCING_PAIRS])
def test_a_schedule_of_one_rank_has_nothing_to_reduce(algo: str, op: Op) -> None:
    # Why None is right on one rank: no step receives, so reduce_many never runs.
    schedule = get_algorithm(algo).build(op, 1, 1024)
    assert all(not step.recvs for step in schedule.steps[0])
