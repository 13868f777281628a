"""What a tune measures on its backend: collbench's algorithms and the backend's own, forced in turn.

A profile's exports must be chosen among what the consumer itself runs, measured: on NCCL, beside plain
``native`` and collbench's algorithms, every algorithm x protocol x channel count NCCL runs for the asked
ops on this NCCL and communicator shape (each on a communicator of its own,
``collbench.runtime.cuda.nccl.variant_group``); on Open MPI, its fixed decision and every algorithm its
coll/tuned can be forced to run (collbench's schedules do not run inside it). The backend says which
(``Backend.tune_candidates``); the selection then keeps ``native`` wherever no forced variant beats it
beyond the noise.
"""

from __future__ import annotations

from collbench.backends import Backend
from collbench.nccl.support import CommShape
from collbench.runtime.here import HERE
from collbench.tuning.config import TuneConfig, tune_backend


def tune_shape(config: TuneConfig, backend: Backend) -> CommShape:
    """The communicator ``backend``'s collectives will see: the tune's ranks on one node, or the launcher's job."""
    return backend.comm_shape(*HERE.job_shape(config.ranks), HERE)


def tune_candidates(config: TuneConfig, own: tuple[str, ...]) -> tuple[str, ...]:
    """Every name a tune of ``config`` measures: ``own`` (collbench's algorithms for its ops, and ``native``)
    where they run on its backend, and the backend's forced variants, once each."""
    backend = tune_backend(config)
    return backend.tune_candidates(config.ops, own, tune_shape(config, backend), HERE)
