"""What the netns tests share: benchmarks/netns.py (the namespace cluster), loaded once, and the mark
that skips a test where namespaces cannot be built.

benchmarks/ is not a package and its ``netns`` would clash with this folder's name, so the helper is
loaded from its file under a name of its own.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
_NAME = "collbench_bench_netns"


def _load() -> ModuleType:
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    spec = importlib.util.spec_from_file_location(_NAME, REPO / "benchmarks" / "netns.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


netns = _load()
_WHY = netns.netns_unavailable()
needs_netns = pytest.mark.skipif(_WHY is not None, reason=f"network namespaces cannot be made here: {_WHY}")
"""Skips a test where namespaces cannot be built (no root, no iproute2), saying why."""
