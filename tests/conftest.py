"""Test-suite wide settings: GPU tests skip without CUDA."""

from __future__ import annotations

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU; none here")
    for item in items:
        # The marker itself: ``"gpu" in item.keywords`` also matches any folder named gpu above the test
        # (a checkout in .../gpu skipped the whole suite).
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip_gpu)
