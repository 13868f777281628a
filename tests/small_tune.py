"""The real tune pipeline made small, for the tests that run ``collbench tune --quick`` end to end on
gloo ranks: ``--quick``'s depth replaced by one that measures little, every step still taken."""

from __future__ import annotations

import dataclasses

import pytest

from collbench.tuning import config as tune_config

TINY = tune_config.Depth(
    min_bytes=1024,
    max_bytes=4096,
    step_factor=4.0,
    point_budget_s=0.01,
    warmup=0,
    extra_segment_bytes=None,
    rounds=2,
    max_rounds=2,
)
"""Every algorithm at 1 KiB and 4 KiB (two sizes: a fit needs two), 10 ms per point, no warm-up, two
rounds and no more, one segment size."""


def quick_made_small(monkeypatch: pytest.MonkeyPatch, **changes: object) -> tune_config.Depth:
    """Make ``tune --quick`` measure :data:`TINY`, with ``changes`` to its fields (``rounds=1``;
    ``min_bytes=512, max_bytes=2 << 20``: quick's own sizes, for tests whose ``-b/-e`` choose among
    them); the depth it now measures."""
    depth = dataclasses.replace(TINY, **changes)
    monkeypatch.setattr(tune_config, "QUICK", depth)
    return depth
