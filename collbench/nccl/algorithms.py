"""NCCL's algorithms, protocols and collectives: their names, their numbers, and when each arrived.

One table, read by the sweep (what to force, what to skip) and by the exports (what to write). Facts
from NCCL's source (NVIDIA/nccl), tags v2.14.3-1 to v2.30.7-1:

* Numbering (the cost table's rows and columns, and the numbers of the 2.20-2.23 TUNING lines):
  ``NCCL_ALGO_*`` Tree 0, Ring 1, CollNetDirect 2, CollNetChain 3, NVLS 4, NVLSTree 5, PAT 6 and
  ``NCCL_PROTO_*`` LL 0, LL128 1, Simple 2, defined in ``src/include/devcomm.h`` (2.14-2.18),
  ``src/include/nccl_common.h`` (2.19-2.27) and ``src/include/plugin/nccl_tuner.h`` (2.28-2.30);
  ``ncclFunc_t`` Broadcast 0, Reduce 1, AllGather 2, ReduceScatter 3, AllReduce 4.
* Spellings: ``ncclAlgoStr``, ``ncclProtoStr`` and ``ncclFuncStr`` in ``src/init.cc`` are what
  ``NCCL_ALGO``/``NCCL_PROTO`` and their ``allreduce:`` prefixes are compared with (case-insensitively).
  The TUNING log of 2.24 and later prints ``ncclAlgoToString``/``ncclProtoToString``
  (``src/collectives.cc``): ``TREE``, ``COLLNET_DIRECT``, ``NVLS_TREE``, ``SIMPLE``...; NCCL's example
  tuner plugin (``plugins/tuner/example/plugin.c``) has its own lower-case names (``collnet_direct``).
* Arrival: ``ncclAlgoStr`` lists CollNetDirect and CollNetChain from 2.14 (one ``CollNet`` before),
  NVLS from 2.17, NVLSTree from 2.18, PAT from 2.23; an ``NCCL_ALGO`` name a version does not list
  fails communicator creation.
* Protocols per algorithm, ``ncclTopoTuneModel`` (``src/graph/tuning.cc``): NVLS and NVLSTree skip
  every protocol but Simple (``continue``, 2.17 and later), PAT too (2.23 and later), and CollNetDirect
  and CollNetChain get no bandwidth on LL and LL128 (``busBw = 0;  // Not used``, 2.14 to 2.30), which
  ``ncclTopoGetAlgoTime`` turns into "cannot run" (``bw == 0`` gives time -1). Tree and Ring run all three.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.schedules.ops import NCCL_TUNED_OPS, Op

NcclVersion = tuple[int, int, int]
"""An NCCL release as (major, minor, patch)."""

PROTOCOLS: tuple[str, ...] = ("LL", "LL128", "Simple")
"""``ncclProtoStr``, indexed by ``NCCL_PROTO_*`` (what ``NCCL_PROTO`` takes; the cost table's columns)."""
FUNCTIONS: tuple[str, ...] = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
"""``ncclFuncStr``, indexed by ``ncclFunc_t`` (the prefixes of ``NCCL_ALGO``'s per-collective form)."""

_ANY = PROTOCOLS
_SIMPLE = ("Simple",)


@dataclass(frozen=True, slots=True)
class NcclAlgorithm:
    """One of NCCL's algorithms: its number, its spellings, when it arrived, and what it runs with."""

    number: int
    """``NCCL_ALGO_*``: the cost table's row."""
    env: str
    """As ``ncclAlgoStr`` spells it (``NCCL_ALGO`` compares case-insensitively)."""
    tuner: str
    """As the example tuner plugin's config spells it."""
    since: NcclVersion
    """The first NCCL release whose ``ncclAlgoStr`` lists it."""
    protocols: tuple[str, ...]
    """The protocols ``ncclTopoTuneModel`` lets it run, in ``NCCL_PROTO_*`` order."""
    condition: str
    """What NCCL needs besides the collective and shape to run it ("" for nothing)."""

    @property
    def simple_only(self) -> bool:
        """Whether NCCL runs it with the Simple protocol only."""
        return self.protocols == _SIMPLE


ALGORITHMS_BY_NUMBER: tuple[NcclAlgorithm, ...] = (
    NcclAlgorithm(0, "Tree", "tree", (0, 0, 0), _ANY, ""),
    NcclAlgorithm(1, "Ring", "ring", (0, 0, 0), _ANY, ""),
    NcclAlgorithm(
        2,
        "CollNetDirect",
        "collnet_direct",
        (2, 14, 0),
        _SIMPLE,
        "needs a CollNet network plugin, NCCL_COLLNET_ENABLE=1, NVSwitch",
    ),
    NcclAlgorithm(
        3,
        "CollNetChain",
        "collnet_chain",
        (2, 14, 0),
        _SIMPLE,
        "needs a CollNet network plugin and NCCL_COLLNET_ENABLE=1",
    ),
    NcclAlgorithm(4, "NVLS", "nvls", (2, 17, 0), _SIMPLE, "needs NVLink SHARP (NVSwitch), and CollNet across nodes"),
    NcclAlgorithm(5, "NVLSTree", "nvls_tree", (2, 18, 0), _SIMPLE, "needs NVLink SHARP (NVSwitch)"),
    NcclAlgorithm(6, "PAT", "pat", (2, 23, 0), _SIMPLE, "runs with one GPU per node only"),
)
"""Every NCCL algorithm, indexed by ``NCCL_ALGO_*``."""

ALGORITHMS: tuple[str, ...] = ("Ring", "Tree", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
"""NCCL's algorithm names (``ncclAlgoStr``) in the order collbench lists them: Ring, NCCL's fallback, first."""

ALGORITHM_SINCE: dict[str, NcclVersion] = {a.env: a.since for a in ALGORITHMS_BY_NUMBER}
"""The first NCCL release that knows each algorithm (an unknown NCCL_ALGO token fails comm creation)."""

_BY_ENV = {a.env: a for a in ALGORITHMS_BY_NUMBER}
_BY_NCCL_SPELLING = {a.env.lower(): a for a in ALGORITHMS_BY_NUMBER} | {a.tuner: a for a in ALGORITHMS_BY_NUMBER}

FUNC_OF_OP: dict[Op, int] = {op: [f.lower() for f in FUNCTIONS].index(op.spec.nccl_name) for op in NCCL_TUNED_OPS}
"""``ncclFunc_t`` of each op NCCL tunes (the others are grouped send/recv, with nothing to choose)."""


def _key(name: str) -> str:
    return name.strip().lower().replace("-", "").replace("_", "")


_ALGO_KEYS = {_key(a): a for a in ALGORITHMS}
_PROTO_KEYS = {_key(p): p for p in PROTOCOLS}


def canonical_algo(name: str) -> str | None:
    """``RING``, ``NVLS_TREE``, ``nvls-tree``, ``COLLNET_DIRECT`` -> ``Ring``, ``NVLSTree``, ...; None if unknown."""
    return _ALGO_KEYS.get(_key(name))


def canonical_proto(name: str) -> str | None:
    """``SIMPLE``, ``simple``, ``ll128`` -> ``Simple``, ``LL128``; None if unknown."""
    return _PROTO_KEYS.get(_key(name))


def algorithm(name: str) -> NcclAlgorithm | None:
    """The algorithm for an ``NCCL_ALGO`` or tuner-config name (any case), None when NCCL has none.

    Only the spellings NCCL itself reads: ``collnetdirect`` and ``collnet_direct``, not ``collnet-direct``
    (:func:`canonical_algo` reads every spelling a user or a log may write).
    """
    return _BY_NCCL_SPELLING.get(name.strip().lower())


def algorithm_named(env: str) -> NcclAlgorithm:
    """The algorithm ``ncclAlgoStr`` spells ``env`` (one of :data:`ALGORITHMS`); KeyError for another name."""
    return _BY_ENV[env]


def protocol_number(name: str) -> int | None:
    """``NCCL_PROTO_*`` for a protocol name (any case), None when NCCL has none."""
    for i, p in enumerate(PROTOCOLS):
        if p.lower() == name.strip().lower():
            return i
    return None


def algorithms_for(nccl_version: NcclVersion) -> tuple[str, ...]:
    """The algorithms NCCL ``nccl_version`` knows (accepts in ``NCCL_ALGO``), in :data:`ALGORITHMS` order."""
    return tuple(a for a in ALGORITHMS if nccl_version >= ALGORITHM_SINCE[a])
