"""NCCL's support table (collbench.nccl.support) against src/graph/tuning.cc, as the sweep and exports read it.

Each case cites the line of ``ncclTopoTuneModel`` / ``ncclTopoInitTunerConstants`` (NVIDIA/nccl,
v2.30.7-1 unless said) that makes NCCL skip or disable the pair.
"""

from __future__ import annotations

import pytest

from collbench.errors import UnknownNameError
from collbench.nccl.algorithms import (
    ALGORITHMS,
    ALGORITHMS_BY_NUMBER,
    PROTOCOLS,
    algorithm,
    canonical_algo,
    canonical_proto,
    protocol_number,
)
from collbench.nccl.support import (
    TUNE_CHANNEL_COUNTS,
    CommShape,
    runnable_pairs,
    supported_algorithms,
    tune_variants,
    unsupported_reason,
)
from collbench.schedules.ops import Op
from collbench.tuning.consumers.nccl import why_not

V230 = (2, 30, 7)
ONE_NODE_8 = CommShape(world_size=8, nodes=1)
FOUR_NODES_4 = CommShape(world_size=4, nodes=4)


def test_rooted_ops_run_ring_only() -> None:
    # tuning.cc: if ((coll == ncclFuncBroadcast || coll == ncclFuncReduce) && a != NCCL_ALGO_RING) continue;
    for op in ("broadcast", "reduce"):
        assert supported_algorithms(op, V230, FOUR_NODES_4) == ("Ring",)
        reason = unsupported_reason(op, "Tree", None, V230, ONE_NODE_8)
        assert reason == f"NCCL runs {op} with Ring only, never Tree"


def test_all_gather_and_reduce_scatter_set() -> None:
    # tuning.cc: ReduceScatter/AllGather keep PAT, RING, NVLS, COLLNET_DIRECT only.
    collnet_one_gpu_per_node = CommShape(world_size=4, nodes=4, collnet=True)
    for op in ("all-gather", "reduce-scatter"):
        assert supported_algorithms(op, V230, collnet_one_gpu_per_node) == ("Ring", "CollNetDirect", "NVLS", "PAT")
        assert "never Tree" in (unsupported_reason(op, "Tree", None, V230, ONE_NODE_8) or "")
    # v2.19.4 src/graph/tuning.cc: all-gather ring or NVLS only; CollNetDirect joined in 2.20.3.
    assert "only from 2.20" in (
        unsupported_reason("all-gather", "CollNetDirect", None, (2, 19, 4), collnet_one_gpu_per_node) or ""
    )


def test_all_reduce_never_pat() -> None:
    # tuning.cc: if (coll == ncclFuncAllReduce && a == NCCL_ALGO_PAT) continue;
    assert unsupported_reason("all-reduce", "PAT", None, V230, FOUR_NODES_4) == (
        "NCCL runs all-reduce with Ring, Tree, CollNetDirect, CollNetChain, NVLS, NVLSTree only, never PAT"
    )


def test_conditions_of_the_communicator() -> None:
    # ncclTopoInitTunerConstants: if (comm->nNodes == 1 && a == NCCL_ALGO_NVLS_TREE) disable = 1;
    assert (
        unsupported_reason("all-reduce", "NVLSTree", None, V230, ONE_NODE_8)
        == "NCCL disables NVLSTree on a single node"
    )
    assert unsupported_reason("all-reduce", "NVLSTree", None, V230, CommShape(16, 2)) is None
    # collnetEnable == 0 disables CollNetDirect, CollNetChain, and NVLS when nNodes > 1.
    assert "CollNet network plugin" in (unsupported_reason("all-reduce", "CollNetChain", None, V230, ONE_NODE_8) or "")
    assert "NVLS across nodes" in (unsupported_reason("all-reduce", "NVLS", None, V230, CommShape(16, 2)) or "")
    assert unsupported_reason("all-reduce", "NVLS", None, V230, ONE_NODE_8) is None
    # ncclPatEnable: if (comm->nNodes != comm->nRanks) return 0; // PAT only supports 1 GPU per node
    assert "one GPU per node" in (unsupported_reason("all-gather", "PAT", None, V230, ONE_NODE_8) or "")
    assert unsupported_reason("all-gather", "PAT", None, V230, FOUR_NODES_4) is None
    # tuning.cc: NVLS/NVLS_TREE and PAT run NCCL_PROTO_SIMPLE only.
    assert "Simple protocol only" in (unsupported_reason("all-gather", "PAT", "LL", V230, FOUR_NODES_4) or "")
    assert unsupported_reason("all-reduce", "NVLS", "Simple", V230, ONE_NODE_8) is None


def test_versions() -> None:
    # PAT arrived in 2.23 (ncclAlgoStr of v2.23.4 src/init.cc is the first to list it).
    assert (
        unsupported_reason("all-gather", "PAT", None, (2, 22, 3), FOUR_NODES_4)
        == "NCCL 2.22.3 has no PAT (it arrived in 2.23.0)"
    )
    # Unknown version: the newest table applies.
    assert unsupported_reason("all-gather", "PAT", None, None, FOUR_NODES_4) is None
    assert unsupported_reason("all-reduce", None, "LL", V230, ONE_NODE_8) is None


def test_unknown_names_are_errors() -> None:
    with pytest.raises(UnknownNameError):
        unsupported_reason("alltoallv", "Ring", None, V230, ONE_NODE_8)
    with pytest.raises(UnknownNameError):
        unsupported_reason("all-reduce", "RING", None, V230, ONE_NODE_8)


def test_canonical_spellings() -> None:
    # ncclAlgoToString (src/collectives.cc, 2.24+) vs ncclAlgoStr (src/init.cc).
    printed = ["TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"]
    assert [canonical_algo(p) for p in printed] == [
        "Tree",
        "Ring",
        "CollNetDirect",
        "CollNetChain",
        "NVLS",
        "NVLSTree",
        "PAT",
    ]
    assert {canonical_algo(a) for a in ALGORITHMS} == set(ALGORITHMS)
    assert [canonical_proto(p) for p in ("LL", "LL128", "SIMPLE", "simple")] == ["LL", "LL128", "Simple", "Simple"]
    assert canonical_algo("Unknown") is None and canonical_proto("#7") is None


def test_point_to_point_ops_have_no_algorithm_to_force() -> None:
    # nccl-tests' alltoall.cu, scatter.cu, gather.cu and sendrecv.cu call ncclSend/ncclRecv inside
    # ncclGroupStart/End: ncclTopoTuneModel never sees them, so nothing can be forced or measured.
    for op in ("all-to-all", "scatter", "gather", "sendrecv", "barrier"):
        assert unsupported_reason(op, None, None, V230, ONE_NODE_8) is None  # NCCL's own way runs
        for algo in ALGORITHMS:
            reason = unsupported_reason(op, algo, None, V230, ONE_NODE_8)
            assert reason == f"NCCL runs {op} as grouped point-to-point (send/recv): no algorithm or protocol to choose"
        assert tune_variants(op, V230, ONE_NODE_8) == ()
        assert runnable_pairs(op, V230, ONE_NODE_8) == ()


def test_sweep_and_exports_agree_collnet_runs_simple_only() -> None:
    # ncclTopoTuneModel, src/graph/tuning.cc (v2.14.3-1 to v2.30.7-1, e.g. v2.19.3-1 lines 186-187):
    #   if (a == NCCL_ALGO_COLLNET_DIRECT && p != NCCL_PROTO_SIMPLE) busBw = 0;  // Not used
    #   if (a == NCCL_ALGO_COLLNET_CHAIN && p != NCCL_PROTO_SIMPLE) busBw = 0;  // Not used
    # and ncclTopoGetAlgoTime gives time -1 (never chosen) where the bandwidth is 0.
    everything = CommShape(world_size=2, nodes=2, collnet=True)  # CollNet on, one GPU per node, two nodes
    for algo in ("CollNetDirect", "CollNetChain"):
        nccl_algo = algorithm(algo)
        assert nccl_algo is not None
        assert unsupported_reason("all-reduce", algo, "Simple", V230, everything) is None
        for proto in ("LL", "LL128"):
            sweep = unsupported_reason("all-reduce", algo, proto, V230, everything)
            assert sweep == f"NCCL runs {algo} with the Simple protocol only, not {proto}"
            assert why_not(Op.ALL_REDUCE, nccl_algo, protocol_number(proto), nodes=2, ranks=2) is not None
    # Every (op, algorithm, protocol): the sweep skips exactly what the exports refuse.
    for op in Op:
        for a in ALGORITHMS_BY_NUMBER:
            for number, proto in enumerate(PROTOCOLS):
                sweep_runs = unsupported_reason(op.value, a.env, proto, V230, everything) is None
                export_runs = why_not(op, a, number, nodes=2, ranks=2) is None
                assert sweep_runs == export_runs, (op, a.env, proto)


def test_tune_variants_every_runnable_algorithm_protocol_and_channel_count() -> None:
    # One node of 8: Ring and Tree with LL, LL128, Simple; NVLS with Simple only; NVLSTree off on one
    # node; CollNet off without NCCL_COLLNET_ENABLE; PAT never for all-reduce (tuning.cc).
    variants = tune_variants("all-reduce", V230, ONE_NODE_8)
    pairs = [(v.algo, v.proto) for v in variants if v.channels is None]
    ring_tree = [(a, p) for a in ("Ring", "Tree") for p in ("LL", "LL128", "Simple")]
    assert pairs == [*ring_tree, ("NVLS", "Simple")]
    assert pairs == list(runnable_pairs("all-reduce", V230, ONE_NODE_8))
    assert len(variants) == len(pairs) * (1 + len(TUNE_CHANNEL_COUNTS))
    assert {v.channels for v in variants} == {None, *TUNE_CHANNEL_COUNTS}
    assert len({v.name for v in variants}) == len(variants)  # each is a row of its own
    for v in variants:
        assert unsupported_reason("all-reduce", v.algo, v.proto, V230, ONE_NODE_8) is None


def test_tune_variants_per_op_version_and_shape() -> None:
    # Broadcast runs Ring only; PAT joins all-gather from 2.23 with one GPU per node.
    assert {v.algo for v in tune_variants("broadcast", V230, ONE_NODE_8)} == {"Ring"}
    assert "PAT" in {v.algo for v in tune_variants("all-gather", (2, 23, 4), FOUR_NODES_4)}
    assert "PAT" not in {v.algo for v in tune_variants("all-gather", (2, 22, 3), FOUR_NODES_4)}
    # ncclConfig_t minCTAs/maxCTAs arrived in 2.17: no channel variants before.
    assert {v.channels for v in tune_variants("all-reduce", (2, 16, 5), ONE_NODE_8)} == {None}
    # ncclLaunchOneRank: at one rank NCCL runs no algorithm, so nothing is forced.
    assert tune_variants("all-reduce", V230, CommShape(world_size=1)) == ()
    assert tune_variants("all-reduce", None, ONE_NODE_8) == tune_variants("all-reduce", (99, 0, 0), ONE_NODE_8)
