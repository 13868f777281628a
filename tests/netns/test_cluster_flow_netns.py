"""The whole cluster flow through the CLI, on network namespaces whose links are shaped per pair,
one launcher-style job per step: ``discover --probe`` (torchrun), ``layout --from-file``, and
``sweep --topology`` (srun) against the same sweep in rank order (mpirun). Two pairs are slow
(1-2 and 3-0, both on the rank-order ring); the layout's ring must avoid them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.netns._cluster import needs_netns, netns

pytestmark = pytest.mark.netns


FAST, SLOW = 300.0, 50.0
SLOW_PAIRS = {(1, 2), (0, 3)}
JOB_S = 180.0


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "collbench.cli.app", *args]


def _ring_pairs(order: list[int]) -> set[tuple[int, int]]:
    return {tuple(sorted((order[i], order[(i + 1) % len(order)]))) for i in range(len(order))}  # type: ignore[misc]


@needs_netns
def test_probe_layout_and_sweep_through_the_cli_avoid_the_slow_pairs(tmp_path: Path) -> None:
    n = 4
    rates = [
        [0.0 if a == b else (SLOW if tuple(sorted((a, b))) in SLOW_PAIRS else FAST) for b in range(n)] for a in range(n)
    ]
    sweep = ["sweep", "--backend", "gloo", "--algo", "ring", "-b", "1M", "-e", "1M", "-n", "3", "-w", "1"]
    sweep += ["--out-of-place", "--timeout", "120", "--format", "json"]
    with netns.NamespaceCluster(rates) as cluster:
        cluster.run_job(
            _cli("discover", "--probe", "-O", "measured.yaml", "--timeout", "120"),
            cwd=tmp_path, timeout_s=JOB_S, launcher="torchrun",
        )  # fmt: skip
        layout = subprocess.run(
            _cli("layout", "--from-file", "measured.yaml", "--json"),
            cwd=tmp_path, capture_output=True, text=True, timeout=JOB_S, check=True,
        )  # fmt: skip
        cluster.run_job(
            _cli(*sweep, "--topology", "measured.yaml", "--stream", "topo.jsonl"),
            cwd=tmp_path, timeout_s=JOB_S, launcher="srun",
        )  # fmt: skip
        cluster.run_job(_cli(*sweep, "--stream", "rank-order.jsonl"), cwd=tmp_path, timeout_s=JOB_S, launcher="mpirun")
    from collbench.results.io import read_jsonl
    from collbench.topology.io import load_topology

    measured = load_topology(tmp_path / "measured.yaml")
    speeds = {tuple(sorted((int(lk.a[3:]), int(lk.b[3:])))): lk.bandwidth_gbps for lk in measured.links}
    assert set(speeds) == {(a, b) for a in range(n) for b in range(a + 1, n)}
    assert max(speeds[p] for p in SLOW_PAIRS) < min(v for p, v in speeds.items() if p not in SLOW_PAIRS)

    rings = json.loads(layout.stdout)["rings"]
    assert rings, layout.stdout
    for ring in rings:
        assert sorted(ring["order"]) == list(range(n))
        assert not _ring_pairs(ring["order"]) & SLOW_PAIRS, f"ring {ring['order']} uses a slow pair"
    assert _ring_pairs(list(range(n))) & SLOW_PAIRS  # rank order would have used them

    topo_rows = list(read_jsonl(tmp_path / "topo.jsonl"))
    plain_rows = list(read_jsonl(tmp_path / "rank-order.jsonl"))
    assert len(topo_rows) == len(plain_rows) == 1
    topo, plain = topo_rows[0], plain_rows[0]
    assert topo.wrong == 0 and plain.wrong == 0 and topo.world_size == plain.world_size == n
    assert topo.layout != "rank-order" and plain.layout == "rank-order"
    print(f"ring all-reduce 1 MiB busbw: layout {topo.busbw_gbps * 8e3:.0f} Mbit/s, rank order "
          f"{plain.busbw_gbps * 8e3:.0f} Mbit/s ({topo.busbw_gbps / plain.busbw_gbps:.2f}x)")  # fmt: skip
