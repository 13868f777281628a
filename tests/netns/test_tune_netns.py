"""``collbench tune`` as a cluster user runs it, on four namespace "hosts" with two slow pairs (1-2 and
3-0, both on the rank-order ring): ``discover --probe`` then ``tune --topology`` under a torchrun-style
job, one rank per host. Every namespace reports the same host name; the launcher's LOCAL_WORLD_SIZE=1
says each rank is a node of its own. The tune finishes, runs the layout planned on the probe's links,
and records it and the four nodes."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.netns._cluster import needs_netns, netns

pytestmark = pytest.mark.netns

FAST, SLOW = 300.0, 40.0
SLOW_PAIRS = {(1, 2), (0, 3)}
JOB_S = 300.0


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "collbench.cli.app", *args]


@needs_netns
def test_tune_on_namespace_hosts_finishes_on_the_layout_and_counts_the_nodes(tmp_path: Path) -> None:
    n = 4
    rates = [
        [0.0 if a == b else (SLOW if tuple(sorted((a, b))) in SLOW_PAIRS else FAST) for b in range(n)] for a in range(n)
    ]
    tune = ["tune", "--quick", "--backend", "gloo", "-b", "128K", "-e", "256K", "--timeout", "120"]
    with netns.NamespaceCluster(rates) as cluster:
        cluster.run_job(
            _cli("discover", "--probe", "-O", "measured.yaml", "--timeout", "120"),
            cwd=tmp_path, timeout_s=JOB_S, launcher="torchrun",
        )  # fmt: skip
        started = time.monotonic()
        outputs = cluster.run_job(
            _cli(*tune, "--topology", "measured.yaml", "-O", "p.yaml"), cwd=tmp_path, timeout_s=JOB_S
        )
        elapsed_s = time.monotonic() - started
    from collbench.profile.document import Profile
    from collbench.results.io import read_jsonl

    assert "profile:" in outputs[0]
    # The probe names each rank's node as the job does (host name and boot id): the topology has the four
    # hosts, and the tune on it says nothing of a layout on other nodes (it said "puts the ranks on 1
    # node, the job's hosts are 4" when the probe named the ranks by their shared host name).
    from collbench.topology.io import load_topology

    assert len({d.host for d in load_topology(tmp_path / "measured.yaml").rank_devices}) == n
    assert "groups the ranks into" not in " ".join(outputs[0].split())
    profile = Profile.load(tmp_path / "p.yaml")
    assert (profile.world_size, profile.nodes) == (n, n)
    assert profile.layout is not None
    rows = list(read_jsonl(tmp_path / "p-results.jsonl"))
    assert rows and all(r.wrong == 0 and r.nodes == n for r in rows)
    assert {r.layout for r in rows if r.algo != "native"} == {profile.layout.name}
    print(f"tune --quick -b 128K -e 256K on {n} namespace hosts: {elapsed_s:.0f} s, {len(rows)} points")
