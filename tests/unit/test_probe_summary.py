"""discover after --probe says what it measured: the matrix shows MEAS per pair and the summary
said nothing of the figures (they took --bandwidth or reading the file); now one line of the pairs'
bandwidth and one of their latency, as a range with its median where the pairs differ.

A topology the probe built from ranks alone (under a launcher: devices named by rank, no host facts)
says its host was not described, instead of reading the first rank's name as a CPU model ('Host: rank
0, ? cores, ? NUMA nodes', seen under torchrun, mpirun and srun with more ranks than rank 0's host has
cores)."""

from __future__ import annotations

from pathlib import Path

from collbench.cli.render.topology import topology_summary
from collbench.runtime.probe import PairMeasure, measured_topology
from collbench.topology.host import host_topology
from collbench.topology.model import Device, DeviceKind, Link, LinkKind, Topology


def _probed(links: list[tuple[str, str, float, float | None]]) -> Topology:
    names = sorted({n for a, b, _, _ in links for n in (a, b)})
    return Topology(
        host="h",
        devices=tuple(Device(n, DeviceKind.CPU, i, cpus=(i,)) for i, n in enumerate(names)),
        links=tuple(
            Link(a, b, LinkKind.MEASURED, bandwidth_gbps=bw, latency_us=lat, source="measured")
            for a, b, bw, lat in links
        ),
        source="probe",
    )


def test_one_pair() -> None:
    lines = topology_summary(_probed([("CPU0", "CPU1", 1.2362675979676045, 68.01650124543812)]))
    assert "probe: 1 pair measured, 1.236 GB/s per direction" in lines
    assert "  latency 68.02 us" in lines


def test_several_pairs_give_their_range_and_median() -> None:
    pairs = [("CPU0", "CPU1", 1.1, 60.0), ("CPU0", "CPU2", 1.2, 70.0), ("CPU1", "CPU2", 12.5, 1500.0)]
    lines = topology_summary(_probed(pairs))
    # as wide as it gets: a million pairs, four figures each
    wide = [("CPU0", "CPU1", 10.123456, 2.34567), ("CPU0", "CPU2", 100.12345, 45.6789), ("CPU1", "CPU2", 199.9, 1234.5)]
    assert max(len(line) for line in topology_summary(_probed(wide))[2:4]) <= 80 - len(" 999,997")
    assert "probe: 3 pairs measured, 1.1-12.5 GB/s per direction (median 1.2)" in lines
    assert "  latency 60-1500 us (median 70)" in lines
    assert all(len(line) <= 80 for line in lines if line.startswith(("probe:", "  latency")))


def test_no_latency_and_no_probe() -> None:
    lines = topology_summary(_probed([("CPU0", "CPU1", 2.0, None)]))
    assert "probe: 1 pair measured, 2 GB/s per direction" in lines
    assert not any("latency" in line for line in lines)
    plain = Topology(
        host="h",
        devices=(Device("CPU0", DeviceKind.CPU, 0, cpus=(0,)), Device("CPU1", DeviceKind.CPU, 1, cpus=(1,))),
        links=(Link("CPU0", "CPU1", LinkKind.LOOPBACK, bandwidth_gbps=10.0, source="default"),),
        source="host",
    )
    assert not any(line.startswith(("probe:", "  latency")) for line in topology_summary(plain))


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


def test_the_spread_of_the_repeats_says_how_sure_the_bandwidths_are(tmp_path: Path) -> None:
    """discover --probe printed each bandwidth without how sure it was: each direction is timed
    ``repeats`` times and the median kept; the spread ((max - min) / median) is now recorded per pair
    (the wider direction's), kept in the file and printed beside the bandwidths, at most 80 columns."""
    from collbench.topology.io import load_topology, save_topology

    measures = [
        PairMeasure(0, 1, latency_us=60.0, bandwidth_gbps=1.2, spread_pct=2.5),
        PairMeasure(1, 0, latency_us=60.0, bandwidth_gbps=1.3, spread_pct=4.0),
        PairMeasure(0, 2, latency_us=70.0, bandwidth_gbps=1.1, spread_pct=12.25),
        PairMeasure(2, 0, latency_us=70.0, bandwidth_gbps=1.1, spread_pct=1.0),
        PairMeasure(1, 2, latency_us=65.0, bandwidth_gbps=1.2, spread_pct=0.5),
        PairMeasure(2, 1, latency_us=65.0, bandwidth_gbps=1.2, spread_pct=0.25),
    ]
    topo = measured_topology(["h", "h", "h"], measures, gpus=False)
    assert sorted(lk.spread_pct for lk in topo.links) == [0.5, 4.0, 12.25]
    said = "  repeats of a pair spread 4.0% (median), 12.2% at most"
    lines = topology_summary(topo)
    assert lines[lines.index(said) - 1].startswith("probe: 3 pairs measured") and len(said) <= 80
    path = tmp_path / "t.yaml"
    save_topology(topo, path)
    assert said in topology_summary(load_topology(path))
    # Between nodes, the pair of ranks measured for each pair of nodes.
    by_nodes = measured_topology(["a", "b"], measures[:2], gpus=False, per_node=True)
    assert "  repeats of a pair spread 4.0% (median), 4.0% at most" in topology_summary(by_nodes)
    # A file from before (no spread) says nothing of it rather than a guess.
    old = _probed([("CPU0", "CPU1", 1.2, 60.0)])
    assert not any("repeats" in line for line in topology_summary(old))
