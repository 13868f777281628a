"""One model across shapes (issue 32, item 2): NCCL's native is one model at every rank and node count,
the measured shape one point of it, and it never gets cheaper as ranks are added at a fixed size and
ranks a node."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from collbench.importers.nccl_tests import read_nccl_tests
from collbench.importers.nodes import nodes_from_devices
from collbench.models.fit import fit_results
from collbench.models.fitted import Fit
from collbench.models.link_floor import with_gpu
from collbench.models.nccl_graph import NodeFacts
from collbench.models.predict import price_fits
from collbench.models.predict_defaults import default_nodes
from collbench.models.priced import Shapes

REAL = Path(__file__).parents[1] / "fixtures" / "real"
LOGS = (
    "all_reduce_perf-h100-2node-mpirun-gcp.log",
    "all_reduce_perf-dgx-a100-4node-slurm-legacy.log",
    "all_reduce_perf-gb200-72rank-one-rank-line.log",
    "all_reduce_perf-2080ti-x2-autodl.log",
    "all_reduce_perf-p5-2node-mpijob-readme-excerpt.log",
)
NODES = {
    "all_reduce_perf-dgx-a100-4node-slurm-legacy.log": 4,
    "all_reduce_perf-p5-2node-mpijob-readme-excerpt.log": 2,
}
"""Logs whose node count their sources say and their lines do not (benchmarks/README.md)."""
SIZES = (8, 4096, 1 << 20, 1 << 24, 1 << 28, 1 << 32)
RANKS = (*range(2, 34), 48, 64, 72, 96, 128, 144, 256, 1024, 1440, 4096)


GPUS = {
    "all_reduce_perf-h100-2node-mpirun-gcp.log": "H100",
    "all_reduce_perf-dgx-a100-4node-slurm-legacy.log": "A100",
    "all_reduce_perf-gb200-72rank-one-rank-line.log": "GB200",
    "all_reduce_perf-p5-2node-mpijob-readme-excerpt.log": "H100",
}
"""The GPU of each multi-node log, as its source says (``predict --gpu``): on one node NCCL's model
takes the bus bandwidth of its NVLinks, which a fit across nodes did not measure."""


def _fit(name: str) -> tuple[Fit, dict[int, int]]:
    path = REAL / name
    rows = nodes_from_devices(path, [r for r in read_nccl_tests(path, strict_op=False) if r.size_bytes > 0], [])
    (fit,) = fit_results(rows).fits
    if name in GPUS:
        (fit,) = with_gpu([fit], GPUS[name])
    nodes = NODES.get(name, rows[0].nodes)
    return fit, ({fit.world_size: nodes} if nodes > 0 else {})


@pytest.mark.parametrize("name", LOGS)
def test_never_cheaper_with_more_ranks_at_the_measured_ranks_a_node(name: str) -> None:
    fit, measured = _fit(name)
    assert not fit.distrust()
    previous: list[float] | None = None
    decreases = []
    for ranks in RANKS:
        nodes, _ = default_nodes(ranks, measured)
        (entry,), refused, _ = price_fits([fit], ranks, nodes, shapes=Shapes(measured))
        assert not refused
        times = [entry.time_us(s) for s in SIZES]
        assert all(b >= a for a, b in itertools.pairwise(times)), (ranks, times)
        if previous is not None:
            decreases += [
                (ranks, s, a, b)
                for s, a, b in zip(SIZES, previous, times, strict=True)
                # NVLS within one node reduces in the NVSwitch: each GPU sends its buffer once whatever
                # the ranks, and NCCL's model gives it a head (a channel) a GPU (tuning.cc: nChannels
                # x bw), so its time falls as GPUs join the node (H100: 8 GPUs' NVLS over 4 GPUs'
                # ring). Its cost does not grow with n; every other choice's must not fall.
                if b < a and not (nodes == 1 and "picks nvls/" in entry.basis(s))
            ]
        previous = times
    assert decreases == []


def test_the_measured_shape_is_one_point_of_the_same_model() -> None:
    fit, measured = _fit("all_reduce_perf-h100-2node-mpirun-gcp.log")
    assert measured == {16: 2}
    (at,), _, _ = price_fits([fit], 16, 2, shapes=Shapes(measured))
    (below,), _, _ = price_fits([fit], 15, 2, shapes=Shapes(measured))
    (above,), _, _ = price_fits([fit], 17, 3, shapes=Shapes(measured))
    for size in (8, 1 << 20, 1 << 30):
        # At the measured shape and sizes the model is the fit itself.
        assert at.time_us(size) == pytest.approx(fit.predict_us(size), rel=1e-6)
        # One rank either side moves it a little, never a jump to another model (the log's
        # 123 us at 8 B against NCCL's own 20 us, say).
        assert below.time_us(size) <= at.time_us(size) <= above.time_us(size) < 1.3 * at.time_us(size)
        assert below.time_us(size) > 0.75 * at.time_us(size)
    assert "the fit itself at its measured shape, which is NCCL's model" in at.basis(1 << 20)
    assert "for what it misses at the measured shape" in above.basis(1 << 20)


def test_the_default_node_count_keeps_the_measured_ranks_a_node() -> None:
    measured = {16: 2}
    assert [default_nodes(r, measured)[0] for r in (2, 4, 5, 8, 9, 16, 17, 1440)] == [1, 1, 1, 1, 2, 2, 3, 180]
    assert "the last holding 1" in default_nodes(17, measured)[1]
    # Measured at 2 ranks a node: 4 ranks on 2 nodes, 5 on 3 (never fewer nodes for more ranks).
    assert [default_nodes(r, {4: 2})[0] for r in (4, 5, 6)] == [2, 3, 3]


def test_nvls_heads_are_those_of_the_node_holding_fewest_ranks() -> None:
    # NCCL aligns every rank's graphs on the smallest any rank found (src/init.cc, v2.30.7 lines
    # 1437-1442: graphs[a]->nChannels = std::min(...)), and a rank's NVLS search has a head a GPU of its
    # own node: 13 ranks filling nodes of 8 run 5 heads (the last node's), not ceil(13 / 2) = 7; 9 ranks
    # leave one GPU on the last node, which searches no NVLS graph (nvls.cc: gpuCount < 2), so none runs.
    fit, measured = _fit("all_reduce_perf-h100-2node-mpirun-gcp.log")
    facts = NodeFacts(nics=8, nic_gbps=50.0)
    (entry,), _, _ = price_fits([fit], 13, 2, shapes=Shapes(measured), nccl_facts=facts)
    assert "NVLS: 5 heads x 40 GB/s, 48 GB/s a NIC" in entry.basis(1 << 30)
    (entry,), _, _ = price_fits([fit], 9, 2, shapes=Shapes(measured), nccl_facts=facts)
    assert all("heads" not in entry.basis(1 << k) for k in range(3, 34, 2))
    (entry,), _, _ = price_fits([fit], 16, 2, shapes=Shapes(measured), nccl_facts=facts)
    assert "NVLS: 8 heads x 40 GB/s, 48 GB/s a NIC" in entry.basis(1 << 30)
    # One node of 5 GPUs is the only node: its own search, 5 heads x 60 GB/s (6 x 60 <= 370.8).
    (entry,), _, _ = price_fits([fit], 5, 1, shapes=Shapes(measured), nccl_facts=facts)
    assert "NVLS: 5 heads x 60 GB/s" in entry.basis(1 << 30)


def test_where_nccls_own_figures_pass_over_the_cheaper_family_the_fall_is_its_choice_and_said() -> None:
    # NCCL picks the least of a cost table filled from tuning.cc's own constants (src/enqueue.cc
    # topoGetAlgoInfo, v2.30.7 lines 2032-2044); a calibration it never sees. At a power of two of
    # nodes log2i(nNodes) steps up NVLS-tree's latency (intraLat + 2 log2i(nNodes) interLat, tuning.cc
    # line 428, NET 20.9 us) more than the tree's (2 ((nRanks / nNodes - 1) intraLat + log2i(nNodes)
    # interLat), line 416, NET 8.5 us for LL128), so NCCL leaves NVLS-tree for the tree there: 15 -> 16
    # nodes at 16 MiB. The GCP H100 2-node fit told 8 NICs of 50 GB/s has latencies x5 NCCL's and NVLS
    # x0.56 (its NVLS-tree ran slow): on its figures the tree is cheaper on 15 nodes already, where
    # NCCL's own still price NVLS-tree cheaper, so NCCL's pick on 15 nodes takes longer than its pick
    # on 16. Each family alone rises; the fall is NCCL's choice, and the basis says so.
    fit, measured = _fit("all_reduce_perf-h100-2node-mpirun-gcp.log")
    facts = NodeFacts(nics=8, nic_gbps=50.0)
    size = float(1 << 24)
    (before,), _, _ = price_fits([fit], 120, 15, shapes=Shapes(measured), nccl_facts=facts)
    (after,), _, _ = price_fits([fit], 128, 16, shapes=Shapes(measured), nccl_facts=facts)
    assert after.time_us(size) < 0.5 * before.time_us(size)
    assert "picks nvls_tree/Simple" in before.basis(size) and "picks tree/LL128" in after.basis(size)
    assert before.fastest_us is not None and after.fastest_us is not None
    # What the fitted figures price cheapest on 15 nodes (the tree) is no slower on 16.
    assert before.fastest_us(size) <= after.time_us(size) == after.fastest_us(size)
    assert before.fastest_us(size) < 0.4 * before.time_us(size)
    assert (
        "on these figures tree/LL128 would take 570.5 us (its bandwidth NCCL's own, unmeasured), but NCCL's own "
        "price it dearer here, so NCCL does not pick it" in before.basis(size)
    )
    assert "would take" not in after.basis(size)
    # Over 1 to 64 full nodes of 8, every size from 8 B to 8 GiB: what the fitted figures price cheapest
    # never falls, and every fall of NCCL's pick is its choice (that cheapest is below it at the smaller).
    sizes = [float(1 << k) for k in range(3, 34)]
    previous: tuple[list[float], list[float]] | None = None
    falls = 0
    for nodes in range(1, 65):
        (entry,), _, _ = price_fits([fit], 8 * nodes, nodes, shapes=Shapes(measured), nccl_facts=facts)
        assert entry.fastest_us is not None
        times = [entry.time_us(s) for s in sizes]
        cheapest = [entry.fastest_us(s) for s in sizes]
        assert all(c <= t for c, t in zip(cheapest, times, strict=True))
        if previous is not None:
            for a, c, b, d in zip(*previous, times, cheapest, strict=True):
                assert d >= c, (nodes, a, b)
                if b < a:
                    falls += 1
                    assert c <= b, (nodes, a, b)
        previous = times, cheapest
    assert falls == 4
