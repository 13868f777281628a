"""Exporters: a profile turned into what jobs and libraries consume.

:mod:`.registry` lists every export once (``collbench export`` makes its commands of it): each is a
function ``(Profile, ExportRequest) -> Exported`` over the modules here (NCCL's tuner config, env,
plugin build and graph XML; Open MPI's rules and rankfile; MPICH's selection file and variables).
The text-only helpers below are kept for the Python API and the tests.
"""

from __future__ import annotations

from collbench.exporters.nccl_env import export_nccl_env
from collbench.exporters.nccl_tuner import export_nccl_tuner
from collbench.exporters.ompi_rules import export_ompi_rules

__all__ = ["export_nccl_env", "export_nccl_tuner", "export_ompi_rules"]
