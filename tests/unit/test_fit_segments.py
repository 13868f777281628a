"""Tree costs use the segments the rows ran with (issue 32 item 4): a pipelined schedule (the trees:
``AlgorithmSpec.segments_for``, what the sweep's worker builds from a point's ``segment_bytes``) takes
a step a segment, so its fit and its predictions price each size with the segments that size ran in;
rows that name no segment size ran one segment, as the sweep then built them."""

from __future__ import annotations

import dataclasses

import pytest

from collbench.models.costs import cost_terms, segments_of
from collbench.models.fit import fit_results
from collbench.models.fit_points import PointSummaries
from collbench.models.fitted import Fit
from collbench.models.priced import by_structure
from collbench.models.scaled import ScaledFit
from collbench.schedules.registry import get_algorithm
from tests.synthetic_rows import point_row

SEG = 1 << 20
SIZES = [1 << k for k in range(12, 27)]  # 4 KiB to 64 MiB: 1 to 64 segments of 1 MiB
ALPHA, BETA = 20.0, 1e-4


def _tree_rows(world: int, segment_bytes: int | None) -> list:  # type: ignore[type-arg]
    rows = []
    for size in SIZES:
        k = get_algorithm("tree").segments_for(size, segment_bytes)
        t = cost_terms("all-reduce", "tree", world, size, segments=k).time_us(ALPHA, BETA, 0.0)
        rows.append(point_row("tree", size, t, world_size=world, segment_bytes=segment_bytes))
    return rows


def test_segments_of_follows_what_the_sweep_built() -> None:
    assert segments_of("tree", 64 << 20, SEG) == 64
    assert segments_of("tree", 3 * SEG + 1, SEG) == 4
    assert segments_of("tree", 1 << 30, SEG) == 64  # MAX_SEGMENTS
    # No segment size, an unsegmented algorithm, native: one segment.
    assert segments_of("tree", 64 << 20, None) == 1
    assert segments_of("recursive-doubling", 64 << 20, SEG) == 1
    # The ring pipelines its rooted ops (a chain) in segments; its all-reduce's steps do not change.
    assert segments_of("ring", 64 << 20, SEG) == 64
    assert cost_terms("all-reduce", "ring", 8, 64 << 20, segments=64) == cost_terms("all-reduce", "ring", 8, 64 << 20)
    assert segments_of("native", 64 << 20, SEG) == 1


def test_a_tree_fit_of_segmented_rows_recovers_its_parameters_and_keeps_the_segment_size() -> None:
    (fit,) = fit_results(_tree_rows(8, SEG), piecewise=False).fits
    assert fit.segment_bytes == SEG
    assert fit.alpha_us == pytest.approx(ALPHA, rel=1e-6)
    assert fit.beta_us_per_byte == pytest.approx(BETA, rel=1e-6)
    assert fit.median_abs_pct_error == pytest.approx(0.0, abs=1e-6)
    # Its file form keeps it; a file from before fits kept it reads as one segment.
    assert Fit.from_dict(fit.to_dict()).segment_bytes == SEG
    old = {k: v for k, v in fit.to_dict().items() if k != "segment_bytes"}
    assert Fit.from_dict(old).segment_bytes is None
    with pytest.raises(ValueError, match="segment_bytes"):
        Fit.from_dict({**fit.to_dict(), "segment_bytes": 0})


def test_priced_with_one_segment_the_same_rows_were_missed() -> None:
    # Before: the fit priced every size with one segment, so the latency of 64 segments' steps went
    # into a wrong per-byte cost; with the rows' segments the model follows them exactly.
    rows = _tree_rows(8, SEG)
    unsegmented = [dataclasses.replace(r, segment_bytes=None) for r in rows]
    (wrong,) = fit_results(unsegmented, piecewise=False).fits
    (right,) = fit_results(rows, piecewise=False).fits
    assert wrong.segment_bytes is None
    assert right.max_abs_pct_error < 1e-6 < wrong.max_abs_pct_error


def test_the_point_keeps_the_segment_size_of_the_row_that_gave_its_time() -> None:
    fast = point_row("tree", 1 << 24, 100.0, world_size=8, segment_bytes=SEG)
    slow = point_row("tree", 1 << 24, 150.0, world_size=8, segment_bytes=4 * SEG)
    (point,) = PointSummaries().extend([slow, fast]).points()
    assert point.time_us == 100.0 and point.segment_bytes == SEG


def test_at_another_world_size_each_size_keeps_its_segments() -> None:
    (fit,) = fit_results(_tree_rows(8, SEG), piecewise=False).fits
    scaled = ScaledFit.of(fit)
    for world in (8, 16, 64):
        for size in (1 << 14, 1 << 22, 1 << 26):
            k = segments_of("tree", size, SEG)
            expected = cost_terms("all-reduce", "tree", world, size, segments=k).time_us(ALPHA, BETA, 0.0)
            assert scaled.time_us(size, world) == pytest.approx(expected, rel=1e-6)


def test_a_prediction_says_the_latency_and_steps_of_the_segments_it_prices() -> None:
    # predict priced the time with each size's segments, but its latency column and basis came from
    # one size (1 byte, one segment): a 2-rank tune's tree at 64 ranks read '942 us' latency and
    # '12 steps' at 1 MiB and at 256 MiB alike, where 256 MiB ran 64 segments of 4 MiB (75 steps).
    (fit,) = fit_results(_tree_rows(8, SEG), piecewise=False).fits
    priced = by_structure(fit, 64)
    for size in (1 << 14, 1 << 22, 1 << 26):
        terms = cost_terms("all-reduce", "tree", 64, size, segments=segments_of("tree", size, SEG))
        assert priced.latency_us(size) == pytest.approx(ALPHA * terms.alpha, rel=1e-6)
        assert priced.time_us(size) == pytest.approx(terms.time_us(ALPHA, BETA, 0.0), rel=1e-6)
    assert "12 steps at x64" in priced.basis(1 << 14)
    assert "(4 segments of 1 MiB) at x64" in priced.basis(1 << 22)
    assert "(64 segments of 1 MiB) at x64" in priced.basis(1 << 26)
    # An unsegmented fit says one structure at every size, as before.
    (plain,) = fit_results(_tree_rows(8, None), piecewise=False).fits
    assert by_structure(plain, 64).basis(1 << 26) == by_structure(plain, 64).basis(1 << 14)
