"""A quick tune as rank 0 of a launcher's job sees it, its sweeps faked to the same gap every round
(imported by test_tune_rounds and test_tune_reach, which check different steps of such a run).

As on four namespace hosts with two slow links: rabenseifner fastest at 1-2 MiB, native 6x behind
it (or as near as a test asks), every other algorithm 3.6x behind it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from launcher_env import free_port
from synthetic_rows import point_row

from collbench.results.row import ResultRow
from collbench.runtime.sweep import run as sweep_mod
from collbench.tuning.config import TuneConfig, check_config
from collbench.tuning.pipeline import TuneOutcome, run_tune

SIZES = (1 << 20, 2 << 20)
RABENSEIFNER_US = 110e3
"""At 2 MiB, and in proportion at 1 MiB, as every time here; every algorithm but these two 400 ms."""


def quick_tune_under_a_launcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, native_us: float = 661e3
) -> tuple[TuneOutcome, list[Any]]:
    """Run ``tune --quick -b 1M -e 2M`` on gloo as rank 0 of a one-rank torchrun-style job (under a
    launcher, as far as tune can tell), native taking ``native_us`` at 2 MiB; its outcome, and the
    config of every sweep it asked for."""
    times_us = {"rabenseifner": RABENSEIFNER_US, "native": native_us}
    calls: list[Any] = []

    def fake_run_sweep(config: Any, progress: Any = None) -> list[ResultRow]:
        # Stands in for rank 0 of the job: the asked points alone (sweep.points.plan_points keeps a
        # round's `only`), the same gap each round.
        calls.append(config)
        return [
            point_row(a, s, times_us.get(a, 400e3) * s / (2 << 20), iters=3, spread=0.05)
            for s in SIZES
            if config.min_bytes <= s <= config.max_bytes
            for a in config.algos
            if config.only is None or ("all-reduce", s, a) in config.only
        ]

    for name, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    monkeypatch.setattr(sweep_mod, "run_sweep", fake_run_sweep)
    config = TuneConfig(
        ranks=None, backend="gloo", quick=True, min_bytes=SIZES[0], max_bytes=SIZES[-1], output=tmp_path / "p.yaml"
    )
    check_config(config)
    outcome = run_tune(config, checked=True)
    assert outcome is not None
    return outcome, calls
