"""The probe on a cluster of network namespaces whose links are shaped per pair (htb).

Four ranks run as a torchrun-style job, one per namespace; every directed pair has its own rate.
The probe must rank the pairs in the order of their rates and measure each within 15%.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.netns._cluster import REPO, needs_netns, netns

pytestmark = pytest.mark.netns


# Symmetric pair rates in Mbit/s, far enough apart (>= 1.3x) that their order is unambiguous.
RATES = {(0, 1): 60.0, (0, 2): 90.0, (0, 3): 130.0, (1, 2): 180.0, (1, 3): 250.0, (2, 3): 340.0}

_SCRIPT = """
import json, os, sys
from collbench.runtime.probe import ProbeConfig, probe_topology
topo = probe_topology(4, timeout_s=60.0, config=ProbeConfig(repeats=3, pings=10, target_s=0.25))
if os.environ["RANK"] == "0":
    with open(sys.argv[1], "w") as f:
        json.dump(topo.to_dict(), f)
"""


@needs_netns
def test_probe_ranks_shaped_links_and_measures_them_within_15_percent(tmp_path: Path) -> None:
    n = 4
    matrix = [[0.0] * n for _ in range(n)]
    for (a, b), rate in RATES.items():
        matrix[a][b] = matrix[b][a] = rate
    out = tmp_path / "topo.json"
    with netns.NamespaceCluster(matrix) as cluster:
        cluster.run_job([sys.executable, "-c", _SCRIPT, str(out)], cwd=REPO, timeout_s=120.0)
    from collbench.topology.model import LinkKind, Topology

    topo = Topology.from_dict(json.loads(out.read_text()))
    assert topo.source == "probe"
    measured: dict[tuple[int, int], float] = {}
    for link in topo.links:
        assert link.kind == LinkKind.MEASURED and link.source == "measured"
        assert link.latency_us is not None and link.latency_us > 0
        a, b = sorted((int(link.a[3:]), int(link.b[3:])))
        measured[(a, b)] = link.bandwidth_gbps * 8e3  # GB/s -> Mbit/s
    assert set(measured) == set(RATES)
    print({pair: round(v, 1) for pair, v in sorted(measured.items())})
    for pair, rate in RATES.items():
        assert abs(measured[pair] - rate) <= 0.15 * rate, (
            f"pair {pair}: measured {measured[pair]:.1f} Mbit/s, shaped {rate}"
        )
    by_rate = sorted(RATES, key=RATES.__getitem__)
    by_measure = sorted(measured, key=measured.__getitem__)
    assert by_measure == by_rate
