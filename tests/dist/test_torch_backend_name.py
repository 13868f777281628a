"""collbench's ranks join torch.distributed under the backend's torch name (``Backend.torch_backend``), which
need not be the backend's own name: a new backend that runs collbench's ranks on one of torch's backends
under a name of its own (the count of files a fifth backend touches, issue 30, tried one) failed every rank
with torch's "Unknown backend type <name>" when its own name was handed to ``init_process_group``."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest
import torch
import torch.distributed as dist

from collbench.backends import get_backend
from collbench.backends.base import Backend
from collbench.backends.gloo import Gloo
from collbench.runtime.launch import rank_process

pytestmark = pytest.mark.dist


class _Renamed(Gloo):
    name: ClassVar[str] = "renamed"


RENAMED = _Renamed()


def test_a_rank_joins_under_the_backends_torch_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def named(name: str) -> Backend:
        return RENAMED if name == RENAMED.name else get_backend(name)

    monkeypatch.setattr(rank_process, "get_backend", named)
    store = dist.FileStore(str(tmp_path / "store"), 1)
    try:
        rank_process.init_rank(RENAMED.name, 0, 1, 30.0, store, torch.device("cpu"))
        assert dist.get_backend() == "gloo"
    finally:
        dist.destroy_process_group()
