"""NCCL_ALGO / NCCL_PROTO values, read as NCCL reads them, and the per-collective table they are checked with.

The valid and invalid lines come from NCCL's own source: the examples in the comment above ``parseList``
(src/graph/tuning.cc, v2.24-v2.30), its three WARN cases, ``ncclAlgoStr``/``ncclFuncStr`` (src/init.cc),
and the algorithm loop of ``ncclTopoTuneModel`` for what each collective can run.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collbench.nccl.algorithms import algorithm
from collbench.schedules.ops import Op
from collbench.tuning.consumers.nccl import runnable_algorithms, why_not
from collbench.tuning.consumers.nccl_list import NcclListError, algo_names, check_env, parse_list

ALGOS = algo_names()
PROTOS = ("LL", "LL128", "Simple")
ALL = frozenset(ALGOS)


def test_the_examples_in_nccl_source() -> None:
    got = parse_list("ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring", ALGOS)
    assert got.for_op(Op.ALL_REDUCE) == {"Tree", "CollNetDirect"}
    assert got.for_op(Op.BROADCAST) == {"Ring"}
    assert got.for_op(Op.REDUCE) == got.for_op(Op.ALL_GATHER) == {"Ring", "CollNetDirect"}
    proto = parse_list("LL,Simple;allreduce:^LL", PROTOS)
    assert proto.for_op(Op.ALL_REDUCE) == {"LL128", "Simple"}
    assert proto.for_op(Op.REDUCE_SCATTER) == {"LL", "Simple"}
    proto = parse_list("^LL128;allreduce:LL128", PROTOS)
    assert proto.for_op(Op.ALL_REDUCE) == {"LL128"}
    assert proto.for_op(Op.BROADCAST) == {"LL", "Simple"}


def test_prefix_entries_leave_other_collectives_alone_and_names_ignore_case() -> None:
    got = parse_list("ALLREDUCE:Tree;broadcast:RING", ALGOS)
    assert got.for_op(Op.ALL_REDUCE) == {"Tree"}
    assert got.for_op(Op.BROADCAST) == {"Ring"}
    assert got.for_op(Op.ALL_GATHER) == ALL
    assert parse_list("nvlstree", ALGOS).for_op(Op.REDUCE) == {"NVLSTree"}
    assert parse_list("^tree", ALGOS).for_op(Op.ALL_REDUCE) == ALL - {"Tree"}
    assert parse_list("allreduce:tree;;", ALGOS).for_op(Op.ALL_REDUCE) == {"Tree"}  # strtok skips empties


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("allreduce:nvls_tree", 'unrecognized element token "nvls_tree"'),  # the token collbench used to write
        ("allreduce:collnet_direct", "unrecognized element token"),
        ("ring;tree", "all entries except the first must have a prefix"),
        ("allreduce:tree;ring", "all entries except the first must have a prefix"),
        (";ring", "all entries except the first must have a prefix"),  # NCCL compares pointers: not first
        ("all_reduce:tree", 'unrecognized prefix token "all_reduce"'),
        ("allreduce: tree", 'unrecognized element token " tree"'),  # no trimming
        ("sendrecv:ring", "unrecognized prefix token"),  # ncclFuncStr has the five collectives only
    ],
)
def test_values_nccl_rejects(value: str, why: str) -> None:
    with pytest.raises(NcclListError, match=why):
        parse_list(value, ALGOS)


def test_before_2_24_one_global_list_and_unknown_names_ignored() -> None:
    old = (2, 23)
    assert parse_list("Tree,ring", algo_names(old), old).for_op(Op.BROADCAST) == {"Tree", "Ring"}
    assert parse_list("^ring", algo_names(old), old).for_op(Op.ALL_REDUCE) == set(algo_names(old)) - {"Ring"}
    # The per-collective form is one unknown token there: nothing is enabled, every collective fails.
    assert parse_list("allreduce:tree", algo_names(old), old).for_op(Op.ALL_REDUCE) == set()
    assert len(check_env("allreduce:tree", None, old)) == 5
    assert "PAT" not in algo_names((2, 22))


def test_a_collective_left_with_nothing_it_can_run_is_a_problem() -> None:
    problems = check_env("broadcast:tree;reduce:tree", None)  # what `export env` used to write
    assert [p.split(":")[0] for p in problems] == ["broadcast", "reduce"]
    assert check_env("allreduce:pat", None)[0].startswith("allreduce: no algorithm left")
    assert [p.split(":")[0] for p in check_env("tree", None)] == [
        "reducescatter",
        "allgather",
        "broadcast",
        "reduce",
    ]
    assert check_env("allreduce:tree;broadcast:ring", "allreduce:ll128") == []
    assert check_env("allreduce:nvls", "allreduce:ll")[0].startswith("allreduce: no protocol left")
    assert check_env("allreduce:nvls,ring", "allreduce:ll") == []


def test_what_each_collective_runs_by_version() -> None:
    names = lambda op, v=(2, 30): [a.tuner for a in runnable_algorithms(op, v)]  # noqa: E731
    assert names(Op.BROADCAST) == names(Op.REDUCE) == ["ring"]
    assert names(Op.ALL_GATHER) == ["ring", "collnet_direct", "nvls", "pat"]
    assert names(Op.ALL_GATHER, (2, 19)) == ["ring", "nvls"]
    assert names(Op.REDUCE_SCATTER, (2, 22)) == ["ring", "collnet_direct", "nvls"]
    assert "pat" not in names(Op.ALL_REDUCE) and "tree" in names(Op.ALL_REDUCE)
    nvls_tree, tree, nvls = algorithm("NVLSTree"), algorithm("tree"), algorithm("nvls")
    assert nvls_tree is not None and tree is not None and nvls is not None
    assert why_not(Op.ALL_REDUCE, nvls_tree, 2, nodes=1, ranks=8) == "NCCL disables NVLSTree on a single node"
    assert why_not(Op.ALL_REDUCE, nvls_tree, 2, nodes=2, ranks=8) is None
    assert why_not(Op.BROADCAST, tree, None, nodes=2, ranks=8) == "NCCL runs broadcast with Ring only, never Tree"
    assert why_not(Op.ALL_REDUCE, nvls, 0, nodes=1, ranks=8) == "NCCL runs nvls with the simple protocol only"
    pat = algorithm("pat")
    assert pat is not None
    assert why_not(Op.ALL_GATHER, pat, 2, nodes=4, ranks=4) is None
    assert "one GPU per node only" in str(why_not(Op.ALL_GATHER, pat, 2, nodes=2, ranks=8))


@given(st.lists(st.sampled_from([*ALGOS, "^", ",", ";", ":", "allreduce", "broadcast", "x"]), max_size=8))
def test_parser_never_crashes_and_answers_per_collective(tokens: list[str]) -> None:
    value = "".join(tokens)
    try:
        got = parse_list(value, ALGOS)
    except NcclListError:
        return
    assert len(got.by_function) == 5
    assert all(s <= ALL for s in got.by_function)
