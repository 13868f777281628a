"""The node count of an MPI sweep's rows is the number of distinct hosts its ranks name.

The harness (csrc/mpi_harness.c) gathers every rank's ``MPI_Get_processor_name`` on rank 0 and counts
the distinct names; a preloaded shim (hosts_shim.c) makes rank r say "node<r % N>", so one host stands
for a job over N, the ranks of each name spread over the world rather than in blocks.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from ompi_observer import need_open_mpi

from collbench.runtime.mpi.ompi_sweep import run_mpi_sweep
from collbench.runtime.mpi.ompi_tools import MPIRUN_ARGS_ENV
from collbench.runtime.sweep.plan import SweepConfig, validate

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.mpi


@pytest.mark.parametrize(("ranks", "nodes"), [(3, 2), (4, 3), (4, 1)])
def test_the_rows_count_the_distinct_hosts_of_the_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ranks: int, nodes: int
) -> None:
    need_open_mpi()
    shim = tmp_path / "hosts.so"
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O1", "-Wall", "-shared", "-fPIC", "-o", shim, HERE / "hosts_shim.c"], check=True, timeout=120)
    monkeypatch.setenv("COLLBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv(MPIRUN_ARGS_ENV, f"-x LD_PRELOAD={shim} -x COLLBENCH_TEST_NODES={nodes}")
    config = SweepConfig(
        backend="mpi",
        world_size=ranks,
        min_bytes=64,
        max_bytes=64,
        iters=2,
        warmup=1,
        ops=("all-reduce",),
        algos=("native",),
        stream=tmp_path / "rows.jsonl",
    )
    rows = run_mpi_sweep(validate(config), lambda _event: None)
    assert rows and {(r.world_size, r.nodes) for r in rows} == {(ranks, min(nodes, ranks))}
    assert all(r.wrong == 0 for r in rows)
