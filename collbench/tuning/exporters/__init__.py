"""Exporters: a profile turned into what jobs and libraries consume.

* :mod:`.nccl_tuner`: config lines for NCCL's example tuner plugin (``NCCL_TUNER_CONFIG_FILE``);
* :mod:`.ompi_rules`: Open MPI coll/tuned classic dynamic rules;
* :mod:`.nccl_env`: the ``NCCL_ALGO`` setting, where one variable can express the profile.

Each exporter is a pure function ``Profile -> str``.
"""

from __future__ import annotations

from collbench.tuning.exporters.nccl_env import export_nccl_env
from collbench.tuning.exporters.nccl_tuner import export_nccl_tuner
from collbench.tuning.exporters.ompi_rules import export_ompi_rules

__all__ = ["export_nccl_env", "export_nccl_tuner", "export_ompi_rules"]
