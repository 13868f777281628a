"""Within physics (issue 32, items 3 and 4): no prediction on one node below what each GPU must send
over its NVLinks at their nominal bandwidth; NCCL's generation read from the GPU the rows name; RCCL
runs never priced with NCCL's model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from collbench.errors import ConfigError
from collbench.importers.nccl_tests import read_nccl_tests
from collbench.models.fit import fit_results
from collbench.models.fitted import Fit
from collbench.models.link_floor import link_floor, with_gpu
from collbench.models.nccl_graph import NodeFacts
from collbench.models.nccl_machine import arch_of
from collbench.models.predict import predict
from collbench.topology.bandwidth import gpu_links

REAL = Path(__file__).parents[1] / "fixtures" / "real"


def _fit(name: str) -> Fit:
    rows = [r for r in read_nccl_tests(REAL / name, strict_op=False) if r.size_bytes > 0]
    (fit,) = fit_results(rows).fits
    # As `collbench fit` records it: the GPU every row names.
    return dataclasses.replace(fit, device=rows[0].device_name)


def test_gpu_names_as_logs_print_them() -> None:
    # Device names exactly as the committed logs' rank lines print them.
    gb200, h100 = gpu_links("NVIDIA GB200"), gpu_links("NVIDIA H100 80GB HBM3")
    assert gb200 is not None and gb200.nvlink_gbps == 900.0 and arch_of(gb200) == "blackwell"
    assert h100 is not None and h100.nvlink_gbps == 450.0 and arch_of(h100) == "hopper"
    a100 = gpu_links("NVIDIA A100-SXM4-80GB")
    assert a100 is not None and a100.nvlink_gbps == 300.0 and arch_of(a100) == "ampere"
    mi300x = gpu_links("AMD Instinct MI300X")
    assert mi300x is not None and mi300x.vendor == "AMD" and mi300x.nvlink_gbps is None
    # A PCIe card, a consumer GPU and an anonymous name claim nothing.
    for name in ("NVIDIA H100 PCIe", "NVIDIA GeForce RTX 2080 Ti", "NVIDIA Graphics Device"):
        assert gpu_links(name) is None
    assert arch_of(None) == "hopper"


def test_the_floor_is_the_bytes_each_gpu_sends() -> None:
    ring = link_floor("all-reduce", 8, 1, "NVIDIA A100-SXM4-80GB")
    assert ring is not None and ring.share == pytest.approx(2 * 7 / 8)
    # 1 GiB: 1.75 GiB over 300 GB/s.
    assert ring.time_us(1 << 30) == pytest.approx(1.75 * (1 << 30) / 300e3)
    # With NVLink SHARP the switch reduces: each GPU sends its buffer once.
    nvls = link_floor("all-reduce", 72, 1, "NVIDIA GB200")
    assert nvls is not None and nvls.share == 1.0
    assert link_floor("all-reduce", 2, 1, "NVIDIA GB200").share == 1.0  # type: ignore[union-attr]
    # Across nodes the NIC decides, which a log does not say; no floor for ops without one here.
    assert link_floor("all-reduce", 16, 2, "NVIDIA H100 80GB HBM3") is None
    assert link_floor("broadcast", 8, 1, "NVIDIA H100 80GB HBM3") is None


def test_a_gb200_fit_never_promises_more_than_nvlink_5_carries() -> None:
    # The 72-rank GB200 log (its rank line says "NVIDIA Graphics Device": named with --gpu), asked for
    # 2 ranks on one node: each byte crosses one GPU's NVLinks, 900 GB/s a direction, so busbw is at
    # most 900 GB/s (before the floor: 1,090 GB/s at 1 GiB). Measured on 18 trays of 4, it is priced
    # within one node from NCCL's own NVLink bus bandwidth (18 x 40.1 GB/s, topo.h), or the fitted
    # where higher, never the network's.
    (fit,) = with_gpu([_fit("all_reduce_perf-gb200-72rank-one-rank-line.log")], "GB200")
    sizes = [1 << 20, 1 << 30, 1 << 34]
    for measured in (1, 18):
        report = predict([fit], 2, sizes, nodes=1, measured_nodes={72: measured}, simulate_max_ranks=0)
        for p in report.predictions:
            assert p.busbw_gbps is not None and p.busbw_gbps <= 900.0 * (1 + 1e-9)
            assert "blackwell" in p.basis
            assert ("within one node" in p.basis) == (measured > 1)
    # Without its GPU, a fit across nodes has nothing for the links within one: refused, saying so.
    with pytest.raises(ConfigError, match="measured across 18 nodes only, on a GPU whose NVLinks are not known"):
        predict([_fit("all_reduce_perf-gb200-72rank-one-rank-line.log")], 2, [1 << 30], nodes=1,
                measured_nodes={72: 18}, simulate_max_ranks=0)  # fmt: skip


def test_the_floor_raises_a_time_the_links_cannot_carry() -> None:
    from collbench.models.predict import _floored
    from collbench.models.priced import Priced

    (fit,) = with_gpu([_fit("all_reduce_perf-gb200-72rank-one-rank-line.log")], "GB200")
    # A price of 1 us at every size: 1 GiB in 1 us is far over 900 GB/s a direction.
    fast = Priced(fit, lambda s: 1.0, lambda s: 1.0, lambda s: "made up", False, None)
    floored = _floored(fast, 2, 1)
    assert floored.time_us(1 << 30) == pytest.approx((1 << 30) / 900e3)
    assert "raised from 1 us to the links' floor" in floored.basis(1 << 30)
    assert floored.time_us(1) == 1.0 and "floor" not in floored.basis(1)


def test_a_two_node_fit_asked_inside_one_node_uses_the_nvlinks() -> None:
    """Issue 32: the GCP H100 2-node fit predicted 8 ranks on one node at 257 GB/s busbw, the network's
    bandwidth inside the node; published single-node 8 x H100 all-reduce reaches ~450-480 GB/s."""
    fit = _fit("all_reduce_perf-h100-2node-mpirun-gcp.log")
    assert fit.device.startswith("NVIDIA H100")
    (p,) = predict([fit], 8, [1 << 30], nodes=1, measured_nodes={16: 2}, simulate_max_ranks=0).predictions
    # NCCL's NVLS on one node of 8 (tuning.cc: 8 heads x 40 GB/s x nvlsEfficiency 0.85 x 7/8 x 2 = 476
    # GB/s busbw), its own figure, which no run across nodes measured; what the model misses at 16
    # ranks (the ring and tree there) is not carried to it.
    assert p.busbw_gbps is not None and 440 < p.busbw_gbps <= 480.0
    assert "picks nvls/Simple" in p.basis
    assert "NVLS at NCCL's own tuning figure, unmeasured" in p.basis and "fitted across 2 nodes" in p.basis
    assert "24 channels (NCCL's search: a ring of 12 x 30 GB/s" in p.basis and "NVLS: 8 heads x 40 GB/s" in p.basis


def test_a_two_node_fits_miss_is_carried_into_one_node_for_neither_family() -> None:
    """The GCP H100 2-node fit misses x2.03 at 16 MiB across nodes (x1.8-2.03 at 8-32 MiB, x0.78-1.18
    elsewhere: the network's). Asked inside one node it was carried to the ring NCCL runs on 4-5 GPUs and
    not to NVLS on 6-8, so the time halved from 5 to 6 ranks (223.6 -> 102.7 us). Within one node
    tuning.cc prices neither family with a network term (nNodes == 1: no interLat, no net overhead,
    bwIntra), and the one-node machine is NCCL's own figures for the NVLinks, not the calibration the
    miss is a residual of: both families are NCCL's own there, neither carries it."""
    from collbench.models.predict_native import _residual

    fit = _fit("all_reduce_perf-h100-2node-mpirun-gcp.log")
    missed, nvls = _residual(fit, 2, "hopper", True, NodeFacts(), float(16 << 20))
    assert missed == pytest.approx(2.03, abs=0.01) and not nvls
    times = {}
    for ranks in range(4, 9):
        (p,) = predict([fit], ranks, [16 << 20], nodes=1, measured_nodes={16: 2}, simulate_max_ranks=0).predictions
        assert "nothing carried of what it misses (the network's; these links were not measured)" in p.basis
        times[ranks] = p.time_us
    assert "picks ring/Simple" in predict([fit], 5, [16 << 20], nodes=1, measured_nodes={16: 2}).predictions[0].basis
    # NCCL's own ring on 5 GPUs against its own NVLS on 6 (the hardware's: 6 GPUs' in-switch reduction is
    # faster than 5 GPUs' ring), no longer x2.03 apart.
    assert times[5] < 1.15 * times[6] and times[4] < times[5]


def test_a_miss_measured_against_fitted_latencies_is_not_carried_onto_nccls_own_in_one_node() -> None:
    """The p5 2-node fit (eks) has latencies x2.83 and a ring bus of 448 GB/s, above NCCL's 360 for one
    H100 node: inside one node the ring takes the fitted bus and NCCL's own latencies (x1). NCCL's time
    is a latency term plus a bandwidth term, each from its own figures (NVIDIA/nccl v2.30.7
    src/graph/tuning.cc line 653: ``*time = lat * latCount + nBytes / (1000 * bw)``); the fit's miss is a
    residual against x2.83, so it is carried to the bandwidth term (the fitted bus) and not to NCCL's own
    latencies: at 32 KiB its x1.12 made 8 GPUs' 15.35 us ring 17.20 us, nearly all of it latency."""
    from collbench.models.nccl_cost import nccl_choice
    from collbench.models.predict_native import _intra_node_machine, _residual
    from collbench.models.priced import Shapes

    # Its rank lines name no GPU: `predict --gpu H100`, as bench_predict runs it.
    (fit,) = with_gpu([_fit("all_reduce_perf-h100-2node-mpirun-tag-output-eks.log")], "H100")
    intra = _intra_node_machine(fit, Shapes({16: 2}), "hopper", True, NodeFacts())
    assert intra.latency_scale == 1.0 and intra.ring_measured
    # The ring runs at these (NVLS on 6-8 GPUs from larger sizes, at NCCL's own figure: nothing carried).
    for ranks, size in ((8, 1 << 15), (8, 8), (4, 1 << 30)):
        missed, nvls = _residual(fit, 2, "hopper", True, NodeFacts(), float(size))
        assert not nvls
        (p,) = predict([fit], ranks, [size], nodes=1, measured_nodes={16: 2}, simulate_max_ranks=0).predictions
        ring = nccl_choice(intra, "all-reduce", ranks, 1, float(size), smooth=True, nvls=False)
        bandwidth_us = ring.time_us - ring.latency_us
        assert p.time_us == pytest.approx(ring.latency_us + bandwidth_us * missed, rel=1e-3)
        assert f"x{missed:.3g} for what it misses on its bandwidth term only (the latencies NCCL's own)" in p.basis
        if size == 1 << 15:
            assert missed > 1.1 and ring.latency_us > 0.9 * ring.time_us


def test_rccl_runs_are_not_priced_with_nccls_model() -> None:
    fit = _fit("all_reduce_perf-mi300x-2node-rccl-tests-no-group.log")
    with pytest.raises(ConfigError, match=r"AMD MI300X GPUs \(RCCL\), whose choice NCCL's cost model"):
        predict([fit], 64, [1 << 20], nodes=8, measured_nodes={16: 2})
    # At its own shape it is the fit itself, and says so, never 'NCCL's model picks' RCCL's choice.
    (own,) = predict([fit], 16, [1 << 20], nodes=2, measured_nodes={16: 2}).predictions
    assert own.time_us == pytest.approx(fit.predict_us(1 << 20), rel=1e-6)
    assert "the fit itself" in own.basis and "NCCL's model" not in own.basis
    # The MI355X log's rank lines name no GPU: it was priced with NCCL's Hopper tables at 64 ranks, a note
    # saying only 'the fit does not name its GPU'. Its rccl-tests lines make it RCCL's, refused alike.
    anonymous = _fit("all_reduce_perf-mi355x-2node-rccl-tests-no-footer.log")
    assert (anonymous.backend, anonymous.device) == ("rccl", "")
    with pytest.raises(ConfigError, match=r"measured with rccl \(its tests' log\), whose choice NCCL's cost model"):
        predict([anonymous], 64, [1 << 20], nodes=8, measured_nodes={16: 2})
    (own,) = predict([anonymous], 16, [1 << 20], nodes=2, measured_nodes={16: 2}).predictions
    assert "the fit itself" in own.basis and "NCCL's model" not in own.basis


def test_gpu_option_names_the_gpu_only_where_the_fits_do_not() -> None:
    anonymous = _fit("all_reduce_perf-gb200-72rank-one-rank-line.log")
    assert gpu_links(anonymous.device) is None  # "NVIDIA Graphics Device"
    (named,) = with_gpu([anonymous], "GB200")
    assert named.device == "GB200"
    h100 = _fit("all_reduce_perf-h100-2node-mpirun-gcp.log")
    with pytest.raises(ConfigError, match="was measured on NVIDIA H100"):
        with_gpu([h100], "GB200")
    with pytest.raises(ConfigError, match="not a GPU whose links are known"):
        with_gpu([h100], "RTX 9999")


def test_a_pcie_card_gets_no_ll128_with_three_or_more_a_node() -> None:
    """NCCL enables LL128 only where every GPU of a node reaches the others over NVLink (tuning.cc,
    LL128's pEnable: typeIntra <= PATH_NVB); a PCIe card's NVLink bridge joins two GPUs at most."""
    from collbench.models.predict import price_fits
    from collbench.models.priced import Shapes
    from collbench.topology.bandwidth import pcie_card

    assert pcie_card("NVIDIA GeForce RTX 2080 Ti") and pcie_card("NVIDIA H100 PCIe") and pcie_card("NVIDIA L40S")
    assert not pcie_card("NVIDIA H100 80GB HBM3") and not pcie_card("NVIDIA GB200")
    fit = _fit("all_reduce_perf-2080ti-x2-autodl.log")
    assert fit.device == "NVIDIA GeForce RTX 2080 Ti"
    sizes = [float(1 << k) for k in range(3, 31)]
    (eight,), _, notes = price_fits([fit], 8, 1, shapes=Shapes({2: 1}), nccl_arch="volta")
    assert any("LL128 off and PCI latencies at 8 ranks a node" in n for n in notes)
    assert all("/LL128" not in eight.basis(s) for s in sizes)
    # Two a node: the fit's own two cards on one node carried no more than PCIe x16 (see the next test).
    _, _, notes = price_fits([fit], 4, 2, shapes=Shapes({2: 1}), nccl_arch="volta")
    assert any("LL128 off and PCI latencies at 2 ranks a node" in n for n in notes)
    # An SXM board's node is NVLink throughout: LL128 stays.
    (gcp,), _, notes = price_fits([_fit("all_reduce_perf-h100-2node-mpirun-gcp.log")], 32, 4, shapes=Shapes({16: 2}))
    assert not any("LL128 off" in n for n in notes) and any("/LL128" in gcp.basis(s) for s in sizes)


def test_nccls_generation_from_a_pcie_cards_name() -> None:
    """compCapIndex (tuning.cc) from the compute capability NVIDIA lists for the card the log names:
    the RTX 2080 Ti log was priced as Hopper (the default) and is Turing, 7.5, Volta's class."""
    from collbench.models.predict import price_fits
    from collbench.models.priced import Shapes

    assert arch_of(None, "NVIDIA GeForce RTX 2080 Ti") == "volta"
    assert arch_of(None, "NVIDIA GeForce RTX 5090") == "blackwell"
    assert arch_of(None, "NVIDIA L40S") == "ampere" and arch_of(None, "NVIDIA H100 PCIe") == "hopper"
    # Unknown names keep the default, never a guess from a number in them.
    assert arch_of(None, "Quadro RTX 5000") == "hopper" and arch_of(None, "NVIDIA Graphics Device") == "hopper"
    fit = _fit("all_reduce_perf-2080ti-x2-autodl.log")
    (entry,), _, _ = price_fits([fit], 4, 2, shapes=Shapes({2: 1}))
    assert "tuning.cc, volta)" in entry.basis(1 << 20)


def test_a_one_node_fit_asked_across_nodes_says_the_network_was_not_measured() -> None:
    """The reverse of a fit across nodes asked inside one: nothing of the network was measured, so the
    prediction says what it took for it (the bus bandwidth and latency scale fitted within a node)."""
    from collbench.models.predict import price_fits
    from collbench.models.priced import Shapes

    fit = _fit("all_reduce_perf-2080ti-x2-autodl.log")
    _, _, notes = price_fits([fit], 4, 2, shapes=Shapes({2: 1}))
    assert any("NCCL's model across 2 nodes with the bus bandwidth and latency scale fitted within one node" in n
               for n in notes)  # fmt: skip
    _, _, notes = price_fits([fit], 2, 1, shapes=Shapes({2: 1}))
    assert not any("across" in n for n in notes)


def test_the_nics_across_nodes_are_counted_as_every_label_counts() -> None:
    one = link_floor("all-reduce", 16, 2, "NVIDIA H100 80GB HBM3", NodeFacts(nics=1, nic_gbps=50.0))
    eight = link_floor("all-reduce", 16, 2, "NVIDIA H100 80GB HBM3", NodeFacts(nics=8, nic_gbps=50.0))
    assert one is not None and one.links == "each node's 1 NIC of 50 GB/s"
    assert eight is not None and eight.links == "each node's 8 NICs of 50 GB/s"


def test_two_pcie_cards_a_node_get_ll128_only_on_a_bridge() -> None:
    """NVIDIA/nccl v2.30.7 src/graph/tuning.cc lines 518-536: LL128 stays enabled only where
    ``graphs[a]->typeIntra <= PATH_NVB`` (NVLink, through at most one GPU); line 285 prices a node's hops
    with NVLink latencies only where ``typeIntra == LINK_NVL``. The RTX 2080 Ti pair's log fits a ring of
    ~4 GB/s bus, within PCIe 3 x16 (15.8 GB/s) and far below the card's NVLink bridge (2 links of NVLink
    2, 50 GB/s a direction): NCCL found no NVLink there, so asked for 4 ranks on 2 nodes (2 a node) it runs
    no LL128. Before, two a node were taken as bridged and predict picked ring/LL128 at 64 KiB."""
    from collbench.models.card_links import card_links
    from collbench.models.predict import price_fits
    from collbench.models.priced import Shapes
    from collbench.topology.bandwidth import nvlink_bridge

    fit = _fit("all_reduce_perf-2080ti-x2-autodl.log")
    sizes = [float(1 << k) for k in range(3, 31)]
    (four,), _, notes = price_fits([fit], 4, 2, shapes=Shapes({2: 1}))
    assert all("/LL128" not in four.basis(s) for s in sizes)
    (note,) = [n for n in notes if "LL128" in n]
    assert "LL128 off and PCI latencies at 2 ranks a node" in note and "within PCIe 3 x16's 15.8 GB/s" in note
    # One card a node has no path within it (search.cc: minTypeIntra = PATH_LOC for one GPU): LL128 may run.
    (two,), _, notes = price_fits([fit], 2, 2, shapes=Shapes({2: 1}))
    assert any("/LL128" in two.basis(s) for s in sizes)
    assert any("LL128 kept at 1 rank a node" in n for n in notes)

    # What tells a pair apart: the card's name, then a run of two on one node against PCIe x16.
    bridge = nvlink_bridge("NVIDIA GeForce RTX 2080 Ti")
    assert bridge is not None and bridge.bridge_gbps == 50.0 and bridge.pcie_x16_gbps == pytest.approx(15.76)
    assert nvlink_bridge("NVIDIA GeForce RTX 4090") is None and nvlink_bridge("NVIDIA H100 80GB HBM3") is None
    assert nvlink_bridge("NVIDIA RTX 6000 Ada Generation") is None
    assert nvlink_bridge("Quadro RTX 6000") is not None and nvlink_bridge("NVIDIA A100-PCIE-40GB") is not None
    no_bridge = card_links("NVIDIA GeForce RTX 4090", None)
    assert no_bridge is not None and not no_bridge.nvlink(2) and not no_bridge.assumed and no_bridge.nvlink(1)
    slow = card_links("NVIDIA GeForce RTX 2080 Ti", 4.1)
    assert slow is not None and not slow.nvlink(2) and not slow.assumed
    fast = card_links("NVIDIA GeForce RTX 2080 Ti", 40.0)
    assert fast is not None and fast.nvlink(2) and not fast.nvlink(3) and "above PCIe 3 x16" in fast.why
    untold = card_links("NVIDIA GeForce RTX 2080 Ti", None)
    assert untold is not None and untold.nvlink(2) and untold.assumed
    assert card_links("NVIDIA H100 80GB HBM3", 4.1) is None

    # A card that takes no bridge, by its name alone: no LL128 at 2 a node, whatever was measured.
    rtx4090 = dataclasses.replace(fit, device="NVIDIA GeForce RTX 4090")
    (four,), _, notes = price_fits([rtx4090], 4, 2, shapes=Shapes({2: 1}))
    assert all("/LL128" not in four.basis(s) for s in sizes)
    assert any("takes no NVLink bridge" in n for n in notes)


def test_an_h100_nvl_is_a_pcie_card_bridged_in_pairs_not_an_sxm_board() -> None:
    """NVIDIA's H100 product page, its H100 NVL column: a PCIe Gen5 card (128 GB/s) whose NVLink bridge
    joins two cards (600 GB/s, 300 a direction); no NVSwitch, so no NVLink SHARP. The name was read as
    H100 SXM: 18 NVLinks to a switch, NVLS, LL128 at 8 a node."""
    from collbench.models.card_links import card_links
    from collbench.models.nccl_graph import node_of
    from collbench.models.predict import price_fits
    from collbench.models.priced import Shapes
    from collbench.topology.bandwidth import compute_capability, nvlink_bridge, pcie_card

    nvl = "NVIDIA H100 NVL"
    assert gpu_links(nvl) is None and node_of(nvl, 8, NodeFacts()) is None
    assert link_floor("all-reduce", 8, 1, nvl) is None
    assert pcie_card(nvl) and compute_capability(nvl) == 90 and arch_of(None, nvl) == "hopper"
    bridge = nvlink_bridge(nvl)
    assert bridge is not None and bridge.bridge_gbps == 300.0 and bridge.pcie_generation == 5
    pair = card_links(nvl, None)
    assert pair is not None and pair.nvlink(2) and pair.assumed and not pair.nvlink(4)
    # H200 NVL's bridge joins two or four: neither an SXM board nor a pair is claimed for it.
    assert gpu_links("NVIDIA H200 NVL") is None and not pcie_card("NVIDIA H200 NVL")
    assert gpu_links("NVIDIA H100 80GB HBM3") is not None  # the SXM board stays one
    fit = dataclasses.replace(_fit("all_reduce_perf-2080ti-x2-autodl.log"), device=nvl)
    (eight,), _, notes = price_fits([fit], 8, 1, shapes=Shapes({2: 1}))
    assert any("LL128 off and PCI latencies at 8 ranks a node" in n and "H100 NVL is a PCIe card" in n for n in notes)
    sizes = [float(1 << k) for k in range(3, 31)]
    assert all("/LL128" not in eight.basis(s) and "nvls" not in eight.basis(s) for s in sizes)
