"""On Open MPI (``--backend mpi``), what a tune measures: Open MPI's own algorithms, each forced in turn.

``export ompi-rules`` hands Open MPI only what Open MPI runs, so its rules must be chosen among Open
MPI's own algorithms as they ran here: coll/tuned's fixed decision (``native``, nothing forced) and
every algorithm the installed Open MPI can be forced to run for the asked ops (``native:<name>``, the
name ``ompi_info`` prints). collbench's own schedules run over gloo or NCCL, not inside Open MPI, so
they are not measured here. The selection then keeps the fixed decision wherever no forced algorithm
beats it beyond the noise (its ties go to ``native``).

all-to-all, gather, scatter and barrier have coll/tuned algorithms like the first five
(``collbench.ompi.algorithms``); sendrecv is ``MPI_Sendrecv``, point-to-point, so only ``native`` is
measured for it and its rules write nothing for Open MPI.
"""

from __future__ import annotations

from collbench.schedules.ops import Op
from collbench.tuning.config import TuneConfig

MPI_BACKEND = "mpi"


def is_mpi_tune(config: TuneConfig) -> bool:
    """Whether ``config`` tunes Open MPI's own collectives."""
    return config.backend.strip().lower() == MPI_BACKEND


def mpi_variant_names(config: TuneConfig) -> tuple[str, ...]:
    """``native`` and every ``native:<algorithm>`` this Open MPI has for an asked op, once each, in
    ``ompi_info``'s order (empty unless the backend is mpi).

    Raises BackendUnavailableError (one line) where Open MPI's tools are missing, ConfigError where its
    coll/tuned lists no algorithm.
    """
    if not is_mpi_tune(config):
        return ()
    from collbench.ompi.algorithms import COLLECTIVE_FOR_OP, NATIVE
    from collbench.runtime.mpi.plan import installed_algorithms

    have = installed_algorithms()
    ops = list(Op) if any(o.strip().lower() == "all" for o in config.ops) else [Op.parse(o) for o in config.ops]
    names: dict[str, None] = {NATIVE: None}
    for op in ops:
        names.update((algo.algo, None) for algo in have.get(COLLECTIVE_FOR_OP[op.value], ()))
    return tuple(names)
