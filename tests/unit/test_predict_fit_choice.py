"""Which fit prices a shape when several of one collective were measured (issue 32, item 6): the one
whose links NCCL's model uses there. tuning.cc takes a graph's ``bwIntra`` up to two nodes and its
``bwInter`` beyond (NVIDIA/nccl v2.30.7 ``src/graph/tuning.cc``, ``ncclTopoTuneModel``: ``nNodes <= 2
? graphs[a]->bwIntra : graphs[a]->bwInter``), so a fit on one or two nodes and one on more measured
different links. CoreWeave's published GB200 NVL72 runs (tests/fixtures/real/SOURCES.md) show it: 1
and 2 racks reach ~820 GB/s busbw at 16 GiB, 20 racks ~406."""

from __future__ import annotations

import statistics

from gb200_logs import RACKS, REAL, gb200

from collbench.importers.nccl_tests import read_nccl_tests
from collbench.models.fit import fit_results
from collbench.models.fitted import Fit
from collbench.models.link_floor import with_gpu
from collbench.models.predict import predict, price_fits
from collbench.models.priced import Shapes


def _picked(fits: list[Fit], ranks: int, nodes: int) -> int:
    (entry,), refused, _ = price_fits(fits, ranks, nodes, shapes=Shapes(RACKS))
    assert not refused
    return entry.fit.world_size


def test_a_shape_takes_the_fit_of_the_links_nccl_uses_there() -> None:
    f72, f144, f1440 = (gb200(n)[0] for n in (72, 144, 1440))
    # Two racks: bwIntra, which one rack measured and twenty did not.
    assert _picked([f1440, f72], 144, 2) == 72
    # One rack: the two-rack fit, same links, over the twenty-rack one.
    assert _picked([f1440, f144], 72, 1) == 144
    # Beyond two racks: a fit beyond two racks (same class), whatever its size.
    assert _picked([f72, f1440], 288, 4) == 1440
    # None beyond two racks measured: the nearest class, then the largest.
    assert _picked([f72, f144], 1440, 20) == 144
    # The measured shape itself always.
    assert _picked([f72, f144, f1440], 72, 1) == 72


def test_two_racks_from_one_rack_and_twenty_take_the_rack_and_come_nearer_the_published_two() -> None:
    f72, _ = gb200(72)
    f1440, _ = gb200(1440)
    _, published = gb200(144)
    sizes = sorted(published)

    def median_error(fits: list[Fit]) -> tuple[float, set[int]]:
        report = predict(fits, 144, sizes, nodes=2, measured_nodes=RACKS, simulate_max_ranks=0)
        errors = [abs(p.time_us - published[p.size_bytes]) / published[p.size_bytes] for p in report.predictions]
        return statistics.median(errors), {p.fitted_world_size for p in report.predictions}

    # Given both, predict takes the rack's fit (bwIntra, as NCCL prices two nodes), and the published
    # two racks bear the choice out: nearer than the twenty racks' fit alone. How near is a figure of
    # bench_predict (benchmarks/README.md: 3.4% median told the runs' NCCL_NVLS_ENABLE=0, 14.6% read as
    # NVLS as here, against 116% from the 1,440-rank fit), not a bound this test holds: it read 10.6%
    # while the rack's one-node NVLS graph was wrongly carried across racks, and a bound set on that
    # figure was a bound on a defect.
    chosen, used = median_error([f1440, f72])
    alone, _ = median_error([f1440])
    assert used == {72}
    assert chosen < alone


def _a100(nodes: int) -> Fit:
    name = {2: "all_reduce_perf-dgx-a100-2node-k8s-legacy.log", 4: "all_reduce_perf-dgx-a100-4node-slurm-legacy.log"}
    rows = [r for r in read_nccl_tests(REAL / name[nodes], strict_op=False) if r.size_bytes]
    (fit,) = with_gpu(fit_results(rows).fits, "A100")
    return fit


SIZES = (8, 1 << 16, 1 << 20, 1 << 24, 1 << 28, 1 << 32)


def _times(fits: list[Fit], measured: dict[int, int], ranks: int, per_node: int) -> list[float]:
    (entry,), refused, _ = price_fits(fits, ranks, -(-ranks // per_node), shapes=Shapes(measured))
    assert not refused
    return [entry.time_us(s) for s in SIZES]


def test_fits_hand_over_without_a_drop_as_ranks_cross_a_node_class() -> None:
    # One rack's fit up to 72 ranks, two racks' from 73; DGX A100: two nodes' fit up to 16 ranks, four
    # nodes' from 17, where alone it put 53 us at 64 KiB on 17 ranks against 76 us on 16. More ranks
    # and nodes are never faster.
    racks = [gb200(72)[0], gb200(144)[0]]
    a100 = [_a100(2), _a100(4)]
    for fits, measured, per_node, ranks in (
        (racks, {72: 1, 144: 2}, 72, (72, 73, 76, 100, 144, 145, 200)),
        (a100, {16: 2, 32: 4}, 8, (8, 9, 15, 16, 17, 24, 32, 33)),
    ):
        previous = _times(fits, measured, ranks[0], per_node)
        for n in ranks[1:]:
            times = _times(fits, measured, n, per_node)
            assert all(b >= a for a, b in zip(previous, times, strict=True)), (n, previous, times)
            previous = times


def test_a_time_raised_to_a_smaller_class_says_so() -> None:
    fits = [_a100(2), _a100(4)]
    measured = Shapes({16: 2, 32: 4})
    (entry,), _, _ = price_fits(fits, 17, 3, shapes=measured)
    (alone,), _, _ = price_fits(fits[1:], 17, 3, shapes=measured)
    (two,), _, _ = price_fits(fits[:1], 16, 2, shapes=measured)
    assert entry.fit.world_size == 32
    assert alone.time_us(1 << 16) < two.time_us(1 << 16) == entry.time_us(1 << 16)
    assert "what all-reduce native nccl x16 on 2 nodes predicts for 16 ranks on 2 nodes" in entry.basis(1 << 16)
    # Times in plain figures, milliseconds where large (it read 'raised from 1.043e+04 us').
    assert " ms, what " in entry.basis(1 << 30) and "e+" not in entry.basis(1 << 30)
    # Where the four-node fit is the slower (8 B, 1 KiB, 16 MiB here), it stands, and its basis says
    # nothing of a floor.
    for size in (8, 1 << 10, 1 << 24):
        assert alone.time_us(size) >= two.time_us(size)
        assert entry.time_us(size) == alone.time_us(size)
        assert "raised" not in entry.basis(size)


def test_a_raised_time_reads_in_plain_figures_at_every_magnitude() -> None:
    from collbench.units import time_text

    # '.4g' alone wrote 9999.7 us as '1e+04 us' and 12.5 s as '1.25e+04 ms'.
    said = {t: time_text(t) for t in (53.19, 9999.7, 10_960.0, 9_999_700.0, 12.5e6, 3.6e10)}
    assert said == {
        53.19: "53.19 us",
        9999.7: "10 ms",
        10_960.0: "10.96 ms",
        9_999_700.0: "10 s",
        12.5e6: "12.5 s",
        3.6e10: "36,000 s",
    }
