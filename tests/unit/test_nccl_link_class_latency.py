"""A fit's latency scale calibrates only the link class it measured (issue 32, item 3).

NCCL's latencies (NVIDIA/nccl v2.30.7, commit 5067397c, ``src/graph/tuning.cc``, ``ncclTopoTuneModel``)
are a base latency a call (line 384, ``baseLatencies``), hops within a node (line 385: ``intraLat``,
``hwLatencies`` of the node's link class, NVLink or PCI) and hops across the network (lines 387-391:
``interLat``, ``hwLatencies[NET]``, and the ring's network overhead, lines 405-410: "Inter-node rings
still have to launch nsteps * net overhead"). A ring pays ``nsteps - nInterSteps`` intra-node hops and
``nInterSteps`` network hops (lines 411-412); a tree ``2 ((nRanks / nNodes - 1) intraLat + log2i(nNodes)
interLat)`` (line 416); NVLS-tree ``intraLat + 2 log2i(nNodes) interLat`` (line 428). A fit within one
node measured the base and its links' hops, never ``interLat``: asked across nodes, its scale applies
to those, and the network's terms stay NCCL's own. A fit across nodes measured both, mixed: its one
scale applies to both, as before. The GB200 logs are in tests/fixtures/real (SOURCES.md); a GB200
"node" is an NVL72 rack (benchmarks/README.md).
"""

from __future__ import annotations

import dataclasses

import pytest
from gb200_logs import RACKS, gb200

from collbench.models import nccl_cost
from collbench.models.nccl_cost import nccl_choice
from collbench.models.nccl_graph import NodeFacts
from collbench.models.nccl_machine import NcclMachine
from collbench.models.predict import price_fits
from collbench.models.predict_native import _residual, nccl_machine_for
from collbench.models.priced import Shapes
from collbench.schedules.ops import Op

_SIMPLE = 2
"""Simple's index in NCCL's protocols (LL, LL128, Simple)."""
NVLS_OFF = NodeFacts(nvls=False)
"""``predict --no-nvls``: the GB200 runs' own setting (NCCL_NVLS_ENABLE=0, benchmarks/README.md)."""


def _latency(machine: NcclMachine, algo: str, ranks: int, nodes: int) -> float:
    """The latency of ``algo``/Simple all-reduce as nccl_choice scales it."""
    split = nccl_cost._scales(machine)
    lat, _ = nccl_cost._latency(machine, Op.ALL_REDUCE, algo, _SIMPLE, ranks, nodes, None, split or (1.0, 1.0))
    return lat if split is not None else lat * machine.latency_scale


def test_the_network_latency_terms_keep_their_own_scale() -> None:
    # Blackwell on Grace (getNetOverhead: 1 us off x86, x3 for Simple), NVLink within a node.
    s = 1.19
    split = NcclMachine(bus_bw_gbps=720.0, arch="blackwell", latency_scale=s, net_latency_scale=1.0)
    # Tree, 72 GPUs a node on 2 nodes: base 8.4 (line 151) and 71 NVLink hops of 4.0 each way (line
    # 160) at the fitted scale; one network hop of 14 each way (line 172) at NCCL's own.
    assert _latency(split, "tree", 144, 2) == pytest.approx(s * (8.4 + 2 * 71 * 4.0) + 2 * 14.0)
    # Ring, 2 (nNodes - 1) = 2 network steps of 14 among 2 (144 - 1) = 286 (lines 411-412).
    assert _latency(split, "ring", 144, 2) == pytest.approx(s * (8.4 + 284 * 3.4) + 2 * 14.0)
    # The ring's intra-node steps cost at least the network's overhead (line 410), NCCL's own: 3 us
    # where the fitted NVLink hop (x0.5 of 3.4) is less.
    fast = dataclasses.replace(split, latency_scale=0.5)
    assert _latency(fast, "ring", 144, 2) == pytest.approx(0.5 * 8.4 + 284 * 3.0 + 2 * 14.0)
    # NVLS-tree (no base latency): 25 us within the node, 2 log2i(4) network hops of 20.9 (lines 166, 174).
    assert nccl_cost.switch_latency(split, "nvls_tree", 32, 4, None, (s, 1.0)) == pytest.approx(
        (s * 25.0 + 2 * 2 * 20.9, 2 * 2 * 20.9)
    )
    # On one node there is no network term: the split changes nothing.
    one = dataclasses.replace(split, net_latency_scale=None)
    assert _latency(split, "ring", 72, 1) == pytest.approx(_latency(one, "ring", 72, 1))
    # Without the split, one scale multiplies both classes (a fit across nodes), as before.
    mixed = dataclasses.replace(split, net_latency_scale=s)
    for size in (8.0, 1 << 20, 1 << 30):
        a = nccl_choice(one, "all-reduce", 144, 2, size, smooth=True)
        b = nccl_choice(mixed, "all-reduce", 144, 2, size, smooth=True)
        assert (a.algo, a.proto) == (b.algo, b.proto) and a.time_us == pytest.approx(b.time_us, rel=1e-12)


def test_a_racks_fit_across_racks_scales_its_nvlink_latencies_and_leaves_the_networks_nccls() -> None:
    # The one-rack fit (NVLS off, as its job ran) calibrates the ring's 142 NVLink hops: x1.19. Across
    # two racks the tree (512 MiB) and the ring (16 GiB) add network hops, which it never measured.
    one, _ = gb200(72)
    rack = nccl_machine_for(one, 1, "blackwell", True, NVLS_OFF)
    s = rack.latency_scale
    assert 1.1 < s < 1.3
    (entry,), _, notes = price_fits([one], 144, 2, shapes=Shapes(RACKS), nccl_arch="blackwell", nccl_facts=NVLS_OFF)
    assert any("network latencies NCCL's own, unmeasured" in n for n in notes)
    tree, ring = 1 << 29, 1 << 34
    # What the model missed at the rack's own sizes, carried (held beyond its largest, 8 GiB).
    missed = {
        size: _residual(one, 1, "blackwell", True, NVLS_OFF, min(size, one.max_bytes))[0] for size in (tree, ring)
    }
    assert "picks tree/Simple" in entry.basis(tree) and "picks ring/Simple" in entry.basis(ring)
    # The miss goes with the fitted terms, not the network's (test_a_one_node_fits_miss_is_not_carried_...).
    assert entry.latency_us(tree) == pytest.approx(missed[tree] * s * (8.4 + 2 * 71 * 4.0) + 2 * 14.0)
    # The ring's plateau factor across nodes (x1.4 on Blackwell at this size) multiplies its latency.
    assert entry.latency_us(ring) == pytest.approx(1.4 * (missed[ring] * s * (8.4 + 284 * 3.4) + 2 * 14.0))
    assert "network latencies NCCL's own (unmeasured)" in entry.basis(tree)


def test_a_one_node_fits_miss_is_not_carried_onto_nccls_own_network_latencies() -> None:
    # What the model misses at the fit's own shape (one rack: no network term in it) is a residual of the
    # terms the rack measured. tuning.cc line 653 prices each term from its own figures, and across racks
    # the network's (interLat, line 412's nInterSteps; line 416's log2i(nNodes) hops) are NCCL's own: the
    # miss goes with the base, the NVLink hops and the bandwidth term, none of it with the network's.
    # Where line 410's std::max(intraLat, netOverhead) takes the network's overhead, the ring's steps
    # within a rack are the network's too; where it takes the NVLink hop, the rack's.
    one, _ = gb200(72)
    s = nccl_machine_for(one, 1, "blackwell", True, NVLS_OFF).latency_scale
    split = NcclMachine(bus_bw_gbps=883.0, arch="blackwell", latency_scale=s, net_latency_scale=1.0, x86=False)
    # The tree's two network hops, and the ring's: 2 of 14 us (Simple: 3.4 x s is above the overhead's 3).
    assert nccl_choice(split, Op.ALL_REDUCE, 144, 2, 1 << 29, smooth=True).net_latency_us == pytest.approx(2 * 14.0)
    simple = nccl_choice(split, Op.ALL_REDUCE, 144, 2, 1 << 34, smooth=True)
    assert (simple.algo, simple.proto) == ("ring", "Simple")
    assert simple.net_latency_us == pytest.approx(1.4 * 2 * 14.0)
    # Ring LL (tuning.cc lines 394-412): 0.6 x s is below the network's overhead of 1 us (getNetOverhead,
    # off x86), which every one of the 284 steps within a rack then costs, beside 2 network steps of 2.7.
    lat, net = nccl_cost._latency(split, Op.ALL_REDUCE, "ring", 0, 144, 2, None, (s, 1.0))
    assert net == pytest.approx(284 * 1.0 + 2 * 2.7) and lat == pytest.approx(s * 6.6 + net)
    # On one rack none of it is the network's.
    assert nccl_choice(split, Op.ALL_REDUCE, 72, 1, 1 << 34, smooth=True).net_latency_us == 0.0

    (entry,), _, _ = price_fits([one], 144, 2, shapes=Shapes(RACKS), nccl_arch="blackwell", nccl_facts=NVLS_OFF)
    tree = 1 << 29
    missed, _ = _residual(one, 1, "blackwell", True, NVLS_OFF, tree)
    assert missed != pytest.approx(1.0, abs=1e-4)  # x1.002: small, but a miss to carry
    own = 2 * 14.0
    fitted = s * (8.4 + 2 * 71 * 4.0)
    assert entry.latency_us(tree) == pytest.approx(missed * fitted + own, rel=1e-9)
    assert entry.latency_us(tree) != pytest.approx(missed * (fitted + own), rel=1e-9)
    assert "for what it misses, not on the network's latencies (NCCL's own)" in entry.basis(tree)


def test_a_fit_across_racks_keeps_one_scale_for_both_classes() -> None:
    # The 2-rack fit measured NVLink and network hops mixed: asked on 20 racks its scale stays on both.
    two, _ = gb200(144)
    (entry,), _, notes = price_fits([two], 1440, 20, shapes=Shapes(RACKS), nccl_arch="blackwell", nccl_facts=NVLS_OFF)
    assert not any("network latencies" in n for n in notes)
    assert "network latencies" not in entry.basis(1 << 30) and "(fitted)" in entry.basis(1 << 30)


def test_a_racks_fit_beside_one_across_racks_says_which_measured_the_network() -> None:
    # `fit 72.log 1440.log` then predict at 2 racks: up to 2 nodes NCCL prices by the links within a
    # node (tuning.cc line 306, bwIntra), so the rack's fit is priced (fit_choice.pick_for) and the
    # 20-rack one stands beside it. That one crossed the network, but a scale it fits covers 4 network
    # hops each way and 71 NVLink hops a rack together (line 416; its log's smallest size, 512 MiB,
    # tells none: NCCL's own), telling no network latency apart: the network terms stay NCCL's own, as
    # for the rack alone, and the note and basis name the fit beside it instead of asking for a run
    # across nodes (they did, before).
    one, _ = gb200(72)
    twenty, _ = gb200(1440)
    shapes = Shapes(RACKS)
    kw = {"shapes": shapes, "nccl_arch": "blackwell", "nccl_facts": NVLS_OFF}
    (both,), _, notes = price_fits([one, twenty], 144, 2, **kw)
    (alone,), _, alone_notes = price_fits([one], 144, 2, **kw)
    assert both.fit is one
    beside = "network latencies NCCL's own (x1440 across 20 nodes crossed the network, but told none apart from"
    assert any(beside in n and n.endswith("within a node), so the time is likely too short") for n in notes)
    assert not any("fit a run across nodes beside it" in n for n in notes)
    assert any("fit a run across nodes beside it" in n for n in alone_notes)
    for size in (1 << 29, 1 << 34):
        assert beside in both.basis(size) and "(unmeasured)" not in both.basis(size)
        assert "network latencies NCCL's own (unmeasured)" in alone.basis(size)
        # What the note says was used is what was used: the rack's scale, NCCL's network latencies.
        assert both.latency_us(size) == pytest.approx(alone.latency_us(size), rel=1e-12)
        assert both.time_us(size) == pytest.approx(alone.time_us(size), rel=1e-12)


def test_beyond_two_racks_the_fit_across_racks_is_priced_whole() -> None:
    # Beyond 2 nodes NCCL prices by bwInter, what the 20-rack fit measured: it is priced, its one scale
    # on both classes; nothing of the rack's fit reaches its network terms.
    one, _ = gb200(72)
    twenty, _ = gb200(1440)
    (entry,), _, notes = price_fits([one, twenty], 216, 3, shapes=Shapes(RACKS), nccl_arch="blackwell",
                                    nccl_facts=NVLS_OFF)  # fmt: skip
    assert entry.fit is twenty
    assert not any("network latencies" in n for n in notes)
    # Its one scale on both classes, which its sizes (512 MiB up) do not tell: NCCL's own.
    basis = entry.basis(1 << 30)
    assert "network latencies" not in basis and "NCCL's own latencies (no size tells them)" in basis
