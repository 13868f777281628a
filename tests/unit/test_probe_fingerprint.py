"""`discover --probe` fingerprints are stable (issue 34: two probes of one machine gave machine
82201e667296, then e45422f42bb4): what the probe measures is recorded in the links, and the
fingerprints come from what does not change between runs (the devices, which pairs are linked)."""

from __future__ import annotations

import random
from pathlib import Path

from collbench.profile.document import machine_fingerprint
from collbench.runtime.probe import PairMeasure, measured_topology
from collbench.topology.host import host_topology
from collbench.topology.io import load_topology, save_topology


def _probe(seed: int, n: int = 4) -> list[PairMeasure]:
    """One probe's measures: every pair both ways, figures that vary from run to run as a busy host's do."""
    rng = random.Random(seed)
    return [
        PairMeasure(a, b, rng.uniform(20.0, 60.0), rng.uniform(0.5, 3.0)) for a in range(n) for b in range(n) if a != b
    ]


def test_two_probes_of_one_machine_share_both_fingerprints_and_keep_their_figures() -> None:
    first = measured_topology(["host"] * 4, _probe(1), gpus=False)
    second = measured_topology(["host"] * 4, _probe(2), gpus=False)
    assert first.fingerprint == second.fingerprint
    assert machine_fingerprint(first) == machine_fingerprint(second)
    # The measurements are not lost: each topology keeps its own, and they differ.
    figures = [sorted((lk.a, lk.b, lk.bandwidth_gbps, lk.latency_us) for lk in t.links) for t in (first, second)]
    assert figures[0] != figures[1]
    assert all(lk.source == "measured" and lk.bandwidth_gbps > 0 for lk in first.links)


def test_probes_on_a_discovered_host_share_its_devices_fingerprint_part() -> None:
    base = host_topology(4)
    first = measured_topology(["h"] * 4, _probe(3), gpus=False, base=base)
    second = measured_topology(["h"] * 4, _probe(4), gpus=False, base=base)
    assert first.fingerprint == second.fingerprint
    assert machine_fingerprint(first) == machine_fingerprint(second)


def test_the_fingerprint_survives_saving_and_still_tells_other_machines_apart(tmp_path: Path) -> None:
    probed = measured_topology(["host"] * 4, _probe(5), gpus=False)
    save_topology(probed, tmp_path / "t.yaml")
    again = load_topology(tmp_path / "t.yaml")
    assert again.fingerprint == probed.fingerprint
    assert {lk.bandwidth_gbps for lk in again.links} == {lk.bandwidth_gbps for lk in probed.links}
    # Fewer ranks, or GPUs instead of CPUs, is another machine (or another cut of it).
    assert measured_topology(["host"] * 3, _probe(5, 3), gpus=False).fingerprint != probed.fingerprint
    assert measured_topology(["host"] * 4, _probe(5), gpus=True).fingerprint != probed.fingerprint
