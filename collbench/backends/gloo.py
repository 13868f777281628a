"""gloo (torch.distributed): CPU ranks started by collbench, collbench's schedules and gloo's own collectives.

Always usable (every torch has gloo); ``--backend auto`` falls back to it where NCCL is not chosen. Its
ranks spin on this host's cores, so collbench pins them and raises their priority
(``runtime/host/affinity.py``, ``runtime/host/rank_priority.py``). Its profiles feed the Python API and
the DDP hook; NCCL's and Open MPI's exports take them only with ``--from-other-backend``.
"""

from __future__ import annotations

from typing import ClassVar

from collbench.backends.base import Backend, Here


class Gloo(Backend):
    name: ClassVar[str] = "gloo"
    library: ClassVar[str] = "gloo"
    torch_backend: ClassVar[str | None] = "gloo"
    places_cpu_ranks: ClassVar[bool] = True
    # ProcessGroupGloo matches its collectives by a counter, bumped only by collective calls, and its
    # point-to-point calls by the caller's tag, in slots apart from the collectives' (gloo::Slot::build
    # puts the op's prefix above the tag); gloo itself runs collectives on several worker threads at
    # once over the same connections (ProcessGroupGloo::Options::threads). So the hook's worker may
    # send and receive while DDP's thread issues native all-reduces: each kind keeps one order on
    # every rank.
    serial_issue: ClassVar[bool] = False

    def unusable_reason(self, local_ranks: int, here: Here) -> str | None:
        return None

    def chosen_by_auto(self, local_ranks: int, here: Here) -> bool:
        return True


GLOO = Gloo()
