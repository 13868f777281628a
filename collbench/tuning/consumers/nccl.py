"""NCCL as the consumer of an export: which releases an export targets, and what a profile may ask of it.

NCCL's facts (algorithms and their numbering, protocols, spellings, and what it can run per
collective, version and communicator shape) are :mod:`collbench.nccl`'s, which the sweep also reads.
This module adds what the exports need besides:

* the NCCL releases an export is written for (2.19, the first with a tuner plugin, to 2.30);
* ``NCCL_ALGO``'s per-collective form (``allreduce:tree;broadcast:ring``) is parsed from 2.24
  (``parseList``, src/graph/tuning.cc); earlier versions read one global list and ignore tokens they
  do not know (see :mod:`.nccl_list`);
* a profile that names an NCCL algorithm was measured where that algorithm runs, so CollNet is taken
  as present when asking what NCCL can run.
"""

from __future__ import annotations

from collbench.nccl.algorithms import ALGORITHMS_BY_NUMBER, PROTOCOLS, NcclAlgorithm
from collbench.nccl.support import CommShape, unsupported_reason
from collbench.schedules.ops import Op

Version = tuple[int, int]
OLDEST: Version = (2, 19)
NEWEST: Version = (2, 30)
PER_COLLECTIVE_SYNTAX: Version = (2, 24)
"""First NCCL whose ``NCCL_ALGO``/``NCCL_PROTO`` take ``collective:list`` entries."""


def _version3(version: Version) -> tuple[int, int, int]:
    return (version[0], version[1], 999)


def runnable_algorithms(op: Op, version: Version = NEWEST) -> tuple[NcclAlgorithm, ...]:
    """The algorithms NCCL ``version`` can run ``op`` with on some communicator (one with every condition met)."""
    anywhere = CommShape(world_size=2, nodes=2, collnet=True)  # one GPU per node, several nodes, CollNet
    return tuple(
        a
        for a in ALGORITHMS_BY_NUMBER
        if unsupported_reason(op.value, a.env, None, _version3(version), anywhere) is None
    )


def why_not(
    op: Op, algo: NcclAlgorithm, proto: int | None, *, nodes: int, ranks: int, version: Version = NEWEST
) -> str | None:
    """Why NCCL ``version`` never runs ``op`` with ``algo`` (and protocol ``proto``) on this shape; None if it can.

    CollNet is taken as present (a profile naming it was measured with it); :func:`condition` says
    what else the algorithm needs. A protocol the algorithm never runs is said first, in the
    exports' words, whatever else the shape lacks.
    """
    if proto is not None and PROTOCOLS[proto] not in algo.protocols:
        only = "/".join(p.lower() for p in algo.protocols)
        return f"NCCL runs {algo.tuner} with the {only} protocol only"
    shape = CommShape(world_size=ranks, nodes=nodes, collnet=True)
    proto_name = None if proto is None else PROTOCOLS[proto]
    return unsupported_reason(op.value, algo.env, proto_name, _version3(version), shape)


def condition(algo: NcclAlgorithm) -> str | None:
    """What NCCL needs besides collective and shape to run ``algo`` (None: nothing)."""
    return algo.condition or None
