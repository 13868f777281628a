"""What NCCL can run: per collective, per version and per communicator shape.

Below the runtime and the exports so that both ask the same table: the sweep skips the points NCCL
cannot run with it, the exporters refuse a profile that names one. The names, numbers and protocols
of the algorithms are :mod:`collbench.nccl.algorithms`'.

Facts from NCCL's source (NVIDIA/nccl), tags v2.14.3-1 to v2.30.7-1:

* Algorithms per collective: ``ncclTopoTuneModel`` (``src/graph/tuning.cc``) skips, per collective,
  the algorithms it cannot run: broadcast and reduce: ring only (every version); all-gather and
  reduce-scatter: ring, plus NVLS from 2.17, CollNetDirect from 2.20, PAT from 2.23; all-reduce:
  everything but PAT (``if (coll == ncclFuncAllReduce && a == NCCL_ALGO_PAT) continue``).
* Protocols per algorithm: the same function (:data:`collbench.nccl.algorithms.NcclAlgorithm.protocols`).
* Conditions of the communicator, same function and ``ncclTopoInitTunerConstants``/``algoEnable``:
  NVLSTree is disabled on one node (``comm->nNodes == 1``); CollNet (Direct, Chain, and NVLS across
  nodes) needs CollNet support (a CollNet network plugin and ``NCCL_COLLNET_ENABLE=1``); PAT runs only
  with one GPU per node (``ncclPatEnable``: ``nNodes != nRanks`` returns 0).

Whether the hardware has NVLS (NVSwitch with multicast) is not known up front: a variant NCCL still
refuses fails its own points, not the run.

:func:`tune_variants` is what ``collbench tune`` measures on NCCL: every runnable algorithm x protocol,
each at NCCL's own channel count and at :data:`TUNE_CHANNEL_COUNTS`. At one rank NCCL runs no
algorithm at all (``ncclLaunchOneRank`` in ``src/enqueue.cc`` copies the buffer, or does nothing in
place), so there is nothing to force and nothing is measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.errors import UnknownNameError
from collbench.nccl.algorithms import ALGORITHM_SINCE, ALGORITHMS, PROTOCOLS, NcclVersion, algorithm_named
from collbench.nccl.variants import COMM_CHANNELS_SINCE, NativeVariant, max_channels_for
from collbench.schedules.ops import NCCL_TUNED_OPS, Op

OPS: tuple[str, ...] = tuple(op.value for op in NCCL_TUNED_OPS)
"""collbench's names (``collbench.schedules.ops.Op`` values) of the ops NCCL chooses an algorithm for."""
POINT_TO_POINT: tuple[str, ...] = tuple(op.value for op in Op if op not in NCCL_TUNED_OPS)
"""The ops NCCL runs as grouped ``ncclSend``/``ncclRecv`` (nccl-tests' ``alltoall.cu``, ``scatter.cu``,
``gather.cu``, ``sendrecv.cu``; torch's NCCL barrier is a one-element all-reduce it does not tune
apart): no algorithm or protocol to force or export."""

_OP_ALGORITHM_SINCE: dict[str, dict[str, NcclVersion]] = {
    "broadcast": {"Ring": (0, 0, 0)},
    "reduce": {"Ring": (0, 0, 0)},
    "all-gather": {"Ring": (0, 0, 0), "NVLS": (2, 17, 0), "CollNetDirect": (2, 20, 0), "PAT": (2, 23, 0)},
    "reduce-scatter": {"Ring": (0, 0, 0), "NVLS": (2, 17, 0), "CollNetDirect": (2, 20, 0), "PAT": (2, 23, 0)},
    "all-reduce": {a: ALGORITHM_SINCE[a] for a in ALGORITHMS if a != "PAT"},
}
"""Per op, the algorithms ``ncclTopoTuneModel`` runs it with and the release each joined."""
_COLLNET = ("CollNetDirect", "CollNetChain")


def _version_text(version: NcclVersion) -> str:
    return ".".join(str(v) for v in version)


@dataclass(frozen=True, slots=True)
class CommShape:
    """What NCCL's support depends on beyond its version: the communicator's shape and CollNet."""

    world_size: int
    nodes: int = 1
    collnet: bool = False
    """Whether CollNet is enabled and available (a CollNet plugin and ``NCCL_COLLNET_ENABLE=1``)."""


def unsupported_reason(
    op: str,
    algo: str | None,
    proto: str | None,
    nccl_version: NcclVersion | None,
    shape: CommShape,
) -> str | None:
    """Why NCCL cannot run ``op`` forced to ``algo``/``proto`` on ``shape``; None when it can.

    ``algo``/``proto`` None leave the choice to NCCL (always runnable). ``nccl_version`` None (not
    known yet, e.g. planning on a machine without NCCL) checks against the newest table. Raises
    UnknownNameError for an op, algorithm or protocol name NCCL does not have.
    """
    if op not in _OP_ALGORITHM_SINCE and op not in POINT_TO_POINT:
        raise UnknownNameError("op", op, OPS + POINT_TO_POINT)
    if algo is not None and algo not in ALGORITHMS:
        raise UnknownNameError("NCCL algorithm", algo, ALGORITHMS)
    if proto is not None and proto not in PROTOCOLS:
        raise UnknownNameError("NCCL protocol", proto, PROTOCOLS)
    if algo is None:
        return None
    if op in POINT_TO_POINT:
        return point_to_point_reason(op)
    version = nccl_version if nccl_version is not None else (99, 0, 0)
    where = f"NCCL {_version_text(version)}" if nccl_version is not None else "NCCL"
    if version < ALGORITHM_SINCE[algo]:
        return f"{where} has no {algo} (it arrived in {_version_text(ALGORITHM_SINCE[algo])})"
    for_op = _OP_ALGORITHM_SINCE[op]
    if algo not in for_op:
        runs = ", ".join(for_op)
        return f"NCCL runs {op} with {runs} only, never {algo}"
    if version < for_op[algo]:
        return f"{where} runs {op} with {algo} only from {_version_text(for_op[algo])}"
    protocols = algorithm_named(algo).protocols
    if proto is not None and proto not in protocols:
        return f"NCCL runs {algo} with the {'/'.join(protocols)} protocol only, not {proto}"
    if algo == "NVLSTree" and shape.nodes <= 1:
        return "NCCL disables NVLSTree on a single node"
    if (algo in _COLLNET or (algo == "NVLS" and shape.nodes > 1)) and not shape.collnet:
        what = f"{algo} across nodes" if algo == "NVLS" else algo
        return f"{what} needs a CollNet network plugin and NCCL_COLLNET_ENABLE=1"
    if algo == "PAT" and shape.nodes != shape.world_size:
        return (
            f"NCCL runs PAT with one GPU per node only ({shape.world_size} ranks on {shape.nodes} "
            f"node{'s' if shape.nodes != 1 else ''})"
        )
    return None


def point_to_point_reason(op: str) -> str:
    """Why NCCL has no algorithm for ``op`` (one of :data:`POINT_TO_POINT`), in one line."""
    return f"NCCL runs {op} as grouped point-to-point (send/recv): no algorithm or protocol to choose"


def supported_algorithms(op: str, nccl_version: NcclVersion | None, shape: CommShape) -> tuple[str, ...]:
    """The algorithms NCCL ``nccl_version`` can be forced to for ``op`` on ``shape``."""
    return tuple(a for a in ALGORITHMS if unsupported_reason(op, a, None, nccl_version, shape) is None)


TUNE_CHANNEL_COUNTS: tuple[int, ...] = (4, 16, 32)
"""The channel counts a tune forces each algorithm/protocol pair to, besides NCCL's own count: few
(fewer SMs busy, less setup per call), about what NCCL sets up on a machine of NVLink GPUs, and the
most every NCCL with per-communicator bounds holds (``MAXCHANNELS`` 32 before 2.25)."""


def runnable_pairs(op: str, nccl_version: NcclVersion | None, shape: CommShape) -> tuple[tuple[str, str], ...]:
    """Every (algorithm, protocol) NCCL ``nccl_version`` can be forced to for ``op`` on ``shape``, in
    :data:`ALGORITHMS` then :data:`PROTOCOLS` order."""
    return tuple(
        (algo, proto)
        for algo in ALGORITHMS
        for proto in PROTOCOLS
        if unsupported_reason(op, algo, proto, nccl_version, shape) is None
    )


def tune_variants(
    op: str,
    nccl_version: NcclVersion | None,
    shape: CommShape,
    channel_counts: tuple[int, ...] = TUNE_CHANNEL_COUNTS,
) -> tuple[NativeVariant, ...]:
    """The forced variants a tune of ``op`` measures: each runnable algorithm x protocol at NCCL's own
    channel count, then at each of ``channel_counts`` this NCCL holds per communicator.

    Empty at one rank (NCCL runs no algorithm there) and for the point-to-point ops (nothing to force).
    Channel counts are left out for an NCCL before ``ncclConfig_t`` had ``minCTAs``/``maxCTAs`` (2.17),
    and each count above its ``MAXCHANNELS``.
    """
    if shape.world_size < 2 or op in POINT_TO_POINT:
        return ()
    counts = channel_counts
    if nccl_version is not None:
        most = max_channels_for(nccl_version)
        counts = () if nccl_version < COMM_CHANNELS_SINCE else tuple(c for c in counts if c <= most)
    variants: list[NativeVariant] = []
    for algo, proto in runnable_pairs(op, nccl_version, shape):
        variants.append(NativeVariant(algo, proto))
        variants.extend(NativeVariant(algo, proto, count) for count in counts)
    return tuple(variants)
