"""collbench's NCCL tuner plugin, built with the system C compiler and driven as NCCL drives it.

The driver (csrc/nccl_tuner_driver.c) dlopens the built library, looks up ``ncclTunerPlugin_vN`` and calls
it as NCCL's ``ncclGetAlgoInfo`` does (src/enqueue.cc, NVIDIA/nccl v2.30): a cost table
``float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS]`` with -1.0 (``NCCL_ALGO_PROTO_IGNORE``) in the cells NCCL
cannot run, ``nMaxChannels`` 0 before the call, then the cheapest cell >= 0 wins (``topoGetAlgoInfo``).
v1/v2 get the support flags and have their pair applied as NCCL's v2 adapter does (src/plugin/tuner/
tuner_v2.cc). v3 is also called with NCCL 2.22's 6-row table (no PAT row).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import UserError
from collbench.nccl.algorithms import PROTOCOLS, algorithm
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.schedules.ops import Op
from collbench.tuning.nccl_plugin import (
    ABI_VERSIONS,
    IGNORE,
    Query,
    Session,
    ask,
    build_driver,
    build_plugin,
    nccl_like_table,
    show,
)

P = {"segment_bytes": None, "layout": "rank-order"}
RULES = (
    Rule("all-reduce", 0, 4095, "native:tree/ll", P),
    Rule("all-reduce", 4096, 1048575, "native", P),
    Rule("all-reduce", 1048576, None, "ring", {**P, "channels": 4}),
    Rule("broadcast", 0, None, "tree", P),  # no NCCL equivalent: no line
    Rule("reduce-scatter", 0, 65535, "native:nvls", P),
    Rule("reduce-scatter", 65536, None, "native:ring/ll128", P),
)
PROFILE = Profile(fingerprint="fp", host="h", backend="nccl", rule_sets=(RuleSet(8, 2, RULES),))
# What NCCL must end up running per rule (None: NCCL's own choice, the table untouched).
EXPECT = {
    "native:tree/ll": ("tree", "LL", 0),
    "native": None,
    "ring": ("ring", "Simple", 4),
    "tree": None,
    "native:nvls": ("nvls", "Simple", 0),
    "native:ring/ll128": ("ring", "LL128", 0),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    out = tmp_path_factory.mktemp("plugin")
    result = build_plugin(PROFILE, out)
    return result.plugin, result.config, build_driver(out)


def cell(algo: str, proto: str) -> int:
    found = algorithm(algo)
    assert found is not None
    return found.number * 3 + PROTOCOLS.index(proto)


def table_for(op: Op, num_algo: int = 7) -> tuple[float, ...]:
    return nccl_like_table(op, nodes=2, ranks=8, num_algo=num_algo)


def sizes() -> list[tuple[Op, int]]:
    out = []
    for rule in RULES:
        n = rule.min_bytes
        out.extend((Op.parse(rule.op), x) for x in (n - 1, n, n + 1) if x >= 0)
    return out


@pytest.mark.parametrize("abi", sorted(ABI_VERSIONS))
def test_every_rule_boundary_picks_the_profiles_cell_and_nothing_else(built: tuple[Path, Path, Path], abi: int) -> None:
    plugin, config, driver = built
    num_algo = 6 if abi == 3 else 7  # NCCL 2.22 (v3) has no PAT row
    queries = [Query(op, n, table_for(op, num_algo)) for op, n in sizes()]
    session = ask(plugin, driver, abi=abi, ranks=8, nodes=2, queries=queries, config=config)
    assert (session.init_rc, session.final_rc) == (0, 0)
    assert not [m for level, m in session.logs if level == 2]  # a good file: no warning
    for query, answer in zip(queries, session.answers, strict=True):
        rule = PROFILE.select(query.op, query.nbytes)
        expect = EXPECT[rule.algo]
        assert answer.rc == 0
        changed = [i for i, (a, b) in enumerate(zip(query.table, answer.table, strict=True)) if a != b]
        if expect is None:
            assert changed == [] and answer.channels == 0, (rule, query.nbytes)
            continue
        algo, proto, channels = expect
        assert changed == [cell(algo, proto)], (rule, query.nbytes)
        assert answer.table[cell(algo, proto)] == 0.0
        assert (answer.algo, answer.proto) == divmod(cell(algo, proto), 3)
        assert answer.channels == channels, (rule, query.nbytes)


@pytest.mark.parametrize("abi", sorted(ABI_VERSIONS))
@pytest.mark.parametrize(("ranks", "nodes"), [(16, 2), (8, 1), (4, 2)])
def test_other_communicator_shapes_are_left_to_nccl(
    built: tuple[Path, Path, Path], abi: int, ranks: int, nodes: int
) -> None:
    plugin, config, driver = built
    queries = [Query(op, n, nccl_like_table(op, nodes=nodes, ranks=ranks)) for op, n in sizes()]
    session = ask(plugin, driver, abi=abi, ranks=ranks, nodes=nodes, queries=queries, config=config)
    for query, answer in zip(queries, session.answers, strict=True):
        assert answer.table == query.table and answer.channels == 0


@pytest.mark.parametrize("abi", [6, 5, 4, 3])
def test_ignored_cells_are_never_touched(built: tuple[Path, Path, Path], abi: int) -> None:
    plugin, config, driver = built
    table = list(table_for(Op.ALL_REDUCE))
    table[cell("ring", "Simple")] = IGNORE  # e.g. NCCL_PROTO=^Simple: the ring rule cannot apply
    table[cell("tree", "LL")] = IGNORE
    queries = [Query(Op.ALL_REDUCE, n, tuple(table)) for n in (0, 4095, 1 << 20, 1 << 40)]
    session = ask(plugin, driver, abi=abi, ranks=8, nodes=2, queries=queries, config=config)
    for answer in session.answers:
        assert answer.table == tuple(table)
        assert answer.channels == 0  # the rule's channel count goes with its algorithm, which NCCL cannot run
    assert any("passed over" in m for _, m in session.logs)


def test_first_matching_line_wins_and_ranges_are_inclusive(built: tuple[Path, Path, Path], tmp_path: Path) -> None:
    plugin, _, driver = built
    config = tmp_path / "c.conf"
    config.write_text(
        "# hand-written\nallreduce,0,100,tree,simple,-1,-1,-1\n  allreduce , 50 , 200 , ring , ll , 2 , -1 , 8\n"
    )
    queries = [Query(Op.ALL_REDUCE, n, table_for(Op.ALL_REDUCE)) for n in (100, 101, 200, 201)]
    session = ask(plugin, driver, abi=6, ranks=8, nodes=2, queries=queries, config=config)
    picks = [(a.algo, a.proto, a.channels) for a in session.answers]
    # 201 matches nothing: the table stays as NCCL made it and NCCL's cheapest (first equal) cell wins.
    assert picks == [(0, 2, 0), (1, 0, 2), (1, 0, 2), (0, 0, 0)]
    assert session.answers[3].table == queries[3].table


def test_a_row_the_table_lacks_is_passed_over(built: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """NCCL 2.22's table has 6 rows (no PAT): a PAT line must not write past it."""
    plugin, _, driver = built
    config = tmp_path / "pat.conf"
    config.write_text("allgather,0,-1,pat,simple,-1,-1,-1\nallgather,0,-1,ring,ll,-1,-1,-1\n")
    table = nccl_like_table(Op.ALL_GATHER, nodes=4, ranks=4, num_algo=6)
    session = ask(plugin, driver, abi=3, ranks=4, nodes=4, queries=[Query(Op.ALL_GATHER, 1, table)], config=config)
    (answer,) = session.answers
    assert len(answer.table) == 18
    assert [i for i, (a, b) in enumerate(zip(table, answer.table, strict=True)) if a != b] == [cell("ring", "LL")]


BAD = {
    "missing": None,
    "empty": "",
    "comments only": "# nothing\n\n",
    "unknown algorithm": "allreduce,0,-1,ring,simple,-1,2,8\nallreduce,0,-1,nvlstree,simple,-1,2,8\n",
    "too few fields": "allreduce,0,-1,ring,simple,-1,2\n",
    "not a number": "allreduce,0,1k,ring,simple,-1,2,8\n",
    "min above max": "allreduce,10,5,ring,simple,-1,2,8\n",
    "zero channels": "allreduce,0,-1,ring,simple,0,2,8\n",
    "unset": "unset",
}


# v1 keeps one process-wide context, v2-v4 share one init and v5-v6 another: one version of each.
@pytest.mark.parametrize("abi", [1, 3, 6])
@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_config_is_one_warning_and_no_overrides(
    built: tuple[Path, Path, Path], tmp_path: Path, abi: int, case: str
) -> None:
    plugin, _, driver = built
    text = BAD[case]
    config: Path | None = tmp_path / "bad.conf"
    assert config is not None
    if text == "unset":
        config = None
    elif text is not None:
        config.write_text(text)
    queries = [Query(Op.ALL_REDUCE, n, table_for(Op.ALL_REDUCE)) for n in (0, 1 << 20)]
    session: Session = ask(plugin, driver, abi=abi, ranks=8, nodes=2, queries=queries, config=config)
    assert (session.init_rc, session.final_rc) == (0, 0)
    warnings = [m for level, m in session.logs if level == 2]
    assert len(warnings) == 1 and "no overrides" in warnings[0], session.logs
    for query, answer in zip(queries, session.answers, strict=True):
        assert answer.rc == 0 and answer.table == query.table and answer.channels == 0


def test_show_reports_the_plugins_own_answers() -> None:
    rows = show(PROFILE)
    picks = {(r.op, r.nbytes): (r.plugin_pick, r.channels) for r in rows}
    assert picks[(Op.ALL_REDUCE, 4095)] == ("tree/ll", 0)
    assert picks[(Op.ALL_REDUCE, 4096)] == ("NCCL's own choice", 0)
    assert picks[(Op.ALL_REDUCE, 1048576)] == ("ring/simple", 4)
    assert picks[(Op.BROADCAST, 0)] == ("NCCL's own choice", 0)
    assert picks[(Op.REDUCE_SCATTER, 65535)] == ("nvls/simple", 0)
    assert picks[(Op.REDUCE_SCATTER, 65536)] == ("ring/ll128", 0)
    assert {r.shape for r in rows} == {"8 ranks on 2 node(s), measured"}


def test_cli_builds_the_plugin_and_prints_the_two_environment_lines(tmp_path: Path) -> None:
    path = PROFILE.save(tmp_path / "p.yaml")
    out = tmp_path / "plugin"
    result = CliRunner().invoke(app, ["export", "nccl-plugin", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert f"NCCL_TUNER_PLUGIN={(out / 'libnccl-tuner-collbench.so').resolve()}" in lines
    assert f"NCCL_TUNER_CONFIG_FILE={(out / 'nccl-tuner.conf').resolve()}" in lines
    assert (out / "libnccl-tuner-collbench.so").stat().st_size > 0
    assert "ring,simple,4,2,8" in (out / "nccl-tuner.conf").read_text()
    shown = CliRunner().invoke(app, ["export", "nccl-plugin", "--show", str(path)])
    assert shown.exit_code == 0, shown.output
    assert "ring/simple" in shown.stdout and "tree/ll" in shown.stdout


def test_cli_without_a_compiler_or_output_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = PROFILE.save(tmp_path / "p.yaml")
    result = CliRunner().invoke(app, ["export", "nccl-plugin", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.output and "-o" in result.output
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    result = CliRunner().invoke(app, ["export", "nccl-plugin", str(path), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "no C compiler found" in result.output
    with pytest.raises(UserError, match="no C compiler"):
        build_plugin(PROFILE, tmp_path / "o2")
