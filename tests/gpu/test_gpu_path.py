"""Issue 12 on a real GPU machine, at the largest world size it has (one rank per GPU: NCCL refuses
two ranks on one GPU, so a 1-GPU machine runs what it can and the rest is skipped, saying why).

Each test names the item it checks; benchmarks/README.md lists the commands and the figures to expect.
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
from collbench.runtime.cuda import nccl
from collbench.topology.sources import discover_topology

pytestmark = pytest.mark.gpu

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
many = pytest.mark.skipif(GPUS < 2, reason=f"needs 2+ GPUs (one rank per GPU); this machine has {GPUS}")


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _sweep(tmp_path: Path, *args: str) -> tuple[list[dict[str, object]], str]:
    out = tmp_path / "rows.jsonl"
    result = CliRunner().invoke(
        app, ["sweep", "--backend", "nccl", "--ranks", str(GPUS), *args, "--output", str(out), "--timeout", "300"]
    )
    assert result.exit_code == 0, result.output
    return _rows(out), result.output


@many
@pytest.mark.parametrize("extra", [(), ("--cuda-graph",)], ids=["events", "cuda-graph"])
def test_forced_variants_at_the_largest_world_size(tmp_path: Path, extra: tuple[str, ...]) -> None:
    # Items 2, 3, 4, 8: every variant NCCL can run here is measured, the others skipped in one line
    # each, NCCL's choice read from its untimed call, graphs re-used across -n auto batches.
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
        assert r["wrong"] == 0 and r["world_size"] == GPUS, r
        assert r["nccl_algo"], r  # from NCCL's TUNING line (2.20+) or the forced variant


@many
def test_own_algorithms_record_the_cuda_kernel_path(tmp_path: Path) -> None:
    # Item 5: the kernels build (or say why not), and every row says which path reduced.
    rows, output = _sweep(tmp_path, "--op", "all-reduce", "--algo", "ring,native", "-b", "1M", "-e", "1M")
    paths = {str(r["algo"]): r["reduce_path"] for r in rows}
    assert paths["native"] is None
    if "CUDA reduction kernels are not used" in output:
        assert paths["ring"] == "torch-ops"
    else:
        assert paths["ring"] == "cuda-kernel"


@many
def test_a_large_point_checks_on_the_device(tmp_path: Path) -> None:
    # Item 6: a 256 MiB ring all-reduce checks its data on the GPUs, in chunks, and finds nothing wrong.
    rows, _ = _sweep(
        tmp_path, "--op", "all-reduce,reduce", "--algo", "ring,native", "-b", "256M", "-e", "256M", "-n", "3"
    )
    assert rows and all(r["wrong"] == 0 for r in rows)


@many
def test_probe_times_transfers_on_the_device() -> None:
    # Item 1: measured GPU links are within what their kind can carry and no faster than the known link.
    result = CliRunner().invoke(app, ["discover", "--probe", "--ranks", str(GPUS), "--backend", "nccl", "--json"])
    assert result.exit_code == 0, result.output
    links = [lk for lk in json.loads(result.output)["links"] if lk.get("source") == "measured"]
    assert links and all(0.1 < float(lk["bandwidth_gbps"]) < 1000 for lk in links)


@many
def test_ranks_describe_the_gpus_cuda_gives_them(monkeypatch: pytest.MonkeyPatch) -> None:
    # Item 7: with the GPUs listed backwards, rank 0 (cuda:0) is the last GPU by bus id.
    order = ",".join(str(i) for i in reversed(range(GPUS)))
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", order)
    topo = discover_topology(ranks=GPUS)
    # This process's CUDA was initialised before the variable changed: compare with NVML's view instead.
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    plain = discover_topology(ranks=GPUS)
    assert [d.bus_id for d in topo.gpus] == [d.bus_id for d in reversed(plain.gpus)]
