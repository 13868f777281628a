"""NCCL's model calibrated per algorithm family (issue 32): a measured size calibrates the family NCCL
ran there, as NCCL chose it by its own figures, and nothing else.

NCCL picks an algorithm by its own figures (NVIDIA/nccl v2.30.7, commit 5067397c,
``src/graph/tuning.cc``: ``ncclTopoTuneModel`` fills the bandwidths from the topology graphs,
``ncclTopoGetAlgoTime`` prices each and the cheapest runs): a log's time at a size is the time of the
algorithm those figures priced cheapest there. Ring and tree (and CollNet) run on one graph's links
and take one bus bandwidth; NVLS and NVLS-tree are priced from the NVLS graph and ``nvlsEfficiency``
(the NVSwitch reducing), and get a scale of their own. The GB200 logs are in tests/fixtures/real
(SOURCES.md); a GB200 "node" is an NVL72 rack (benchmarks/README.md)."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from gb200_logs import RACKS, REAL, gb200

from collbench.importers.nccl_tests import read_nccl_tests
from collbench.models.fit import fit_results
from collbench.models.link_floor import with_gpu
from collbench.models.nccl_calibrate import calibrate
from collbench.models.nccl_cost import nccl_choice
from collbench.models.nccl_graph import NodeFacts, node_of
from collbench.models.nccl_machine import NcclMachine, with_topology
from collbench.models.nccl_switch import NVLS_FIGURE_CHECK
from collbench.models.predict import predict, price_fits
from collbench.models.predict_native import nccl_machine_for, ran_nvls, ring_text
from collbench.models.priced import Shapes


def _rack(ranks: int = 72, nodes: int = 1, facts: NodeFacts | None = None) -> NcclMachine:
    """NCCL's own model of GB200 NVL72 racks (its search's ring and NVLS graphs, its own figures)."""
    node = node_of("GB200", -(-ranks // nodes), facts or NodeFacts())
    own = with_topology(NcclMachine(bus_bw_gbps=1.0, arch="blackwell"), node, nodes).own_figures()
    assert own is not None
    return own


def test_the_published_rack_ran_the_ring_as_its_job_says_not_nvls() -> None:
    # CoreWeave's GB200 example jobs, whose runs these logs are, set NCCL_NVLS_ENABLE=0
    # (coreweave/nccl-tests a736384, slurm/nccl-test-distributed-gb200-nvl72-enroot.slurm; SOURCES.md).
    # Told so, NCCL's model of the rack has no NVLS graph and the sizes calibrate its ring: NCCL's own
    # latencies x1.19 and 883 GB/s (above NCCL's 16 x 45 = 720: its 40.1 GB/s an NVLink is below what the
    # links carried) follow every size within 2%, where NCCL's NVLS (25 us, 918 GB/s) misses them by
    # 8-53%: the ~600 us a call takes beyond its bytes at 72 ranks is the ring's 142 hops, not NVLS's.
    fit, published = gb200(72)
    machine = nccl_machine_for(fit, 1, "blackwell", True, NodeFacts(nvls=False))
    assert machine.nvls is None and machine.ring_measured
    assert machine.bus_bw_gbps > machine.topology_bus_bw_gbps == pytest.approx(720.0)
    assert 1.0 < machine.latency_scale < 1.3
    rack = _rack()
    for size, time_us in sorted(published.items()):
        ring = nccl_choice(machine, "all-reduce", 72, 1, size, smooth=True)
        assert ring.algo == "ring" and ring.time_us == pytest.approx(time_us, rel=0.02)
        nvls = nccl_choice(rack, "all-reduce", 72, 1, size)
        assert nvls.algo == "nvls" and nvls.time_us < time_us / 1.08


def test_a_rack_that_ran_nvls_at_every_size_calibrates_nvls_and_leaves_the_ring_ncclss() -> None:
    # Not told NCCL_NVLS_ENABLE=0, the rack's sizes are taken as NCCL's default runs them (NVLS at every
    # size, by NCCL's own figures): the calibration as it is for any log that did run NVLS.
    fit, _ = gb200(72)
    machine = nccl_machine_for(fit, 1, "blackwell")
    # NVLS fitted below NCCL's figure (586-847 GB/s busbw where NCCL's model says 898-916); the ring,
    # which no size is taken to have run, keeps NCCL's own 16 x 45 GB/s.
    assert machine.nvls_measured and 0.7 < machine.nvls_scale < 0.95
    assert not machine.ring_measured and machine.bus_bw_gbps == pytest.approx(720.0)


def test_two_racks_from_one_price_the_ring_at_nccls_figure_and_carry_nothing_of_nvls() -> None:
    fit, _ = gb200(72)
    _, published = gb200(144)
    sizes = sorted(published)
    report = predict([fit], 144, sizes, nodes=2, measured_nodes=RACKS, simulate_max_ranks=0)
    rack = _rack()
    within = [p for p in report.predictions if p.size_bytes <= fit.max_bytes]
    assert len(within) == 5
    for p in report.predictions:
        # Across racks, the NICs not known, NCCL has no NVLS graph (its heads are the GPUs with a NIC):
        # ring or tree, priced at NCCL's own bus bandwidth, which nothing measured.
        assert "picks ring/" in p.basis or "picks tree/" in p.basis
        assert "bus 720 GB/s, NCCL's own figure, unmeasured" in p.basis
    for p in within:
        # What the NVLS model missed in the rack, at the sizes it measured, is not carried to the ring.
        assert "nothing carried" in p.basis
        own = nccl_choice(dataclasses.replace(rack, nvls=None), "all-reduce", 144, 2, p.size_bytes, smooth=True)
        assert p.time_us >= own.time_us * (1 - 1e-9)


def test_one_rack_from_a_ring_across_racks_is_nccls_nvls_figure_and_says_so() -> None:
    fit, _ = gb200(144)
    report = predict([fit], 72, [1 << 30, 1 << 33], nodes=1, measured_nodes=RACKS, simulate_max_ranks=0)
    rack = _rack()
    for p in report.predictions:
        # NCCL runs NVLS in one rack; the 2-rack fit measured the ring (832 GB/s fitted), whose figure
        # no longer lifts NVLS's: NVLS at NCCL's own figure, its latencies at the fitted x0.77.
        assert "picks nvls/" in p.basis and NVLS_FIGURE_CHECK in p.basis
        own = nccl_choice(rack, "all-reduce", 72, 1, p.size_bytes, smooth=True)
        assert p.time_us == pytest.approx(own.time_us, rel=0.01)


NVLS_OFF = NodeFacts(nvls=False)
"""``predict --no-nvls``: the GB200 runs' own setting (NCCL_NVLS_ENABLE=0)."""


def test_told_nvls_off_racks_predict_one_another_by_the_ring_they_ran() -> None:
    one, _ = gb200(72)
    two, _ = gb200(144)
    across = predict([one], 144, [1 << 29, 1 << 34], nodes=2, measured_nodes=RACKS, simulate_max_ranks=0,
                     nccl_facts=NVLS_OFF)  # fmt: skip
    within = predict([two], 72, [1 << 29, 1 << 33], nodes=1, measured_nodes=RACKS, simulate_max_ranks=0,
                     nccl_facts=NVLS_OFF)  # fmt: skip
    for p in across.predictions + within.predictions:
        assert ("picks ring/" in p.basis or "picks tree/" in p.basis) and "NVLS" not in p.basis
    for p in across.predictions:
        # The rack's ring bus, fitted (883 GB/s), not NCCL's own 720 said to be unmeasured; the rack's
        # latencies within it, the network's NCCL's own.
        assert "bus 883 GB/s (fitted)" in p.basis and "figure, unmeasured" not in p.basis
        assert "network latencies NCCL's own (unmeasured)" in p.basis
    for p in within.predictions:
        # One rack from two: the 2-rack ring's fitted 832 GB/s, above NCCL's 720, within the rack.
        assert "within one node" in p.basis and "832" in p.basis


def test_one_rack_is_never_slower_than_the_same_ring_on_two() -> None:
    # With NVLS off one rack runs the ring the 2-rack fit measured, on its fitted bus: what the model
    # missed there (x0.985 at 16 GiB) is carried into the rack as across racks; held at 1 in the rack,
    # 69 ranks in one rack took 41.06 ms and 76 on two 40.71 ms.
    fit, _ = gb200(144)
    size = 1 << 34
    times = []
    for ranks in range(60, 91):
        nodes = -(-ranks // 72)
        (entry,), _, _ = price_fits([fit], ranks, nodes, shapes=Shapes(RACKS), nccl_facts=NVLS_OFF)
        times.append(entry.time_us(size))
    assert all(b >= a for a, b in itertools.pairwise(times))


def _calibrated_h100(ring_bus_gbps: float, nvls_scale: float) -> NcclMachine:
    """One H100 node calibrated to synthetic times of a "true" node whose ring reaches ``ring_bus_gbps``
    (NCCL says 360) and NVLS ``nvls_scale`` of NCCL's figure, each at the sizes NCCL's own figures run
    it (1 KiB-16 GiB: ring/LL to 1 MiB, NVLS from 2 MiB)."""
    node = node_of("H100", 8, NodeFacts())
    start = with_topology(NcclMachine(bus_bw_gbps=1.0, arch="hopper"), node, 1)
    own = start.own_figures()
    assert own is not None
    truth = dataclasses.replace(own, bus_bw_gbps=ring_bus_gbps, nvls_scale=nvls_scale)
    sizes = [float(1 << k) for k in range(10, 35)]
    times = []
    for size in sizes:
        nvls = ran_nvls(own, "all-reduce", 8, 1, size)
        times.append(nccl_choice(truth, "all-reduce", 8, 1, size, smooth=True, nvls=nvls).time_us)
    return calibrate(start, "all-reduce", 8, 1, sizes, times)


def test_nvls_is_found_from_the_sizes_it_ran_whatever_the_ring_did() -> None:
    slow, fast = _calibrated_h100(200.0, 0.6), _calibrated_h100(340.0, 0.6)
    for found in (slow, fast):
        assert found.nvls_measured and found.nvls_scale == pytest.approx(0.6, rel=0.03)
        # The ring ran LL only (to 1 MiB), whose bandwidth llMaxBws caps at any bus: its bus is not told
        # by those sizes, and stays NCCL's own, said unmeasured.
        assert not found.ring_measured and found.bus_bw_gbps == pytest.approx(360.0)
    assert slow.nvls_scale == pytest.approx(fast.nvls_scale, rel=0.03)


def test_a_ring_run_only_where_ll_caps_it_does_not_tell_its_bus() -> None:
    # The GCP H100 2-node log told its 8 NICs of 50 GB/s: NCCL's figures run NVLS-tree from a few MiB,
    # the ring and tree below, all LL, whose bandwidth llMaxBws caps whatever the bus: the ring's bus
    # stays NCCL's own (360) rather than the 40 GB/s a fit of those sizes alone finds.
    path = REAL / "all_reduce_perf-h100-2node-mpirun-gcp.log"
    (fit,) = with_gpu(fit_results([r for r in read_nccl_tests(path) if r.size_bytes]).fits, "H100")
    machine = nccl_machine_for(fit, 2, "hopper", True, NodeFacts(nics=8, nic_gbps=50.0))
    assert not machine.ring_measured and machine.bus_bw_gbps == pytest.approx(360.0)
    assert machine.nvls_measured
    # The ring and tree ran (below a few MiB): the basis says their sizes do not tell the bus, where it
    # said "NCCL ran NVLS at every measured size".
    assert ring_text(machine) == (
        "bus 360 GB/s, NCCL's own figure, unmeasured (no size NCCL ran the ring or tree at tells its bandwidth)"
    )
    assert not ran_nvls(machine, "all-reduce", 16, 2, float(fit.min_bytes))
