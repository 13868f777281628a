"""Extra tune rounds re-measure only tied sizes and algorithms, until separated or out of rounds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from synthetic_rows import point_row

from collbench.results.row import ResultRow
from collbench.runtime.sweep import run as sweep_mod
from collbench.tuning.config import TuneConfig
from collbench.tuning.placement import Placement
from collbench.tuning.rounds import settled_fraction, unsettled
from collbench.tuning.selection import measured_points
from collbench.tuning.sweeps import extra_rounds


def _row(algo: str, size: int, t: float) -> ResultRow:
    return point_row(algo, size, t, iters=100, spread=0.01)


def _first_rounds() -> list[ResultRow]:
    # 1 KiB: tree clearly fastest. 4 KiB: ring and tree 1% apart (tied), native far behind.
    rows = []
    for _ in range(2):
        rows += [_row("tree", 1024, 50.0), _row("ring", 1024, 90.0), _row("native", 1024, 100.0)]
        rows += [_row("tree", 4096, 60.0), _row("ring", 4096, 60.6), _row("native", 4096, 100.0)]
    return rows


def test_unsettled_names_the_tied_sizes_and_algorithms_only() -> None:
    (item,) = unsettled(measured_points(_first_rounds()))
    assert item.op == "all-reduce"
    assert item.sizes == (4096,)
    assert set(item.algos) == {"tree", "ring"}
    assert settled_fraction(measured_points(_first_rounds())) == (1, 2)


def test_extra_rounds_measure_ties_until_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []

    def fake_run_sweep(config: Any, progress: Any = None) -> list[ResultRow]:
        # Stands in for the ranks: the two tied algorithms stay 1% apart at every round.
        calls.append(config)
        times = {"tree": 60.0, "ring": 60.6}
        return [_row(a, config.min_bytes, times[a]) for a in config.algos]

    monkeypatch.setattr(sweep_mod, "run_sweep", fake_run_sweep)
    config = TuneConfig(ranks=2, quick=True, output=tmp_path / "p.yaml")
    notes: list[str] = []
    extra, _ = extra_rounds(config, Placement(), None, _first_rounds(), notes)
    depth = config.depth
    assert len(calls) == depth.max_rounds - depth.rounds
    assert all((c.min_bytes, c.max_bytes) == (4096, 4096) for c in calls)
    assert all(set(c.algos) == {"tree", "ring"} for c in calls)
    assert len(extra) == 2 * len(calls)
    assert "separated from the runner-up beyond the measured noise at 1 of 2 sizes" in notes[0]


def test_extra_rounds_stop_once_separated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []

    def fake_run_sweep(config: Any, progress: Any = None) -> list[ResultRow]:
        # Re-measured, tree turns out 20% faster than ring's best: one round separates the winner.
        calls.append(config)
        times = {"tree": 50.0, "ring": 72.0}
        return [_row(a, config.min_bytes, times[a]) for a in config.algos] * 4

    monkeypatch.setattr(sweep_mod, "run_sweep", fake_run_sweep)
    config = TuneConfig(ranks=2, quick=True, output=tmp_path / "p.yaml")
    notes: list[str] = []
    extra_rounds(config, Placement(), None, _first_rounds(), notes)
    assert len(calls) == 1
    assert "at 2 of 2 sizes" in notes[0]
