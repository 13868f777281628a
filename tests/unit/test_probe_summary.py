"""discover --probe's summary of a topology the probe built from ranks alone (under a launcher: its
devices are named by rank and carry no host facts) says the host was not described, instead of
reading the first rank's name as a CPU model ('Host: rank 0, ? cores, ? NUMA nodes', seen under
torchrun, mpirun and srun with more ranks than rank 0's host has cores)."""

from __future__ import annotations

from collbench.cli.render.topology import topology_summary
from collbench.runtime.probe import PairMeasure, measured_topology
from collbench.topology.host import host_topology


def _measures(n: int) -> list[PairMeasure]:
    return [PairMeasure(a, b, 50.0, 1.2) for a in range(n) for b in range(n) if a != b]


def test_ranks_alone_are_no_host_description() -> None:
    lines = topology_summary(measured_topology(["vm"] * 3, _measures(3), gpus=False))
    assert lines[0] == "Host: not described (the probe measured links between ranks only), 1 host", lines
    assert not any("rank 0," in line or "? cores" in line for line in lines), lines
    two = topology_summary(measured_topology(["a", "a", "b", "b"], _measures(4), gpus=False))
    assert two[0] == "Host: not described (the probe measured links between ranks only), 2 hosts", two


def test_a_probe_on_a_discovered_host_keeps_its_description() -> None:
    base = host_topology(ranks=2)
    lines = topology_summary(measured_topology([base.host] * 2, _measures(2), gpus=False, base=base))
    assert lines[0].startswith("Host: ") and "not described" not in lines[0] and "rank 0" not in lines[0], lines
