"""NCCL as the consumer of an export: its numbering and spellings, and what it can run per collective.

What NCCL can run (per collective, version, protocol and communicator shape) has one home,
:mod:`collbench.nccl.support` (read from ``ncclTopoTuneModel``, src/graph/tuning.cc, NCCL
2.14-2.30), which the sweep also uses; this module asks it, and adds what the exports need besides,
read from NVIDIA/nccl at tags v2.19.3-1 to v2.30.7-1:

* numbering (``src/include/plugin/nccl_tuner.h``; earlier ``src/include/nccl_tuner.h``): algorithms
  Tree 0, Ring 1, CollNetDirect 2, CollNetChain 3, NVLS 4, NVLSTree 5, PAT 6 (the cost table's rows: 6
  before PAT arrived in 2.23, 7 after); protocols LL 0, LL128 1, Simple 2 (its columns); collectives
  (``ncclFunc_t``) Broadcast 0, Reduce 1, AllGather 2, ReduceScatter 3, AllReduce 4.
* spellings: ``NCCL_ALGO``/``NCCL_PROTO`` compare against ``ncclAlgoStr``/``ncclProtoStr`` and, for the
  per-collective prefix, ``ncclFuncStr`` (``src/init.cc``), case-insensitively; the config of NCCL's
  example tuner plugin (``plugins/tuner/example/plugin.c``) has its own lower-case names.
* ``NCCL_ALGO``'s per-collective form (``allreduce:tree;broadcast:ring``) is parsed from 2.24; earlier
  versions read one global list and ignore tokens they do not know (see :mod:`.nccl_list`).
* CollNet* also run Simple only: ``ncclTopoTuneModel`` gives their other protocols no bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.nccl.support import ALGORITHM_SINCE, CommShape, unsupported_reason
from collbench.schedules.ops import Op

Version = tuple[int, int]
OLDEST: Version = (2, 19)
NEWEST: Version = (2, 30)
PER_COLLECTIVE_SYNTAX: Version = (2, 24)
"""First NCCL whose ``NCCL_ALGO``/``NCCL_PROTO`` take ``collective:list`` entries."""


@dataclass(frozen=True, slots=True)
class NcclAlgorithm:
    number: int
    """``NCCL_ALGO_*``: the cost table's row."""
    env: str
    """As ``ncclAlgoStr`` spells it (``NCCL_ALGO`` compares case-insensitively)."""
    tuner: str
    """As the example tuner plugin's config spells it."""
    condition: str
    """What NCCL needs besides the collective and shape to run it ("" for nothing)."""

    @property
    def since(self) -> Version:
        major, minor, _ = ALGORITHM_SINCE[self.env]
        return (major, minor)

    @property
    def simple_only(self) -> bool:
        return self.env not in ("Tree", "Ring")


ALGORITHMS: tuple[NcclAlgorithm, ...] = (
    NcclAlgorithm(0, "Tree", "tree", ""),
    NcclAlgorithm(1, "Ring", "ring", ""),
    NcclAlgorithm(
        2, "CollNetDirect", "collnet_direct", "needs a CollNet network plugin, NCCL_COLLNET_ENABLE=1, NVSwitch"
    ),
    NcclAlgorithm(3, "CollNetChain", "collnet_chain", "needs a CollNet network plugin and NCCL_COLLNET_ENABLE=1"),
    NcclAlgorithm(4, "NVLS", "nvls", "needs NVLink SHARP (NVSwitch), and CollNet across nodes"),
    NcclAlgorithm(5, "NVLSTree", "nvls_tree", "needs NVLink SHARP (NVSwitch)"),
    NcclAlgorithm(6, "PAT", "pat", "runs with one GPU per node only"),
)
PROTOCOLS: tuple[str, ...] = ("LL", "LL128", "Simple")
"""``ncclProtoStr``, indexed by ``NCCL_PROTO_*`` (the cost table's column)."""
FUNCTIONS: tuple[str, ...] = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
"""``ncclFuncStr``, indexed by ``ncclFunc_t``."""
FUNC_OF_OP: dict[Op, int] = {
    Op.BROADCAST: 0,
    Op.REDUCE: 1,
    Op.ALL_GATHER: 2,
    Op.REDUCE_SCATTER: 3,
    Op.ALL_REDUCE: 4,
}

_BY_KEY = {a.env.lower(): a for a in ALGORITHMS} | {a.tuner: a for a in ALGORITHMS}


def algorithm(name: str) -> NcclAlgorithm | None:
    """The algorithm for an ``NCCL_ALGO`` or tuner-config name (any case), None when NCCL has none."""
    return _BY_KEY.get(name.strip().lower())


def protocol_number(name: str) -> int | None:
    """``NCCL_PROTO_*`` for a protocol name (any case), None when NCCL has none."""
    for i, p in enumerate(PROTOCOLS):
        if p.lower() == name.strip().lower():
            return i
    return None


def _version3(version: Version) -> tuple[int, int, int]:
    return (version[0], version[1], 999)


def runnable_algorithms(op: Op, version: Version = NEWEST) -> tuple[NcclAlgorithm, ...]:
    """The algorithms NCCL ``version`` can run ``op`` with on some communicator (one with every condition met)."""
    anywhere = CommShape(world_size=2, nodes=2, collnet=True)  # one GPU per node, several nodes, CollNet
    return tuple(
        a for a in ALGORITHMS if unsupported_reason(op.value, a.env, None, _version3(version), anywhere) is None
    )


def why_not(
    op: Op, algo: NcclAlgorithm, proto: int | None, *, nodes: int, ranks: int, version: Version = NEWEST
) -> str | None:
    """Why NCCL ``version`` never runs ``op`` with ``algo`` (and protocol ``proto``) on this shape; None if it can.

    CollNet is taken as present (a profile naming it was measured with it); :func:`condition` says
    what else the algorithm needs.
    """
    if proto is not None and algo.simple_only and PROTOCOLS[proto] != "Simple":
        return f"NCCL runs {algo.tuner} with the simple protocol only"
    shape = CommShape(world_size=ranks, nodes=nodes, collnet=True)
    proto_name = None if proto is None else PROTOCOLS[proto]
    return unsupported_reason(op.value, algo.env, proto_name, _version3(version), shape)


def condition(algo: NcclAlgorithm) -> str | None:
    """What NCCL needs besides collective and shape to run ``algo`` (None: nothing)."""
    return algo.condition or None
