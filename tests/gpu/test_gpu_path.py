"""The GPU path on a real GPU machine, at the largest world size it has (one rank per GPU).

Everything that runs on one GPU runs on one: the kernel build and the executor's reductions through
it, the on-device check of a 256 MiB point, and which GPU each rank's ``cuda:r`` is. Only what needs
two ranks on two GPUs skips on a one-GPU machine, saying why: NCCL refuses two ranks on one GPU, runs
no algorithm at world size 1 (``ncclLaunchOneRank``: a copy, or nothing in place), and a probe needs
a pair. benchmarks/gpu_first_run.py runs these with every other first-run check.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.nccl.support import CommShape, unsupported_reason
from collbench.nccl.variants import all_variants, parse_version
from collbench.runtime.cuda import kernels as cuda_kernels
from collbench.runtime.cuda import nccl
from collbench.runtime.executor.reduce import reduce_many
from collbench.schedules import registry
from collbench.schedules.ops import Op
from collbench.topology.sources import discover_topology

pytestmark = pytest.mark.gpu

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0


def two_gpus(why: str) -> pytest.MarkDecorator:
    """Skip below 2 GPUs, saying why the test needs them."""
    return pytest.mark.skipif(GPUS < 2, reason=f"needs 2+ GPUs: {why}; this machine has {GPUS}")


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _sweep(tmp_path: Path, *args: str) -> tuple[list[dict[str, object]], str]:
    out = tmp_path / "rows.jsonl"
    result = CliRunner().invoke(
        app, ["sweep", "--backend", "nccl", "--ranks", str(GPUS), *args, "--output", str(out), "--timeout", "300"]
    )
    assert result.exit_code == 0, result.output
    return _rows(out), result.output


def test_the_kernels_build_and_the_executor_reduces_with_them() -> None:
    # On a GPU machine the kernels must build: a fallback here is a failure, with its one line as the message.
    said: list[str] = []
    built = cuda_kernels.build_extension(said.append)
    assert built.module is not None, said
    # A first build says that it starts and how long it took; a cached one says nothing.
    assert said == [] or (len(said) == 2 and said[0].startswith("building") and said[1].startswith("built")), said
    cuda = torch.device("cuda", 0)
    assert cuda_kernels.reduce_path(cuda, torch.float32) == "cuda-kernel"
    # Whole numbers below 2^24 add exactly in float32: any order gives the same sum.
    inputs = [torch.randint(-1000, 1000, (1 << 20,), device=cuda).float() for _ in range(4)]
    expected = inputs[0] + inputs[1] + inputs[2] + inputs[3]
    dst = inputs[0].clone()
    assert cuda_kernels.reduce_many_cuda(dst, inputs[1:], "sum")
    assert torch.equal(dst, expected)
    dst = inputs[0].clone()
    reduce_many(dst, inputs[1:], "max")  # the executor's entry point
    assert torch.equal(dst, torch.stack(inputs).amax(dim=0))


def test_a_large_point_checks_on_the_device(tmp_path: Path) -> None:
    # A 256 MiB all-reduce and reduce check their data on the GPUs, in chunks, and find nothing wrong.
    rows, _ = _sweep(
        tmp_path, "--op", "all-reduce,reduce", "--algo", "ring,native", "-b", "256M", "-e", "256M", "-n", "3"
    )
    assert {(r["op"], r["algo"]) for r in rows} == {
        (op, algo) for op in ("all-reduce", "reduce") for algo in ("ring", "native")
    }
    assert all(r["wrong"] == 0 and r["size_bytes"] == 256 << 20 for r in rows), rows


def test_each_rank_describes_the_gpu_cuda_gives_it() -> None:
    # Rank r runs on cuda:r: the topology's r-th GPU is that device (its UUID, as CUDA reports it).
    topo = discover_topology(ranks=GPUS)
    assert len(topo.gpus) == GPUS
    for rank, gpu in enumerate(topo.gpus):
        cuda_uuid = str(torch.cuda.get_device_properties(rank).uuid)
        assert gpu.uuid in (f"GPU-{cuda_uuid}", cuda_uuid), (rank, gpu.uuid, cuda_uuid)


@two_gpus("NCCL runs no algorithm at world size 1, so forced variants would name algorithms that never ran")
@pytest.mark.parametrize("extra", [(), ("--cuda-graph",)], ids=["events", "cuda-graph"])
def test_forced_variants_at_the_largest_world_size(tmp_path: Path, extra: tuple[str, ...]) -> None:
    # Every variant NCCL can run here is measured, the others skipped in one line each, NCCL's choice
    # read from its untimed call, graphs re-used across -n auto batches.
    version = parse_version(nccl.nccl_versions()["backend_version"])
    variants = [v.name for v in all_variants()]
    rows, output = _sweep(
        tmp_path, "--op", "all", "--algo", ",".join(variants), "-b", "1K", "-e", "4M", "-f", "16", *extra
    )
    shape = CommShape(world_size=GPUS, nodes=1, collnet=os.environ.get("NCCL_COLLNET_ENABLE") == "1")
    for op in ("all-reduce", "reduce-scatter", "all-gather", "broadcast", "reduce"):
        for v in all_variants():
            reason = unsupported_reason(op, v.algo, None, version, shape)
            measured = any(r["op"] == op and r["algo"] == v.name for r in rows)
            if reason is not None:
                assert not measured and f"{v.name} {op}: {reason}; skipped" in output
            elif v.algo in ("NVLS",):
                continue  # needs NVSwitch multicast: NCCL may still refuse it, as that variant's failure
            else:
                assert measured, f"no rows for {v.name} {op}"
    for r in rows:
        assert r["wrong"] in ((-1,) if r["op"] == "barrier" else (0,)) and r["world_size"] == GPUS, r
        if Op(str(r["op"])).spec.nccl_tuned:  # the others are grouped send/recv: no algorithm to name
            assert r["nccl_algo"], r  # from NCCL's TUNING line (2.20+) or the forced variant


NEW_OPS = ("all-to-all", "scatter", "gather", "barrier", "sendrecv")


@pytest.mark.parametrize("extra", [(), ("--cuda-graph",)], ids=["events", "cuda-graph"])
def test_the_newer_ops_run_checked_at_the_largest_world_size(tmp_path: Path, extra: tuple[str, ...]) -> None:
    # One rank per GPU, one GPU included (a world of one: NCCL's send/recv to itself, a shift that is a
    # copy). Native is torch's all_to_all_single, scatter, gather, batch_isend_irecv and, for barrier,
    # the one-element all-reduce ProcessGroupNCCL's barrier runs; collbench's own schedules beside them.
    rows, output = _sweep(
        tmp_path, "--op", ",".join(NEW_OPS), "--algo", "all", "-b", "1K", "-e", "4M", "-f", "16", *extra
    )
    for op in NEW_OPS:
        ran = {str(r["algo"]) for r in rows if r["op"] == op}
        assert ran == {s.name for s in registry.algorithms_for(Op(op))}, (op, ran, output)
    for r in rows:
        assert r["backend"] == "nccl" and r["world_size"] == GPUS, r
        if r["op"] == "barrier":
            assert (r["size_bytes"], r["count"], r["wrong"], r["algbw_gbps"]) == (0, 0, -1, 0.0), r
        else:
            assert r["wrong"] == 0 and float(str(r["algbw_gbps"])) > 0, r
        assert r["nccl_algo"] == "" and r["reduce_path"] is None, r
    assert "barrier native on nccl: timed as the one-element all-reduce" in output


@two_gpus("at world size 1 an own algorithm has no peer's data to reduce")
def test_own_algorithms_record_the_cuda_kernel_path(tmp_path: Path) -> None:
    # The kernels build (or say why not), and every row says which path reduced.
    rows, output = _sweep(tmp_path, "--op", "all-reduce", "--algo", "ring,native", "-b", "1M", "-e", "1M")
    paths = {str(r["algo"]): r["reduce_path"] for r in rows}
    assert paths["native"] is None
    if "CUDA reduction kernels are not used" in output:
        assert paths["ring"] == "torch-ops"
    else:
        assert paths["ring"] == "cuda-kernel"


@two_gpus("a probe times transfers between pairs of GPUs")
def test_probe_times_transfers_on_the_device() -> None:
    # Measured GPU links are within what their kind can carry and no faster than the known link.
    result = CliRunner().invoke(app, ["discover", "--probe", "--ranks", str(GPUS), "--backend", "nccl", "--json"])
    assert result.exit_code == 0, result.output
    links = [lk for lk in json.loads(result.output)["links"] if lk.get("source") == "measured"]
    assert links and all(0.1 < float(lk["bandwidth_gbps"]) < 1000 for lk in links)


@two_gpus("reversing the order of one GPU changes nothing")
def test_ranks_follow_cuda_visible_devices_order(monkeypatch: pytest.MonkeyPatch) -> None:
    # With the GPUs listed backwards, rank 0 (cuda:0) is the last GPU by bus id.
    order = ",".join(str(i) for i in reversed(range(GPUS)))
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", order)
    topo = discover_topology(ranks=GPUS)
    # This process's CUDA was initialised before the variable changed: compare with NVML's view instead.
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    plain = discover_topology(ranks=GPUS)
    assert [d.bus_id for d in topo.gpus] == [d.bus_id for d in reversed(plain.gpus)]
