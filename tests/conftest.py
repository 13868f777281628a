"""Test-suite wide settings: GPU tests skip without CUDA; a repo-relative path to the shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_TOPOLOGIES = REPO.parent / "shared" / "fixtures" / "topologies"


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
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def shared_topologies() -> Path:
    """The published topologies in ../shared/fixtures/topologies (skip where the checkout lacks them)."""
    if not SHARED_TOPOLOGIES.is_dir():
        pytest.skip(f"{SHARED_TOPOLOGIES} not found (shared/ must sit beside the checkout)")
    return SHARED_TOPOLOGIES
