"""A thorough tune also sweeps the pipelined algorithms at a second segment size, from its threshold up."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.schedules.registry import get_algorithm
from collbench.tuning import config as tune_config
from collbench.tuning.placement import Placement
from collbench.tuning.sweeps import fixed_rounds

pytestmark = pytest.mark.dist


def test_second_segment_size_is_swept_for_pipelined_algorithms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = tune_config.Depth(
        min_bytes=1024,
        max_bytes=64 << 10,
        step_factor=8.0,
        point_budget_s=0.02,
        warmup=1,
        extra_segment_bytes=16 << 10,
        extra_from_bytes=64 << 10,
        rounds=1,
    )
    monkeypatch.setattr(tune_config, "THOROUGH", small)
    config = tune_config.TuneConfig(ranks=2, backend="gloo", quick=False, timeout_s=120.0, output=tmp_path / "p.yaml")

    rows = fixed_rounds(config, Placement(), None)

    second = [r for r in rows if r.segment_bytes == 16 << 10]
    assert second, "no row at the second segment size"
    assert all(get_algorithm(r.algo).segmented for r in second)
    assert {r.size_bytes for r in second} == {64 << 10}
    assert all(r.wrong == 0 for r in rows)
    assert {r.size_bytes for r in rows if r.segment_bytes != 16 << 10} == {1024, 8192, 64 << 10}
