"""Fitting from per-size summaries gathered while rows stream: repeats, order, and what a point keeps."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from synthetic_rows import make_rows, point_row

from collbench.models.fit import fit_results
from collbench.models.fit_points import PointSummaries
from collbench.results.io import iter_rows, write_rows
from collbench.results.row import ResultRow


def _two_algorithms() -> list[ResultRow]:
    # Two algorithms, so the joint gamma fit and the crossovers run too; noise, so outliers and pieces vary.
    rows = make_rows("ring", 4, 20.0, 1e-3 / 10, 1e-3 / 20, noise=0.05, seed=3)
    return rows + make_rows("recursive-doubling", 4, 15.0, 1e-3 / 10, 1e-3 / 20, noise=0.05, seed=4)


def test_rows_repeated_n_times_fit_the_same_models() -> None:
    rows = _two_algorithms()
    # As a file written three times over (three rounds of the same measurements) would give them.
    assert fit_results(rows + rows + rows) == fit_results(rows)


def test_a_repeated_point_is_fitted_at_the_smallest_decision_time_of_its_rows() -> None:
    rows = _two_algorithms()
    # Each point measured again twice: once slower (a round that load hit), once with a p25 below
    # its p50 (decision_time_us reads the p25 where a row has one).
    slower = [dataclasses.replace(r, time_us=r.time_us * 3) for r in rows]
    with_p25 = [dataclasses.replace(r, time_us=r.time_us * 2, time_us_p25=r.time_us * 0.9) for r in rows]
    fastest = [dataclasses.replace(r, time_us_p25=r.time_us * 0.9) for r in rows]
    mixed = [r for trio in zip(slower, with_p25, rows, strict=True) for r in trio]
    assert fit_results(mixed) == fit_results(fastest)


def test_points_are_kept_in_first_seen_order_and_never_grow_with_repeats() -> None:
    rows = make_rows("ring", 4, 10.0, 1e-3 / 5, noise=0.1, seed=7, in_place=(True,))[::-1]
    summaries = PointSummaries()
    for _ in range(50):
        summaries.extend(rows)
    assert len(summaries) == len(rows)
    assert summaries.rows_seen == 50 * len(rows)
    points = summaries.points()
    assert [(p.size_bytes, p.rows) for p in points] == [(r.size_bytes, 50) for r in rows]
    assert [p.time_us for p in points] == [r.time_us for r in rows]


def test_one_point_per_group_and_size_whatever_else_the_rows_differ_in() -> None:
    base = point_row("ring", 1024, 10.0, world_size=4, time_us_p25=9.0)
    same_size = [
        dataclasses.replace(base, in_place=False, time_us=8.0, time_us_p25=None),
        dataclasses.replace(base, dtype="float16", time_us=12.0, time_us_p25=11.0),
        dataclasses.replace(base, nodes=2, time_us=9.5, time_us_p25=9.5),
    ]
    others = [
        dataclasses.replace(base, size_bytes=2048),
        dataclasses.replace(base, algo="tree"),
        dataclasses.replace(base, world_size=8),
        dataclasses.replace(base, op="all-gather"),
    ]
    summaries = PointSummaries().extend([base, *same_size, *others])
    first, *rest = summaries.points()
    assert len(rest) == len(others)
    # The smallest decision time (p25, else p50) and, apart, the smallest p50.
    assert (first.rows, first.time_us, first.median_us) == (4, 8.0, 8.0)
    assert all(point.rows == 1 for point in rest)


def test_rows_without_a_positive_time_are_counted_but_not_points() -> None:
    zero = point_row("ring", 1024, 10.0, world_size=4)
    zero = dataclasses.replace(zero, time_us=0.0)
    summaries = PointSummaries().extend([zero])
    assert summaries.rows_seen == 1 and len(summaries) == 0


def test_fit_reads_its_rows_once_from_an_iterator(tmp_path: Path) -> None:
    rows = _two_algorithms()
    path = tmp_path / "r.jsonl"
    write_rows(path, rows)
    consumed: list[int] = []

    def one_at_a_time() -> Iterator[ResultRow]:
        for row in iter_rows(path):
            consumed.append(1)
            yield row

    streamed = fit_results(one_at_a_time())
    assert len(consumed) == len(rows)
    assert json.dumps(streamed.to_dict()) == json.dumps(fit_results(rows).to_dict())


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_the_fit_command_streams_the_file_to_the_same_report(tmp_path: Path, suffix: str) -> None:
    from typer.testing import CliRunner

    from collbench.cli.app import app

    rows = _two_algorithms()
    path = tmp_path / f"r{suffix}"
    write_rows(path, rows + rows)
    result = CliRunner().invoke(app, ["fit", "--json", str(path)])
    assert result.exit_code == 0, result.output
    expected = json.loads(json.dumps(fit_results(rows + rows).to_dict()))
    # fit --json adds each fit's measured node count, where every row of it says the same, and its source.
    (nodes,) = {r.nodes for r in rows}
    (source,) = {r.source for r in rows}
    for fit in expected["fits"]:
        fit["nodes"] = nodes
        fit["source"] = source
    assert json.loads(result.stdout) == expected


def _rounds(size: int, times: list[float], algo: str = "ring", **extra: object) -> list[ResultRow]:
    """One clean row per round at ``size``: each round's iterations 5% either side of its time."""
    return [point_row(algo, size, t, spread=0.05, tune_round=k, **extra) for k, t in enumerate(times)]


def _only_point(rows: list[ResultRow], algo: str = "ring") -> tuple[str, float]:
    (point,) = [p for p in PointSummaries().extend(rows).points() if p.algo == algo]
    return point.set_aside, point.time_us


def test_a_point_is_set_aside_only_where_its_own_measurement_marks_it() -> None:
    # Clean rounds some percent apart: data, at the fastest round's time, however far from any line.
    assert _only_point(_rounds(4096, [100.0, 108.0, 130.0], stall_fraction=0.0)) == ("", 100.0)
    # Every row's time among its stalls (80% of iterations >3x the fastest: the p25 is one), or in the
    # upper of two modes: set aside, saying which.
    among = point_row("ring", 4096, 900.0, time_us_p25=800.0, stall_fraction=0.8, tune_round=0)
    among = dataclasses.replace(among, time_us_min=100.0)
    why, _ = _only_point([dataclasses.replace(among, tune_round=k, stall_fraction=0.8 + k / 100) for k in range(3)])
    assert why == "all 3 rows stalled, the time among the stalls (at least 80% of iterations >3x the fastest)"
    upper = point_row("ring", 4096, 300.0, time_us_p25=250.0, stall_fraction=0.0, bimodal=True)
    why, _ = _only_point([dataclasses.replace(upper, time_us_min=100.0)])
    assert why.startswith("its only row two-moded, the time in the upper mode")


def test_the_fastest_consistent_round_gives_the_time_and_a_uniformly_slow_round_does_not() -> None:
    """The loaded tune --quick of issue 32: rabenseifner 16 KiB kept 16,808 us from a round whose every
    iteration was slow (stall fraction 0) against 304 us, the p25 of a round with a few stalls."""
    slow = point_row("rabenseifner", 16384, 17000.0, spread=0.05, time_us_p25=16808.0, stall_fraction=0.0, tune_round=0)
    # 10% of its iterations stalled (the stall regime), its p25 among the 90% that ran undisturbed.
    stalled = point_row("rabenseifner", 16384, 320.0, time_us_p25=304.0, stall_fraction=0.1, tune_round=1)
    stalled = dataclasses.replace(stalled, time_us_min=290.0, time_us_max=5000.0)
    (point,) = PointSummaries().extend([slow, stalled]).points()
    assert (point.set_aside, point.time_us, point.median_us, point.tune_round) == ("", 304.0, 320.0, 1)
    # A faster row whose p25 is itself a stall (80% of its iterations >3x its fastest) does not give the time.
    among = dataclasses.replace(stalled, time_us_p25=1000.0, time_us=1200.0, time_us_min=200.0, stall_fraction=0.8)
    assert _only_point([slow, among], "rabenseifner") == ("", 16808.0)
    # A p50 (a row without a p25) with half its iterations stalled is on their edge: not consistent.
    edge = point_row("rabenseifner", 16384, 400.0, spread=0.1, stall_fraction=0.5)
    assert _only_point([slow, edge], "rabenseifner") == ("", 16808.0)


def test_a_round_slower_than_the_others_is_left_out_whatever_the_other_algorithms_did() -> None:
    others = ("tree", "direct", "one-shot")
    # The whole machine twice as slow in round 1, or round 1 twice as slow for the ring alone: the
    # slower round is the outlier, the point is data at the faster round's time.
    slower = [r for a in ("ring", *others) for r in _rounds(4096, [100.0, 200.0], a, stall_fraction=0.0)]
    assert _only_point(slower) == ("", 100.0)
    alone = _rounds(4096, [200.0, 100.0], stall_fraction=0.0)
    alone += [r for a in others for r in _rounds(4096, [100.0, 101.0], a, stall_fraction=0.0)]
    (point,) = [p for p in PointSummaries().extend(alone).points() if p.algo == "ring"]
    assert (point.set_aside, point.time_us, point.tune_round) == ("", 100.0, 1)


def test_rows_without_noise_figures_are_data_except_a_call_of_no_bytes() -> None:
    """nccl-tests rows carry no stall fraction and no rounds: every point is data, but a 0-byte call,
    which moves nothing (NCCL returns at once for a count of 0), is no collective to model."""
    rows = [point_row("native", s, 10.0 + s / 1e3) for s in (0, 8, 1024, 1 << 20)]
    points = PointSummaries().extend(rows).points()
    assert [p.set_aside == "" for p in points] == [False, True, True, True]
    assert "0 bytes moves no data" in points[0].set_aside
    (fit,) = fit_results(rows).fits
    assert fit.points == 3 and fit.outliers == 1 and "0 B:" in fit.note


def test_a_row_without_a_stall_figure_is_consistent() -> None:
    """An older file's or another tool's row carries no stall fraction: its time is data, even 3x above
    its fastest iteration (one lucky call of an oversubscribed machine), and the fastest such row counts."""
    slow = point_row("ring", 4096, 400.0, spread=0.05)
    far = dataclasses.replace(point_row("ring", 4096, 350.0), time_us_min=100.0)
    assert _only_point([slow, far]) == ("", 350.0)
