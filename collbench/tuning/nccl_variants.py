"""On NCCL, what a tune measures of NCCL itself: every algorithm x protocol x channel count it can run.

A profile's NCCL exports (the tuner plugin's config, ``NCCL_ALGO``) must be chosen among what NCCL
itself runs, measured: collbench's own ``ring`` over NCCL's point-to-point is not NCCL's ring kernel
with its protocols and channels. So a tune on NCCL measures, beside plain ``native`` and collbench's
algorithms, each variant of :func:`collbench.nccl.support.tune_variants` for the asked ops, on this
NCCL and communicator shape; each variant runs on a communicator of its own
(``collbench.runtime.cuda.nccl.variant_group``), so each is a row of its own.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from collbench.nccl.support import CommShape, tune_variants
from collbench.nccl.variants import parse_version
from collbench.schedules.ops import Op
from collbench.tuning.config import TuneConfig, tune_backend


def tune_shape(config: TuneConfig) -> CommShape:
    """The communicator NCCL will see: the tune's ranks on one node, or the launcher's job."""
    from collbench.runtime.launch.ranks import joined_job

    job = joined_job()
    if job is None:
        world, nodes = config.ranks or 1, 1
    else:
        world = job.world_size
        nodes = max(1, world // max(1, job.local_world_size))
    # CollNet needs NCCL_COLLNET_ENABLE=1 (NCCL's collnetEnable) and a plugin; without the variable it is off.
    collnet = os.environ.get("NCCL_COLLNET_ENABLE", "0").strip() == "1"
    return CommShape(world_size=world, nodes=nodes, collnet=collnet)


def nccl_variant_names(config: TuneConfig) -> tuple[str, ...]:
    """The forced NCCL variants a tune of ``config`` measures (empty unless its backend is nccl)."""
    if config.backend.strip().lower() == "mpi" or tune_backend(config) != "nccl":
        return ()
    from collbench.runtime.host import environment

    text = environment.nccl_version()
    version = parse_version(text) if text else None
    return variant_names(config.ops, version, tune_shape(config))


def variant_names(ops: Sequence[str], version: tuple[int, int, int] | None, shape: CommShape) -> tuple[str, ...]:
    """Every op's :func:`tune_variants`, once each, in the order of the first op that runs it."""
    chosen = list(Op) if any(o.strip().lower() == "all" for o in ops) else [Op.parse(o) for o in ops]
    names: dict[str, None] = {}
    for op in chosen:
        names.update((v.name, None) for v in tune_variants(op.value, version, shape))
    return tuple(names)
