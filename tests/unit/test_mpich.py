"""MPICH as a backend: what a sweep of it measures, and its exports read back by MPICH's own rules.

``export mpich-json`` is read back by :func:`csel_search`, MPICH 4.0.2's selection (``MPIR_Csel_search``,
src/mpi/coll/src/csel.c of the v4.0.2 tag) for the keys the file and the base below use: an object's keys
tried in order, the first that holds entered, ``comm_size<N`` tested as ``<=`` (as 4.0.2 does), a leaf
``algorithm=<function>``. The base is a small tree in MPICH's format, standing for MPICH's built-in
one; tests/mpi/test_mpich_mpi.py runs the real MPICH with the real tree.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from refused import refused_line
from typer.testing import CliRunner

from collbench.backends import get_backend
from collbench.backends.mpich import mpich_algos
from collbench.cli.app import app
from collbench.errors import ConfigError, NotApplicableError, UnknownNameError, UserError
from collbench.exporters.mpich_env import build_mpich_env
from collbench.exporters.mpich_json import build_mpich_json, parse_base
from collbench.mpich.algorithms import MPICH_4_0, algorithms, find_algorithm
from collbench.nccl.support import CommShape
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.results.fields import _known_algo
from collbench.schedules.ops import Op

P = {"segment_bytes": None, "layout": "rank-order"}

BASE: dict[str, Any] = {
    "collective=allreduce": {
        "comm_type=intra": {
            "avg_msg_size<=2048": {"algorithm=MPIR_Allreduce_intra_recursive_doubling": {}},
            "avg_msg_size=any": {"algorithm=MPIR_Allreduce_intra_reduce_scatter_allgather": {}},
        },
        "comm_type=inter": {"algorithm=MPIR_Allreduce_inter_reduce_exchange_bcast": {}},
    },
    "collective=bcast": {
        "comm_type=intra": {
            "comm_size<8": {"algorithm=MPIR_Bcast_intra_binomial": {}},
            "comm_size=any": {"algorithm=MPIR_Bcast_intra_scatter_ring_allgather": {}},
        }
    },
    "collective=alltoall": {"comm_type=intra": {"algorithm=MPIR_Alltoall_intra_brucks": {}}},
    "collective=barrier": {"comm_type=intra": {"algorithm=MPIR_Barrier_intra_dissemination": {}}},
}


def csel_search(tree: dict[str, Any], coll: str, comm_size: int, avg: int, total: int, in_place: bool = False) -> str:
    """The function MPICH 4.0.2 runs for an intracommunicator call (MPIR_Csel_search's rules)."""
    node = tree
    while True:
        for key, child in node.items():
            name, _, value = key.partition("=") if "<" not in key else (key, "", "")
            if key.startswith("algorithm="):
                return key.removeprefix("algorithm=")
            if (name == "collective" and value != coll) or key == "comm_type=inter":
                continue
            if name == "is_sendbuf_inplace" and (value == "yes") != in_place:
                continue
            if name in ("comm_size", "avg_msg_size", "total_msg_size") and value == "any":
                pass
            elif "<" in key:
                what, _, bound = key.replace("<=", "<").partition("<")
                have = {"comm_size": comm_size, "avg_msg_size": avg, "total_msg_size": total}[what]
                if have > int(bound):  # "<" is tested as "<=" by 4.0.2's search too
                    continue
            node = child
            break
        else:
            raise AssertionError(f"no branch for {coll} at {comm_size} ranks: MPICH would stop (MPIR_Assert)")


def rule(op: str, lo: int, hi: int | None, algo: str, **extra: Any) -> Rule:
    return Rule(op, lo, hi, algo, params=P, **extra)


def mpich_profile(*sets: RuleSet) -> Profile:
    return Profile(fingerprint="fp", host="h", backend="mpich", rule_sets=sets)


FOUR = RuleSet(
    4,
    1,
    (
        rule("all-reduce", 0, 8191, "native", measured_us=20.0),
        rule("all-reduce", 8192, 65535, "native:recursive_doubling", measured_us=90.0, gain_vs_native=1.4),
        rule("all-reduce", 65536, None, "native:nb", measured_us=900.0, gain_vs_native=1.1),
        rule("broadcast", 0, None, "native:binomial", measured_us=50.0, gain_vs_native=1.2),
        rule("all-to-all", 0, 4095, "native:pairwise"),
        rule("all-to-all", 4096, None, "native"),
        rule("barrier", 0, None, "native:nb"),
    ),
)
EIGHT = RuleSet(8, 2, (rule("all-reduce", 0, None, "native:recursive_doubling"),))


def test_every_forced_algorithm_has_its_csel_name_and_cvar() -> None:
    # csel_container.c (v4.0.2) spells them MPIR_<Coll>_intra_<name>, nb as MPIR_<Coll>_allcomm_nb.
    rsag = find_algorithm("all-reduce", "native:reduce_scatter_allgather")
    assert rsag is not None and rsag.csel_name == "MPIR_Allreduce_intra_reduce_scatter_allgather"
    assert rsag.cvar == "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM"
    nb = find_algorithm("reduce-scatter", "native:nb")
    assert nb is not None and nb.csel_name == "MPIR_Reduce_scatter_allcomm_nb"
    assert nb.cvar == "MPIR_CVAR_REDUCE_SCATTER_INTRA_ALGORITHM"
    assert find_algorithm("all-reduce", "native") is None and find_algorithm("all-reduce", "native:ring") is None
    assert algorithms("sendrecv") == ()
    assert sum(len(v) for v in MPICH_4_0.values()) == 39


def test_a_sweep_measures_native_and_each_forced_algorithm() -> None:
    skipped: list[str] = []
    per_op = mpich_algos(["all"], [Op.ALL_REDUCE, Op.SENDRECV], skipped)
    assert per_op[Op.ALL_REDUCE] == [
        "native",
        "native:nb",
        "native:smp",
        "native:recursive_doubling",
        "native:reduce_scatter_allgather",
    ]
    assert per_op[Op.SENDRECV] == ["native"]
    per_op = mpich_algos(["native:binomial"], [Op.BROADCAST, Op.ALL_GATHER], skipped)
    assert per_op == {Op.BROADCAST: ["native:binomial"], Op.ALL_GATHER: []}
    assert skipped == ["all-gather: native:binomial does not implement it; skipped"]
    skipped = []
    mpich_algos(["native:ring", "native:binomial", "native:brucks"], [Op.ALL_GATHER, Op.BROADCAST], skipped)
    assert skipped == [
        "broadcast: native:ring, native:brucks do not implement it; skipped",
        "all-gather: native:binomial does not implement it; skipped",
    ]


def test_a_sweep_refuses_what_mpich_cannot_be_forced_to_run() -> None:
    with pytest.raises(ConfigError, match="collbench's own: run it with --backend gloo"):
        mpich_algos(["ring"], [Op.ALL_REDUCE], [])
    with pytest.raises(UnknownNameError, match="native:recursive_doubling"):
        mpich_algos(["native:ring"], [Op.ALL_REDUCE], [])
    with pytest.raises(NotApplicableError, match="MPI_Sendrecv is point-to-point"):
        mpich_algos(["native:nb"], [Op.SENDRECV], [])


def test_a_tune_chooses_among_native_and_mpichs_algorithms() -> None:
    names = get_backend("mpich").tune_candidates(("broadcast",), ("ring",), CommShape(4, 1), None)  # type: ignore[arg-type]
    assert names == (
        "native",
        "native:binomial",
        "native:nb",
        "native:smp",
        "native:scatter_recursive_doubling_allgather",
        "native:scatter_ring_allgather",
    )


def test_rows_and_profiles_may_name_mpichs_algorithms() -> None:
    assert _known_algo("native:reduce_scatter_allgather") == ""
    assert _known_algo("native:nosuch") != ""
    assert get_backend("mpich").foreign_native("native:ring/ll128") is not None
    assert get_backend("mpich").foreign_native("native:recursive_doubling") is None


def test_the_selection_file_runs_each_choice_where_it_won_and_mpichs_own_elsewhere() -> None:
    built = build_mpich_json(mpich_profile(FOUR, EIGHT), BASE, "base.json")
    tree = json.loads(built.text)
    ar = "allreduce"
    # 4 ranks: native below 8 KiB is MPICH's own tree (recursive doubling to 2 KiB, then RSAG).
    assert csel_search(tree, ar, 4, 1024, 4096) == "MPIR_Allreduce_intra_recursive_doubling"
    assert csel_search(tree, ar, 4, 4096, 16384) == "MPIR_Allreduce_intra_reduce_scatter_allgather"
    assert csel_search(tree, ar, 4, 8192, 32768) == "MPIR_Allreduce_intra_recursive_doubling"
    assert csel_search(tree, ar, 4, 65535, 0) == "MPIR_Allreduce_intra_recursive_doubling"
    assert csel_search(tree, ar, 4, 65536, 0) == "MPIR_Allreduce_allcomm_nb"
    # Sizes the profile has no rules for keep MPICH's own: 3, 5 to 7, and 9 ranks or more.
    assert csel_search(tree, ar, 3, 65536, 0) == "MPIR_Allreduce_intra_reduce_scatter_allgather"
    assert csel_search(tree, ar, 6, 65536, 0) == "MPIR_Allreduce_intra_reduce_scatter_allgather"
    assert csel_search(tree, ar, 8, 65536, 0) == "MPIR_Allreduce_intra_recursive_doubling"
    assert csel_search(tree, ar, 9, 65536, 0) == "MPIR_Allreduce_intra_reduce_scatter_allgather"
    assert csel_search(tree, "bcast", 4, 1 << 20, 0) == "MPIR_Bcast_intra_binomial"
    assert csel_search(tree, "bcast", 16, 1 << 20, 0) == "MPIR_Bcast_intra_scatter_ring_allgather"
    # all-to-all's avg_msg_size is one block: 4,095 bytes over 4 ranks is 1,023 bytes a block.
    assert csel_search(tree, "alltoall", 4, 1023, 0) == "MPIR_Alltoall_intra_pairwise"
    # pairwise takes no MPI_IN_PLACE (coll_algorithms.txt: noinplace): in place keeps MPICH's own.
    assert csel_search(tree, "alltoall", 4, 1023, 0, in_place=True) == "MPIR_Alltoall_intra_brucks"
    assert csel_search(tree, "alltoall", 4, 1024, 0) == "MPIR_Alltoall_intra_brucks"
    assert csel_search(tree, "barrier", 4, 0, 0) == "MPIR_Barrier_allcomm_nb"
    assert tree["collective=allreduce"]["comm_type=inter"] == BASE["collective=allreduce"]["comm_type=inter"]
    assert any("recursive_doubling (90 us, 1.40x over native)" in n for n in built.notes)


def test_a_size_keyless_collective_gets_a_rule_only_where_one_algorithm_won() -> None:
    barrier = RuleSet(4, 1, (rule("barrier", 0, 0, "native:nb"), rule("barrier", 1, None, "native:dissemination")))
    built = build_mpich_json(mpich_profile(barrier), BASE, "base.json")
    assert json.loads(built.text)["collective=barrier"] == BASE["collective=barrier"]
    assert any("no size key" in n for n in built.notes)


def test_the_selection_file_refuses_what_it_cannot_say() -> None:
    with pytest.raises(UserError, match="measured over gloo, not MPICH"):
        build_mpich_json(Profile(fingerprint="f", host="h", backend="gloo", rule_sets=(FOUR,)), BASE, "b")
    with pytest.raises(UserError, match="two shapes of 4 ranks"):
        build_mpich_json(mpich_profile(FOUR, RuleSet(4, 2, FOUR.rules)), BASE, "b")
    no_bcast = {k: v for k, v in BASE.items() if k != "collective=bcast"}
    with pytest.raises(UserError, match="no collective=bcast / comm_type=intra branch"):
        build_mpich_json(mpich_profile(FOUR), no_bcast, "b.json")
    with pytest.raises(UserError, match=r"b\.json: not an MPICH selection tree"):
        parse_base('{"a": 1}', "b.json")


def test_the_variables_force_only_a_choice_that_held_everywhere() -> None:
    built = build_mpich_env(mpich_profile(FOUR, EIGHT))
    lines = built.text.splitlines()
    assert "export MPIR_CVAR_BCAST_INTRA_ALGORITHM=binomial" in lines
    assert "export MPIR_CVAR_BARRIER_INTRA_ALGORITHM=nb" in lines
    assert not any(line.startswith("export MPIR_CVAR_ALLREDUCE") for line in lines)
    assert any(n.startswith("allreduce: the winner changes") for n in built.notes)


def test_the_commands_write_the_files(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    mpich_profile(FOUR).save(path)
    base = tmp_path / "base.json"
    base.write_text(json.dumps(BASE))
    out = tmp_path / "sel.json"
    done = CliRunner().invoke(app, ["export", "mpich-json", str(path), "--base", str(base), "-O", str(out)])
    assert done.exit_code == 0, done.output
    assert csel_search(json.loads(out.read_text()), "bcast", 4, 1, 4) == "MPIR_Bcast_intra_binomial"
    assert f"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE={out}" in done.output
    done = CliRunner().invoke(app, ["export", "mpich-json", str(path), "--base", str(tmp_path / "none.json")])
    assert done.exit_code == 2 and "error: --base" in done.output
    done = CliRunner().invoke(app, ["export", "mpich-env", str(path)])
    assert done.exit_code == 0 and "export MPIR_CVAR_BCAST_INTRA_ALGORITHM=binomial" in done.output


def test_a_base_that_is_no_file_or_nested_too_deeply_is_one_error_line(tmp_path: Path) -> None:
    # A FIFO as --base blocked the export in read_text until a writer came; 100,000 nested arrays were
    # json.loads' RecursionError, a traceback.
    path = tmp_path / "p.yaml"
    mpich_profile(FOUR).save(path)
    fifo = tmp_path / "base.fifo"
    os.mkfifo(fifo)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    assert refused_line(["export", "mpich-json", str(path), "--base", str(fifo)]) == (
        f"error: --base {fifo}: is a FIFO, not a regular file (expected MPICH's selection JSON)"
    )
    assert refused_line(["export", "mpich-json", str(path), "--base", str(deep)]) == (
        f"error: {deep}: not JSON collbench reads: nested too deeply"
    )


def test_without_mpich_the_selection_file_needs_a_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "p.yaml"
    mpich_profile(FOUR).save(path)
    monkeypatch.setenv("PATH", str(tmp_path))  # no mpicc.mpich to find MPICH's library with
    done = CliRunner().invoke(app, ["export", "mpich-json", str(path)])
    assert done.exit_code == 2
    assert done.output.startswith("error: no mpicc.mpich on PATH") and "pass --base" in done.output
