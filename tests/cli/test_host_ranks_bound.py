"""CPU ranks of one host are bounded: a rank count no host runs is one error line at once.

A host's CPU ranks are joined pairwise (n(n-1)/2 loopback links), so `collbench discover --ranks
3000` ran past 60 s and 1.2 GB, and `--ranks 100000` (or `tune --ranks 100000`, whose topology comes
first) would have taken 5e9 links' memory before anything was said.
"""

from __future__ import annotations

import pytest
import torch
from refused import refused_line

from collbench.errors import ConfigError
from collbench.topology import host
from collbench.topology.host import MAX_HOST_RANKS, HostFacts, host_topology

FACTS = HostFacts("box", "Test CPU", 8, ((0, (0, 1, 2, 3)), (1, (4, 5, 6, 7))), 2**34)


@pytest.mark.parametrize("ranks", [MAX_HOST_RANKS + 1, 100_000, 10**18])
def test_more_ranks_than_a_host_runs_are_refused_before_any_link(ranks: int, monkeypatch: pytest.MonkeyPatch) -> None:
    def built(*_args: object) -> None:
        raise AssertionError("the ranks' CPUs were shared out before the count was refused")

    # Refused before the ranks are built at all (the links took minutes), not just quickly.
    monkeypatch.setattr(host, "_rank_cpus", built)
    with pytest.raises(ConfigError, match=f"{ranks} CPU ranks on one host") as err:
        host_topology(ranks, facts=FACTS)
    assert "\n" not in str(err.value) and f"{MAX_HOST_RANKS:,}" in str(err.value)


def test_a_host_of_many_cores_still_gets_its_ranks() -> None:
    topo = host_topology(64, facts=FACTS)
    assert len(topo.rank_devices) == 64 and len(topo.links) == 64 * 63 // 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="--ranks names GPUs where there are some")
@pytest.mark.parametrize("command", [["discover"], ["layout"], ["discover", "--json"]])
def test_discover_and_layout_of_100000_cpu_ranks_are_one_error_line(command: list[str]) -> None:
    line = refused_line([*command, "--ranks", "100000"])
    assert "100000 CPU ranks on one host" in line, line
