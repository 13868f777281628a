"""compare: a known 10% slowdown at some sizes is found; pure noise at the others is not."""

from __future__ import annotations

import dataclasses
import math
import statistics

import numpy as np
import pytest
from sampled_rows import SIZES, SLOW_SIZES, sampled_row, two_runs

from collbench.errors import UserError
from collbench.report.compare import combine, compare_rows, parse_threshold
from collbench.results.row import ResultRow


@pytest.mark.parametrize("seed", range(8))
def test_the_slowdown_is_found_and_the_noise_is_not(seed: int) -> None:
    base, new = two_runs(seed)
    result = compare_rows(base, new)
    assert len(result.changes) == 2 * len(SIZES) and result.only_base == result.only_new == 0
    slow = {("ring", s) for s in SLOW_SIZES}
    flagged = {(c.algo, c.size_bytes) for c in result.changes if c.beyond_noise}
    # Nothing unchanged is flagged; a 10% change at about 4.5 standard errors is found at most sizes
    # (each point must clear more than 2 of them, so that 34 unchanged points rarely flag one).
    assert flagged <= slow and len(flagged) >= 3
    regressed = {(c.algo, c.size_bytes) for c in result.regressions(0.05)}
    assert regressed == flagged
    # A 10% slowdown does not fail a 15% threshold, however certain.
    assert result.regressions(0.15) == [] and not result.failed(0.15)
    # The few slow points do not move the whole-run factor.
    assert abs(result.run.factor - 1.0) < 0.01 and result.run.divided_out and not result.run.regressed
    for c in result.changes:
        if c.size_bytes in SLOW_SIZES and c.algo == "ring":
            assert abs(c.ratio - 1.10) < 3 * c.rel_error


def test_most_of_a_partial_slowdown_is_found_over_seeds() -> None:
    found = sum(
        c.beyond_noise and c.algo == "ring" and c.size_bytes in SLOW_SIZES
        for seed in range(8)
        for c in compare_rows(*two_runs(seed)).changes
    )
    assert found >= 0.85 * 8 * len(SLOW_SIZES)


def _drifted(rows: list[ResultRow], rng: np.random.Generator, factor: float, scatter: float) -> list[ResultRow]:
    """``rows`` as a second run of the same machine would give them: every time times ``factor`` (the
    whole run's drift) and times each point's own run-to-run change, log-normal with ``scatter``."""
    out = []
    for r in rows:
        f = factor * math.exp(rng.normal(0.0, scatter))
        out.append(
            dataclasses.replace(
                r, time_us=r.time_us * f, time_us_min=r.time_us_min * f, time_us_max=r.time_us_max * f,
                time_us_mean=r.time_us_mean * f,
            )
        )  # fmt: skip
    return out


def _sweep(rng: np.random.Generator) -> list[ResultRow]:
    return [
        sampled_row(rng, s, 200.0 + s / 1e3, algo=a, world_size=2, iters=20, jitter=0.03)
        for a in ("ring", "native")
        for s in (1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20)
    ]


def test_identical_runs_a_minute_apart_flag_nothing_despite_run_to_run_drift() -> None:
    """Two sweeps of one machine differ point by point by more than either run's own spread says
    (here 6% per point, 2% for the whole run, against within-run errors near 1.5%): judged against
    the whole-run factor and that scatter, nothing is flagged in at least 9 of 10 such pairs."""
    alarms = 0
    for seed in range(10):
        rng = np.random.default_rng(100 + seed)
        base = _sweep(rng)
        new = _drifted(_sweep(rng), rng, 1.02, 0.06)
        result = compare_rows(base, new, threshold=0.05)
        assert abs(result.run.factor - 1.02) < 0.08 and result.run.divided_out
        alarms += any(c.beyond_noise for c in result.changes) or result.failed(0.05)
    assert alarms <= 1


@pytest.mark.parametrize("seed", range(5))
def test_a_uniform_slowdown_is_a_finding_of_its_own(seed: int) -> None:
    """Every point 10% slower: no point stands out from the run, but the whole run is the regression."""
    rng = np.random.default_rng(seed)
    base = _sweep(rng)
    new = _drifted(base, rng, 1.10, 0.0)
    result = compare_rows(base, new, threshold=0.05)
    assert result.run.factor == pytest.approx(1.10) and result.run.beyond_noise and result.run.regressed
    assert not any(c.beyond_noise for c in result.changes) and result.regressions(0.05) == []
    assert result.failed(0.05) and not result.failed(0.15)
    doc = result.to_dict(0.05)
    assert doc["run"]["regressed"] and doc["run_regressed"] and doc["failed"]
    # Without a threshold, the stated bound (5%) holds the run.
    assert compare_rows(base, new).run.regressed
    assert not compare_rows(base, _drifted(base, rng, 1.03, 0.0)).run.regressed


def test_a_noisy_run_against_itself_10_percent_slower_is_a_whole_run_regression() -> None:
    """Each point's own error is large (few, jittery iterations), but every point moved alike: the
    factor is known from how alike they moved, not from how noisy each run was."""
    rng = np.random.default_rng(9)
    base = [sampled_row(rng, s, 100.0, iters=5, jitter=0.4) for s in SIZES[:12]]
    assert statistics.median(combine([r]).rel_error for r in base) > 0.05
    result = compare_rows(base, _drifted(base, rng, 1.10, 0.0), threshold=0.05)
    assert result.run.regressed and result.failed(0.05)


def test_a_few_points_are_judged_without_a_run_factor() -> None:
    rng = np.random.default_rng(2)
    base = [sampled_row(rng, s, 50.0) for s in (1024, 2048)]
    new = _drifted(base, rng, 1.5, 0.0)
    result = compare_rows(base, new)
    assert not result.run.divided_out and all(c.beyond_noise and c.run_factor == 1.0 for c in result.changes)


def test_runs_of_other_backends_hosts_or_machines_are_named() -> None:
    rng = np.random.default_rng(4)
    base = [sampled_row(rng, s, 50.0, host="a", topology_fingerprint="f1") for s in SIZES]
    new = [sampled_row(rng, s, 50.0, host="b", backend="nccl", topology_fingerprint="f1") for s in SIZES]
    new.append(sampled_row(rng, 1024, 50.0, world_size=8, host="b", backend="nccl"))
    warnings = compare_rows(base, new).warnings
    assert warnings == (
        "the runs differ in backend: BASE gloo, NEW nccl",
        "the runs differ in host: BASE a, NEW b",
        "the runs differ in world sizes: BASE 4, NEW 4, 8 (only the shared ones are compared)",
    )
    assert compare_rows(base, base).warnings == ()


def test_runs_of_other_reductions_are_named() -> None:
    # Points match on (op, algorithm, size, dtype, ranks): a run of -o sum against one of -o max, or a
    # file holding both, was compared point by point without a word. An all-gather's rows keep the
    # sweep's -o, which it never applied: nothing to say of them.
    rng = np.random.default_rng(5)
    base = [sampled_row(rng, s, 50.0) for s in SIZES]
    assert {r.redop for r in base} == {"sum"}
    new = [dataclasses.replace(r, redop="max") for r in base]
    said = "the runs' reductions: BASE sum, NEW max; rows of different reductions are compared as one point"
    assert compare_rows(base, new).warnings == (said,)
    both = compare_rows(base + new, base).warnings
    assert both == (
        "the runs' reductions: BASE max, sum, NEW sum; rows of different reductions are compared as one point",
    )
    gathers = [dataclasses.replace(r, op="all-gather") for r in base]
    assert compare_rows(gathers, [dataclasses.replace(r, redop="max") for r in gathers]).warnings == ()


def test_rows_stream_in_and_are_not_held() -> None:
    rng = np.random.default_rng(6)
    rows = [sampled_row(rng, s, 50.0) for s in SIZES]
    result = compare_rows(iter(rows), iter(rows))
    assert len(result.changes) == len(SIZES) and not any(c.beyond_noise for c in result.changes)


def test_summary_per_op_and_algorithm() -> None:
    base, new = two_runs(0)
    summaries = {s.algo: s for s in compare_rows(base, new).summaries()}
    ring, rd = summaries["ring"], summaries["recursive-doubling"]
    assert ring.points == rd.points == len(SIZES)
    assert ring.worst.size_bytes in SLOW_SIZES and ring.worst.beyond_noise
    expected = 1.10 ** (len(SLOW_SIZES) / len(SIZES))
    assert abs(ring.geomean_ratio - expected) < 0.01
    assert abs(rd.geomean_ratio - 1.0) < 0.01 and rd.beyond_noise == 0


def test_combine_uncertainty_from_spread_and_repeats() -> None:
    rng = np.random.default_rng(3)
    one = sampled_row(rng, 1024, 100.0, iters=64)
    point = combine([one])
    assert point.time_us == one.time_us
    assert point.rel_error == pytest.approx((one.time_us - one.time_us_min) / one.time_us / 8.0)
    exact = [sampled_row(rng, 1024, t, jitter=0.0, iters=1) for t in (90.0, 100.0, 110.0)]
    repeated = combine(exact)
    assert repeated.time_us == pytest.approx(100.0)
    assert repeated.rel_error == pytest.approx(10.0 / 100.0 / math.sqrt(3))


def test_points_match_on_dtype_and_ranks_and_wrong_data_counts() -> None:
    rng = np.random.default_rng(5)
    base = [sampled_row(rng, s, 50.0) for s in (1024, 2048)]
    new = [sampled_row(rng, 1024, 50.0, wrong=3), sampled_row(rng, 2048, 50.0, dtype="float16")]
    result = compare_rows(base, new)
    assert [c.size_bytes for c in result.changes] == [1024]
    assert result.only_base == 1 and result.only_new == 1
    assert result.changes[0].newly_wrong and result.regressions(0.05) == list(result.changes)


def test_bad_inputs_are_user_errors() -> None:
    rng = np.random.default_rng(1)
    four = [sampled_row(rng, 1024, 50.0)]
    eight = [sampled_row(rng, 1024, 50.0, world_size=8)]
    with pytest.raises(UserError, match="different world sizes: BASE 4 ranks, NEW 8 ranks"):
        compare_rows(four, eight)
    one = [sampled_row(rng, 1024, 50.0, world_size=1)]
    with pytest.raises(UserError, match="different world sizes: BASE 4 ranks, NEW 1 rank;"):  # '1 ranks'
        compare_rows(four, one)
    other = [sampled_row(rng, 1024, 50.0, op="broadcast")]
    with pytest.raises(UserError, match="no point matches"):
        compare_rows(four, other)


@pytest.mark.parametrize(("text", "value"), [("5%", 0.05), (" 12.5% ", 0.125), ("0.05", 0.05)])
def test_threshold_parses(text: str, value: float) -> None:
    assert parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["5", "five", "-3%", "0%", "nan%", "2000%"])
def test_threshold_rejects(text: str) -> None:
    with pytest.raises(UserError, match="--fail-above"):
        parse_threshold(text)


def test_barrier_is_compared_by_its_time() -> None:
    # Barrier moves no data: one point per algorithm at 0 bytes, its time the only thing to compare.
    from new_op_rows import barrier_rows

    base = barrier_rows("dissemination", 4, 40.0) + barrier_rows("tree", 4, 50.0)
    slower = [dataclasses.replace(r, iters=1000) for r in barrier_rows("dissemination", 4, 80.0)]
    new = slower + barrier_rows("tree", 4, 50.0)
    base = [dataclasses.replace(r, iters=1000) for r in base]
    new = [dataclasses.replace(r, iters=1000) for r in new]
    result = compare_rows(base, new)
    by_algo = {c.algo: c for c in result.changes}
    assert {(c.op, c.size_bytes) for c in result.changes} == {("barrier", 0)}
    assert by_algo["dissemination"].ratio == pytest.approx(2.0)
    assert by_algo["tree"].ratio == pytest.approx(1.0)
    assert [c.algo for c in result.regressions(0.05)] == ["dissemination"]
