"""collbench's tuner plugin as NCCL 2.30 finds it, and against the profile the GPU first run gives it.

The contract, NVIDIA/nccl at v2.30.7-1:

- src/plugin/tuner.cc lines 73-85: NCCL dlsyms ``ncclTunerPlugin_v6``, then v5, v4, v3 and v2 (v1 no
  longer), and uses the first found; src/plugin/tuner/tuner_v6.cc hands NCCL the v6 struct itself.
- src/include/plugin/tuner/tuner_v6.h: v6 is v5 with ``getChunkSize`` appended, "optional - if NULL,
  NCCL's computed chunk size is used"; src/enqueue.cc line 2308 calls it only where it is not NULL.
- src/init.cc (``ncclTunerPluginLoad`` then ``comm->tuner->init(&comm->tunerContext, comm->commHash,
  comm->nRanks, comm->nNodes, ncclDebugLog, &comm->nvlDomainInfo, &comm->tunerConstants)``): init runs
  for every communicator, one rank too, and a failure there fails the communicator (NCCLCHECK).
- src/enqueue.cc lines 2137-2149: ``float collCostTable[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS]``, every
  cell -1.0 (``NCCL_ALGO_PROTO_IGNORE``) but those NCCL can run, passed as ``float**`` with
  ``NCCL_NUM_ALGORITHMS`` (7) and ``NCCL_NUM_PROTOCOLS`` (3) and ``nMaxChannels`` 0; then
  ``topoGetAlgoInfo`` takes the cheapest cell >= 0. At one rank (line 3039) NCCL runs
  ``ncclLaunchOneRank`` and never asks the tuner.

The driver (csrc/nccl_tuner_driver.c) makes those calls; ABI 0 is NCCL 2.30's lookup.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.exporters.nccl_plugin import Query, ask, build_driver, build_plugin, drive, nccl_like_table
from collbench.nccl.algorithms import PROTOCOLS, algorithm
from collbench.profile.document import Profile
from collbench.schedules.ops import Op

REPO = Path(__file__).resolve().parents[2]
# benchmarks/first_run_checks.py's PLUGIN_PROFILE: the profile the GPU first run exports and loads in NCCL.
FIRST_RUN_PROFILE = REPO / "tests" / "fixtures" / "profiles" / "cpu-2core-gloo-4ranks.yaml"
# What NCCL must run per rule of that profile: its gloo tree and ring are NCCL's tree and ring at Simple
# (export nccl-tuner --from-other-backend); an algorithm NCCL lacks (direct, ...) leaves NCCL its choice.
NCCL_PAIR = {"tree": ("tree", "Simple"), "ring": ("ring", "Simple")}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Profile, Path, Path, Path]:
    out = tmp_path_factory.mktemp("first-run-plugin")
    profile = Profile.load(FIRST_RUN_PROFILE)
    build = build_plugin(profile, out, from_other_backend=True)
    return profile, build.plugin, build.config, build_driver(out)


def cell(algo: str, proto: str) -> int:
    found = algorithm(algo)
    assert found is not None
    return found.number * len(PROTOCOLS) + PROTOCOLS.index(proto)


def test_nccl_2_30_finds_the_v6_entry_points_with_no_chunk_size_override(
    first_run: tuple[Profile, Path, Path, Path],
) -> None:
    _, plugin, config, driver = first_run
    out = drive(plugin, driver, abi=0, ranks=4, nodes=1, lines=[], config=config)
    lines = out.splitlines()
    assert lines[:2] == ["symbol collbench v6", "chunk none"], out
    assert "init 0" in lines and lines[-1] == "final 0"


def test_the_first_run_profile_steers_nccls_table_as_its_rules_say(first_run: tuple[Profile, Path, Path, Path]) -> None:
    profile, plugin, config, driver = first_run
    ranks, nodes = profile.world_size, profile.nodes
    rules = profile.rule_set(ranks, nodes).rules_for(Op.ALL_REDUCE)
    assert {r.algo for r in rules} & set(NCCL_PAIR), "the first run's profile gives NCCL no line"
    sizes = sorted({x for r in rules for x in (r.min_bytes - 1, r.min_bytes, r.min_bytes + 1) if x >= 0} | {1 << 30})
    table = nccl_like_table(Op.ALL_REDUCE, nodes=nodes, ranks=ranks)
    queries = [Query(Op.ALL_REDUCE, n, table) for n in sizes]
    # NCCL 2.30's lookup (v6) and the oldest table version NCCL 2.30 still takes (v2, through its adapter).
    for abi in (0, 2):
        session = ask(plugin, driver, abi=abi, ranks=ranks, nodes=nodes, queries=queries, config=config)
        assert (session.init_rc, session.final_rc) == (0, 0)
        assert [level for level, _ in session.logs] == [3], session.logs
        assert session.logs[0][1].endswith(f"for {ranks} ranks on {nodes} node"), session.logs
        for query, answer in zip(queries, session.answers, strict=True):
            rule = profile.select(Op.ALL_REDUCE, query.nbytes, world_size=ranks, nodes=nodes)
            changed = [i for i, (a, b) in enumerate(zip(query.table, answer.table, strict=True)) if a != b]
            assert answer.rc == 0 and answer.channels == 0, (abi, rule, query.nbytes)
            pair = NCCL_PAIR.get(rule.algo)
            if pair is None:
                assert changed == [], (abi, rule, query.nbytes)
            else:
                assert changed == [cell(*pair)] and answer.table[cell(*pair)] == 0.0, (abi, rule, query.nbytes)
                assert (answer.algo, answer.proto) == divmod(cell(*pair), len(PROTOCOLS))


@pytest.mark.parametrize(("ranks", "nodes"), [(1, 1), (8, 1), (8, 2)])
def test_a_communicator_of_another_shape_keeps_nccls_choice_and_says_so_once(
    first_run: tuple[Profile, Path, Path, Path], ranks: int, nodes: int
) -> None:
    # The first run's one NCCL rank reads the 4-rank profile: its line said "2 rules from FILE for 1 ranks
    # on 1 node", read as rules that applied there.
    profile, plugin, config, driver = first_run
    queries = [Query(Op.ALL_REDUCE, n, nccl_like_table(Op.ALL_REDUCE, nodes=nodes, ranks=ranks)) for n in (0, 1 << 30)]
    session = ask(plugin, driver, abi=0, ranks=ranks, nodes=nodes, queries=queries, config=config)
    assert (session.init_rc, session.final_rc) == (0, 0)
    (line,) = (message for _, message in session.logs)
    shape = f"{ranks} rank{'s' if ranks > 1 else ''} on {nodes} node{'s' if nodes > 1 else ''}"
    held = f"{profile.world_size} ranks on {profile.nodes} node"
    assert f" rules from {config}, none for {shape} (they are for {held}); NCCL keeps its own choices here" in line
    for query, answer in zip(queries, session.answers, strict=True):
        assert answer.rc == 0 and answer.table == query.table and answer.channels == 0


def test_a_file_of_several_shapes_counts_those_of_this_communicator(
    first_run: tuple[Profile, Path, Path, Path], tmp_path: Path
) -> None:
    _, plugin, _, driver = first_run
    config = tmp_path / "shapes.conf"
    config.write_text(
        "allreduce,0,-1,ring,simple,-1,1,4\nallreduce,0,-1,tree,ll,-1,2,8\n"
        "allgather,0,-1,ring,ll,-1,-1,8\nallgather,0,-1,ring,ll,-1,3,-1\nallgather,0,-1,ring,ll,-1,5,40\n"
    )
    said = {}
    for ranks, nodes in ((8, 2), (4, 1), (6, 3), (2, 2)):
        session = ask(plugin, driver, abi=6, ranks=ranks, nodes=nodes, queries=[], config=config)
        (said[ranks, nodes],) = (message.split(str(config), 1)[1] for _, message in session.logs)
    assert said[8, 2] == ", 2 of them for 8 ranks on 2 nodes"  # its own line and the one for any nodes
    assert said[4, 1] == ", 1 of them for 4 ranks on 1 node"
    assert said[6, 3] == ", 1 of them for 6 ranks on 3 nodes"  # the line for any ranks on 3 nodes
    assert said[2, 2] == (
        ", none for 2 ranks on 2 nodes (they are for 4 ranks on 1 node, 8 ranks on 2 nodes, 8 ranks on any nodes, "
        "...); NCCL keeps its own choices here"
    )


def test_functions_past_all_reduce_are_left_to_nccl(first_run: tuple[Profile, Path, Path, Path]) -> None:
    # ncclFunc_t at v2.30.7-1 (src/include/nccl_common.h) runs on past ncclFuncAllReduce (4): SendRecv 5 ..
    # WaitSignal 14, AlltoAll 8 among them. The config names the first five alone; any other is NCCL's.
    profile, plugin, config, driver = first_run
    table = nccl_like_table(Op.ALL_REDUCE, nodes=profile.nodes, ranks=profile.world_size)
    costs = " ".join(f"{c:g}" for c in table)
    lines = [f"{func} {n} 1 0 7 {costs}" for func in range(5, 15) for n in (0, 1 << 20)]
    out = drive(plugin, driver, abi=0, ranks=profile.world_size, nodes=profile.nodes, lines=lines, config=config)
    tables = [line.split()[1:] for line in out.splitlines() if line.startswith("table ")]
    picks = [line.split() for line in out.splitlines() if line.startswith("pick ")]
    assert len(tables) == len(lines) and all([float(x) for x in t] == list(table) for t in tables)
    assert len(picks) == len(lines)
    assert all(p[3:] == ["0", "0"] for p in picks)  # nChannels 0 (NCCL's), ncclSuccess
