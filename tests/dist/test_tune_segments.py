"""A thorough tune also sweeps the pipelined algorithms at a second segment size, from its threshold up."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.tuning import pipeline

pytestmark = pytest.mark.dist


def test_second_segment_size_is_swept_for_pipelined_algorithms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = pipeline.Depth(1024, 64 << 10, 8.0, 0.02, 1, 16 << 10, extra_from_bytes=64 << 10, rounds=1)
    monkeypatch.setattr(pipeline, "THOROUGH", small)
    config = pipeline.TuneConfig(ranks=2, backend="gloo", quick=False, timeout_s=120.0, output=tmp_path / "p.yaml")

    rows = pipeline._sweep(config, None, None)

    second = [r for r in rows if r.segment_bytes == 16 << 10]
    assert second, "no row at the second segment size"
    assert {r.algo for r in second} <= set(pipeline.SEGMENTED)
    assert {r.size_bytes for r in second} == {64 << 10}
    assert all(r.wrong == 0 for r in rows)
    assert {r.size_bytes for r in rows if r.segment_bytes != 16 << 10} == {1024, 8192, 64 << 10}
