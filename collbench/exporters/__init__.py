"""Exporters: a profile turned into what jobs and libraries consume.

:mod:`.registry` lists every export once (``collbench export`` makes its commands of it): each is a
function ``(Profile, ExportRequest) -> Exported`` over the modules here (NCCL's tuner config, env,
plugin build and graph XML; Open MPI's rules and rankfile; MPICH's selection file and variables).
The text-only helpers below are kept for the Python API and the tests.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["export_nccl_env", "export_nccl_tuner", "export_ompi_rules"]

_HOMES = {name: f"collbench.exporters.{name.removeprefix('export_')}" for name in __all__}


def __getattr__(name: str) -> Any:
    # Lazy (PEP 562): `collbench export --help` imports the registry, not every exporter and the profile.
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'collbench.exporters' has no attribute {name!r}")
