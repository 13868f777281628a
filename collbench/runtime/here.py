"""The runtime's answers to what a backend asks about this machine (``collbench.backends.base.Here``).

Every answer is looked up when asked, through the module that owns it (so that tests replacing
``environment.nccl_version`` or ``mpi.plan.installed_algorithms`` replace it here too); torch, CUDA and
Open MPI's tools are touched only when a backend asks.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collbench.ompi.algorithms import OmpiAlgorithm


class RuntimeHere:
    """This process's machine and job, as the backends see it (stateless: one shared instance)."""

    def gpus(self) -> int:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0

    def check_nccl_usable(self, local_ranks: int) -> None:
        # Imported here only: the NCCL module talks to the GPU runtime.
        from collbench.runtime.cuda.nccl import check_nccl_usable

        check_nccl_usable(local_ranks)

    def nccl_version(self) -> str:
        from collbench.runtime.host import environment

        return environment.nccl_version()

    def job_shape(self, ranks: int | None) -> tuple[int, int]:
        from collbench.runtime.launch.launchers import detect_job

        job = detect_job()
        if job is None:
            return ranks or 1, 1
        # The nodes the ranks report (launch/membership.py), not world // local size: mpirun's
        # --map-by node and uneven nodes break that. Every rank asks here alike (tune's plan).
        from collbench.runtime.launch.session import job_membership

        members = job_membership()
        return job.world_size, members.nodes if members is not None else 1

    def environ(self, name: str, default: str) -> str:
        return os.environ.get(name, default)

    def ompi_algorithms(self) -> dict[str, tuple[OmpiAlgorithm, ...]]:
        from collbench.runtime.mpi import plan

        return plan.installed_algorithms()

    def check_mpi_tools(self) -> None:
        from collbench.runtime.mpi.ompi_tools import find_tools

        find_tools()

    def check_mpi_world_size(self, world_size: int | None) -> int:
        from collbench.runtime.mpi.ompi_tools import check_world_size

        return check_world_size(world_size)


HERE = RuntimeHere()
"""What every backend question in the runtime, the tuning and the CLI is asked with."""
