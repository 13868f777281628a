"""collbench's NCCL tuner plugin, built with the system C compiler and driven as NCCL drives it.

The driver (csrc/nccl_tuner_driver.c) dlopens the built library, looks up ``ncclTunerPlugin_vN`` and calls
it as NCCL's ``ncclGetAlgoInfo`` does (src/enqueue.cc, NVIDIA/nccl v2.30): a cost table
``float[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS]`` with -1.0 (``NCCL_ALGO_PROTO_IGNORE``) in the cells NCCL
cannot run, ``nMaxChannels`` 0 before the call, then the cheapest cell >= 0 wins (``topoGetAlgoInfo``).
v1/v2 get the support flags and have their pair applied as NCCL's v2 adapter does (src/plugin/tuner/
tuner_v2.cc). v3 is also called with NCCL 2.22's 6-row table (no PAT row).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import UserError
from collbench.exporters.nccl_plugin import (
    ABI_VERSIONS,
    IGNORE,
    Query,
    Session,
    ask,
    build_driver,
    build_plugin,
    c_compiler,
    compile_c,
    drive,
    nccl_like_table,
    parse_session,
    plugin_sources,
    query_line,
    show,
)
from collbench.exporters.nccl_tuner import NO_LINES, build_nccl_tuner
from collbench.fileio import csrc_dir
from collbench.nccl.algorithms import PROTOCOLS, algorithm
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.schedules.ops import Op

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


BAD: dict[str, str | bytes | None] = {
    "missing": None,
    "empty": "",
    "unknown algorithm": "allreduce,0,-1,ring,simple,-1,2,8\nallreduce,0,-1,nvlstree,simple,-1,2,8\n",
    "too few fields": "allreduce,0,-1,ring,simple,-1,2\n",
    "not a number": "allreduce,0,1k,ring,simple,-1,2,8\n",
    "min above max": "allreduce,10,5,ring,simple,-1,2,8\n",
    "zero channels": "allreduce,0,-1,ring,simple,0,2,8\n",
    "unset": "unset",
    # Init runs inside every rank's ncclCommInit: a FIFO blocked it for ever, /dev/zero was read without
    # end (1 GB before a limit stopped it). Only a regular file is read, lines of at most 4 KiB.
    "a FIFO": "fifo",
    "/dev/zero": "/dev/zero",
    "a directory": "directory",
    "a 5000-byte line": "allreduce,0,-1,ring,simple,-1,2,8" + " " * 5000 + "\n",
    # A NUL byte ended the line for strlen: both were called 'a line longer than 4096 bytes'.
    "UTF-16": "allreduce,0,-1,ring,simple,-1,2,8\n".encode("utf-16"),
    "a NUL byte": b"allreduce,0,-1,ring,simple,-1,2,8\nallreduce,0,-1,ring\0,simple,-1,2,8\n",
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
    elif text == "fifo":
        os.mkfifo(config)  # no writer ever opens it: opening it to read would wait for one
    elif text == "/dev/zero":
        config = Path("/dev/zero")
    elif text == "directory":
        config.mkdir()
    elif isinstance(text, bytes):
        config.write_bytes(text)
    elif text is not None:
        config.write_text(text)
    queries = [Query(Op.ALL_REDUCE, n, table_for(Op.ALL_REDUCE)) for n in (0, 1 << 20)]
    session: Session = ask(plugin, driver, abi=abi, ranks=8, nodes=2, queries=queries, config=config)
    assert (session.init_rc, session.final_rc) == (0, 0)
    warnings = [m for level, m in session.logs if level == 2]
    assert len(warnings) == 1 and "no overrides" in warnings[0], session.logs
    for query, answer in zip(queries, session.answers, strict=True):
        assert answer.rc == 0 and answer.table == query.table and answer.channels == 0


def test_a_profile_that_leaves_nccl_its_choice_everywhere_says_so_once_and_nccl_never_warns(
    built: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    # A tune whose NCCL selection is native at every size, or a gloo profile of collbench's own algorithms
    # (one-shot, direct) exported with --from-other-backend: the config holds comments alone. It warned
    # "holds no rules" through NCCL's logger on every rank at every communicator's creation; the export
    # said only "a job needs: NCCL_TUNER_PLUGIN=...".
    plugin, _, driver = built
    rules = (Rule("all-reduce", 0, 4095, "native", P), Rule("all-reduce", 4096, None, "native", P))
    native = Profile(fingerprint="fp", host="h", backend="nccl", rule_sets=(RuleSet(8, 2, rules, nccl_rules=rules),))
    exported = build_nccl_tuner(native)
    assert exported.notes[-1] == NO_LINES and exported.text.count("a job needs neither") == 1
    assert all(line.startswith("#") for line in exported.text.splitlines())
    config = tmp_path / "nccl-tuner.conf"
    config.write_text(exported.text)
    queries = [Query(Op.ALL_REDUCE, n, table_for(Op.ALL_REDUCE)) for n in (0, 4096, 1 << 20)]
    session = ask(plugin, driver, abi=6, ranks=8, nodes=2, queries=queries, config=config)
    assert [level for level, _ in session.logs] == [3], session.logs
    assert "comments and no rules" in session.logs[0][1]
    for query, answer in zip(queries, session.answers, strict=True):
        assert answer.rc == 0 and answer.table == query.table and answer.channels == 0
    # The CLI says it before the two lines (the notes go to stderr).
    path = native.save(tmp_path / "p.yaml")
    done = CliRunner().invoke(app, ["export", "nccl-plugin", str(path), "-O", str(tmp_path / "plug")])
    assert done.exit_code == 0 and "a job needs neither the tuner plugin" in done.stderr, done.output
    assert "a job needs:" not in done.stderr and "NCCL runs as it would without them" in done.stderr


def test_a_config_of_comments_whose_lines_were_all_skipped_still_warns(
    built: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    plugin, _, driver = built
    config = tmp_path / "wide.conf"
    config.write_text("# 65 channels, more than any NCCL holds\nallreduce,0,-1,ring,simple,65,2,8\n")
    session = ask(plugin, driver, abi=6, ranks=8, nodes=2, queries=[], config=config)
    warnings = [m for level, m in session.logs if level == 2]
    assert len(warnings) == 2 and "holds no rules" in warnings[1], session.logs


def test_show_reports_the_plugins_own_answers() -> None:
    rows = show(PROFILE)
    picks = {(r.op, r.nbytes): (r.plugin_pick, r.channels) for r in rows}
    assert picks[(Op.ALL_REDUCE, 4095)] == ("tree/ll", 0)
    assert picks[(Op.ALL_REDUCE, 4096)] == ("NCCL's own choice", 0)
    assert picks[(Op.ALL_REDUCE, 1048576)] == ("ring/simple", 4)
    assert picks[(Op.BROADCAST, 0)] == ("NCCL's own choice", 0)
    assert picks[(Op.REDUCE_SCATTER, 65535)] == ("nvls/simple", 0)
    assert picks[(Op.REDUCE_SCATTER, 65536)] == ("ring/ll128", 0)
    assert {r.shape for r in rows} == {"8 ranks on 2 nodes, measured"}


def answer_of(
    built: tuple[Path, Path, Path], config: Path, abi: int, lines: list[str], ranks: int = 8, nodes: int = 2
) -> Session:
    plugin, _, driver = built
    return parse_session(drive(plugin, driver, abi=abi, ranks=ranks, nodes=nodes, lines=lines, config=config))


# NCCL's MAXCHANNELS (src/include/device.h) is 32 up to 2.24 and 64 from 2.25, and from 2.22 it keeps the count
# in `int32_t nMaxChannels:8` (src/include/comm.h): 128 wraps to -128, 256 to 0. v4 serves 2.24 too.
@pytest.mark.parametrize(
    ("abi", "channels", "kept"),
    [
        *((6, 256, False), (6, 128, False), (6, 65, False), (6, 64, True), (5, 64, True)),
        *((4, 33, False), (4, 32, True), (3, 48, False), (2, 64, False), (1, 33, False), (1, 32, True)),
    ],
)
def test_a_channel_count_nccl_cannot_hold_is_skipped_with_a_warning(
    built: tuple[Path, Path, Path], tmp_path: Path, abi: int, channels: int, kept: bool
) -> None:
    config = tmp_path / "wide.conf"
    config.write_text(f"allreduce,0,1000,ring,simple,{channels},-1,-1\nallreduce,0,-1,tree,simple,2,-1,-1\n")
    session = answer_of(built, config, abi, [query_line(Query(Op.ALL_REDUCE, 100, table_for(Op.ALL_REDUCE)))])
    (answer,) = session.answers
    warnings = [m for level, m in session.logs if level == 2]
    if kept:
        assert (answer.algo, answer.proto, answer.channels) == (1, 2, channels) and not warnings
    else:
        assert (answer.algo, answer.proto, answer.channels) == (0, 2, 2)  # the next line applies
        assert len(warnings) == 1 and f"line 1: channels {channels} is more than" in warnings[0], warnings
        assert "skipped" in warnings[0]


def test_v1_a_communicator_destroyed_leaves_the_others_rules(built: tuple[Path, Path, Path]) -> None:
    """NCCL 2.19-2.20 call v1's init and destroy once per communicator: one going must not take the other's."""
    _, config, _ = built
    q = query_line(Query(Op.ALL_REDUCE, 1 << 20, table_for(Op.ALL_REDUCE)))
    session = answer_of(built, config, 1, [q, "open 8 2", "close 1", q, "open 8 2", q, "close 2", q])
    assert [(a.algo, a.proto, a.channels) for a in session.answers] == [(1, 2, 4)] * 4


def test_v1_communicators_of_different_shapes_take_only_lines_for_any_shape(
    built: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """v1 cannot tell which communicator asks: a line for 8 ranks must not steer a 16-rank one."""
    config = tmp_path / "shapes.conf"
    config.write_text("allreduce,0,-1,tree,ll,-1,2,8\nallreduce,0,-1,ring,ll128,-1,-1,-1\n")
    q = query_line(Query(Op.ALL_REDUCE, 4096, table_for(Op.ALL_REDUCE)))
    session = answer_of(built, config, 1, [q, "open 16 2", q])
    assert [(a.algo, a.proto) for a in session.answers] == [(0, 0), (1, 1)]
    assert any("cannot tell them apart" in m for level, m in session.logs if level == 2)


@pytest.mark.parametrize("abi", [2, 4, 6])
def test_contexts_answer_for_their_own_shape_and_outlive_each_other(
    built: tuple[Path, Path, Path], tmp_path: Path, abi: int
) -> None:
    config = tmp_path / "shapes.conf"
    config.write_text("allreduce,0,-1,tree,ll,-1,2,8\nallreduce,0,-1,ring,ll128,-1,-1,-1\n")
    q = query_line(Query(Op.ALL_REDUCE, 4096, nccl_like_table(Op.ALL_REDUCE, nodes=2, ranks=16)))
    session = answer_of(built, config, abi, [q, "open 16 2", q, "use 0", "close 1", q])
    assert [(a.algo, a.proto) for a in session.answers] == [(0, 0), (1, 1), (0, 0)]


def asan_problem(where: Path) -> str | None:
    """Why this machine cannot build and run an AddressSanitizer program, or None."""
    source = where / "asan_probe.c"
    source.write_text("#include <stdlib.h>\nint main(void) { free(malloc(8)); return 0; }\n")
    try:
        binary = compile_c(source, where / "asan_probe", shared=False, extra_flags=("-fsanitize=address",))
        done = subprocess.run([str(binary)], capture_output=True, text=True, timeout=60, check=False)
    except (UserError, OSError, subprocess.TimeoutExpired) as exc:
        return f"{' '.join(c_compiler())} -fsanitize=address does not build here: {exc}"
    return None if done.returncode == 0 else f"an ASan program does not run here: {done.stderr.strip()[:200]}"


@pytest.fixture(scope="module")
def asan_built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("asan")
    problem = asan_problem(out)
    if problem is not None:
        pytest.skip(problem)
    flags = ("-fsanitize=address", "-fno-omit-frame-pointer", "-g")
    plugin = compile_c(plugin_sources(), out / "plugin.so", shared=True, extra_flags=flags)
    driver = compile_c(csrc_dir() / "nccl_tuner_driver.c", out / "driver", shared=False, extra_flags=flags)
    return plugin, driver


@pytest.mark.parametrize("abi", [1, 2, 6])
def test_communicators_made_and_destroyed_while_another_asks_are_memory_safe(
    asan_built: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, abi: int
) -> None:
    """One thread asks communicator 0 while another creates and destroys communicators, under ASan."""
    plugin, driver = asan_built
    config = tmp_path / "many.conf"
    config.write_text("".join(f"allreduce,{i * 1000},{i * 1000 + 999},ring,simple,-1,-1,-1\n" for i in range(2000)))
    monkeypatch.setenv("ASAN_OPTIONS", "halt_on_error=1:detect_leaks=1")
    q = query_line(Query(Op.ALL_REDUCE, 4096, table_for(Op.ALL_REDUCE)))
    out = drive(plugin, driver, abi=abi, ranks=8, nodes=2, lines=["race 200", q], config=config, timeout_s=120)
    race = next(line.split() for line in out.splitlines() if line.startswith("race "))
    assert int(race[1]) > 0 and int(race[2]) == 200
    (answer,) = parse_session(out).answers
    assert (answer.algo, answer.proto) == (1, 2)  # communicator 0 keeps its rules throughout


def test_a_million_line_config_costs_a_lookup_not_a_scan(built: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """NCCL asks before every collective: a long file must cost at init, not per call (a scan took ~5 ms)."""
    config = tmp_path / "long.conf"
    algos = ("tree", "ring")
    config.write_text(
        "".join(f"allreduce,{16 * i},{16 * i + 15},{algos[i % 2]},simple,-1,-1,-1\n" for i in range(10**6))
    )
    table = table_for(Op.ALL_REDUCE)
    lines = [f"time 2000 {query_line(Query(Op.ALL_REDUCE, 16 * 50_000 + 3, table))}"]
    lines += [query_line(Query(Op.ALL_REDUCE, n, table)) for n in (16 * 50_001 + 3, 16 * 99_999, 16 * 100_000)]
    plugin, _, driver = built
    out = drive(plugin, driver, abi=6, ranks=8, nodes=2, lines=lines, config=config)
    _, per_call_ns, examined = next(line.split() for line in out.splitlines() if line.startswith("time "))
    assert float(per_call_ns) < 50_000, out[-500:]  # generous: a lookup takes well under a microsecond
    assert 0 <= float(examined) <= 2  # one group (allreduce, ring or tree / simple) each: no line-by-line scan
    session = parse_session(out)
    assert [(a.algo, a.proto) for a in session.answers[:2]] == [(1, 2), (1, 2)]
    assert session.answers[2].table == table  # past the cap: no line applies, NCCL's table untouched
    warnings = [m for level, m in session.logs if level == 2]
    assert len(warnings) == 1 and "more than 100000 rules" in warnings[0], warnings


ALGOS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOS = ("ll", "ll128", "simple")


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("abi", [3, 4, 6])
def test_the_index_answers_as_the_first_matching_line_would(
    built: tuple[Path, Path, Path], tmp_path: Path, seed: int, abi: int
) -> None:
    """Overlapping ranges, shapes, numPipeOps, regBuff and ignored cells: the plugin's answer is the first line
    in file order that matches and whose cell NCCL can run, as a line-by-line reading finds it."""
    rng = random.Random(seed)
    marks = [0, 1, 100, 4096, 65536, 1 << 20]
    rules = []
    for _ in range(300):
        lo = rng.choice(marks) + rng.randrange(3)
        hi = -1 if rng.random() < 0.3 else lo + rng.choice(marks)
        rules.append(
            (
                rng.choice(["allreduce", "allgather"]),
                lo,
                hi,
                rng.randrange(7),
                rng.randrange(3),
                rng.choice([-1, 1, 8, 32]),
                rng.choice([-1, 2, 1]),
                rng.choice([-1, 8, 4]),
                rng.choice([-1, 1, 2]),
                rng.choice([-1, 0, 1]),
            )
        )
    config = tmp_path / "random.conf"
    config.write_text(
        "".join(
            f"{c},{lo},{hi},{ALGOS[a]},{PROTOS[p]},{ch},{nd},{rk},{po},{rb}\n"
            for c, lo, hi, a, p, ch, nd, rk, po, rb in rules
        )
    )
    num_algo = 6 if abi == 3 else 7
    queries = []
    for _ in range(300):
        op = rng.choice([Op.ALL_REDUCE, Op.ALL_GATHER])
        table = tuple(IGNORE if rng.random() < 0.4 else 100.0 for _ in range(num_algo * 3))
        n = max(0, rng.choice(marks) * rng.choice([1, 2]) + rng.randrange(-2, 3))
        queries.append(Query(op, n, table, pipe_ops=rng.choice([1, 2, 3]), reg_buff=rng.choice([0, 1])))
    session = answer_of(built, config, abi, [query_line(q) for q in queries])
    for q, answer in zip(queries, session.answers, strict=True):
        coll = q.op.spec.nccl_name
        reg = -1 if abi == 3 else q.reg_buff  # v3 has no regBuff argument
        first = next(
            (
                r
                for r in rules
                if r[0] == coll
                and r[1] <= q.nbytes
                and (r[2] == -1 or q.nbytes <= r[2])
                and r[6] in (-1, 2)
                and r[7] in (-1, 8)
                and r[8] in (-1, q.pipe_ops)
                and (r[9] == -1 or reg == -1 or r[9] == reg)
                and r[3] < num_algo
                and q.table[r[3] * 3 + r[4]] != IGNORE
            ),
            None,
        )
        expect = list(q.table)
        if first is not None:
            expect[first[3] * 3 + first[4]] = 0.0
        assert answer.table == tuple(expect), (q, first)
        assert answer.channels == (first[5] if first is not None and first[5] > 0 else 0)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="no /proc here")
def test_a_plugin_folder_under_proc_is_not_called_missing(tmp_path: Path) -> None:
    """mkdir under /proc fails with ENOENT, /proc there: it said 'the folder /proc does not exist'."""
    from collbench.exporters.nccl_plugin import make_dir

    with pytest.raises(UserError) as refused:
        make_dir(Path("/proc/collbench-plugin"))
    assert str(refused.value) == (
        "/proc/collbench-plugin: /proc refuses new directories (a kernel file system such as /proc or /sys); "
        "name another"
    )
    with pytest.raises(UserError, match=r"the folder .* does not exist; create it first"):
        make_dir(tmp_path / "missing" / "plugin")


@pytest.mark.parametrize("given", ["profile", "results"])
def test_a_profile_or_its_rows_as_the_config_names_the_file_that_belongs_there(
    built: tuple[Path, Path, Path], given: str
) -> None:
    """NCCL_TUNER_CONFIG_FILE pointed at the profile (or its rows) said only 'expected 8 to 10 comma-separated
    fields'; still one warning and no overrides."""
    plugin, _, driver = built
    repo = Path(__file__).resolve().parents[2] / "profiles"
    config = repo / ("cpu-2core-gloo-2ranks.yaml" if given == "profile" else "cpu-2core-gloo-2ranks-results.jsonl")
    queries = [Query(Op.ALL_REDUCE, 1 << 20, table_for(Op.ALL_REDUCE))]
    session = ask(plugin, driver, abi=6, ranks=8, nodes=2, queries=queries, config=config)
    warnings = [m for level, m in session.logs if level == 2]
    assert len(warnings) == 1, session.logs
    assert "this is a collbench profile or its results, not a tuner config" in warnings[0]
    assert "no overrides" in warnings[0]
    assert session.answers[0].table == queries[0].table


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("allreduce,0,-1,ring,simple,-1,2,8\n".encode("utf-16"), "line 1: UTF-16 text (saved by a Windows tool)"),
        (b"allreduce,0,-1,ring,simple,-1,2,8\nallreduce\0,0,-1,ring,simple,-1,2,8\n", "line 2: a NUL byte"),
        (b"allreduce,0,-1,ring,simple,-1,2,8\nallreduce,0,-1,ring,simple,-1,2,8\0", "line 2: a NUL byte"),
        (b"allreduce,0,-1,ring,simple,-1,2,8" + b" " * 5000, "line 1: a line longer than 4096 bytes"),
    ],
)
def test_a_config_that_is_not_text_says_what_it_is(
    built: tuple[Path, Path, Path], tmp_path: Path, content: bytes, why: str
) -> None:
    """A UTF-16 config (PowerShell's >) or one holding a NUL byte was 'a line longer than 4096 bytes': the
    NUL ended the line for strlen, which then held no newline. A NUL on the last line, with no newline
    after it, cut the line there and the rest was never read."""
    plugin, _, driver = built
    config = tmp_path / "c.conf"
    config.write_bytes(content)
    queries = [Query(Op.ALL_REDUCE, 1 << 20, table_for(Op.ALL_REDUCE))]
    session = ask(plugin, driver, abi=6, ranks=8, nodes=2, queries=queries, config=config)
    warnings = [m for level, m in session.logs if level == 2]
    assert len(warnings) == 1 and f"{config} {why}" in warnings[0], session.logs
    assert warnings[0].endswith("no overrides, NCCL keeps its own choices")
    assert session.answers[0].table == queries[0].table


def test_a_config_saved_with_utf8s_mark_reads_as_without_it(built: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """Notepad's 'UTF-8 with BOM' put the mark before the first collective: 'line 1: unknown collective' and
    no overrides, for a line that reads 'allreduce' on screen."""
    plugin, _, driver = built
    plain, marked = tmp_path / "plain.conf", tmp_path / "marked.conf"
    text = "allreduce,0,-1,tree,ll,-1,2,8\n"
    plain.write_text(text)
    marked.write_bytes(text.encode("utf-8-sig"))
    queries = [Query(Op.ALL_REDUCE, 1 << 20, table_for(Op.ALL_REDUCE))]
    answers = []
    for config in (plain, marked):
        session = ask(plugin, driver, abi=6, ranks=8, nodes=2, queries=queries, config=config)
        assert [m for level, m in session.logs if level == 2] == [], session.logs
        answers.append([(a.algo, a.proto, a.channels, a.table) for a in session.answers])
    assert answers[0] == answers[1]
    assert answers[1][0][:2] == (0, 0)  # tree, LL: the line applied


def test_the_plugins_line_on_loading_counts_nodes_in_words(built: tuple[Path, Path, Path], tmp_path: Path) -> None:
    # It said "1 rules from ... for 4 ranks on 1 nodes" in every rank's NCCL log of a one-node job.
    plugin, _, driver = built
    config = tmp_path / "one.conf"
    config.write_text("allreduce,0,-1,ring,simple,-1,1,4\n")
    other = ", none for 4 ranks on 2 nodes (it is for 4 ranks on 1 node); NCCL keeps its own choices here"
    for nodes, said in ((1, " for 4 ranks on 1 node"), (2, other)):
        session = ask(plugin, driver, abi=6, ranks=4, nodes=nodes, queries=[], config=config)
        assert [m for level, m in session.logs if level == 3] == [f"TUNER/collbench: 1 rule from {config}{said}"]


def test_the_plugins_parts_build_without_a_warning_and_export_only_the_entry_points(tmp_path: Path) -> None:
    """csrc/nccl_tuner_plugin.c was one file of 784 lines; its parts (the config file, the index, NCCL's entry
    points) share nccl_tuner.h. Built as export builds them with -Werror: no warning; and what the parts share
    stays inside the object (hidden visibility), so NCCL's dlsym of ncclTunerPlugin_vN and the test's counter
    are all it exports, as before the split (a global 'say' or 'loadRules' could meet another library's)."""
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) not found")
    plugin = compile_c(plugin_sources(), tmp_path / "plugin.so", shared=True, extra_flags=("-Werror",))
    listed = subprocess.run([nm, "-D", "--defined-only", str(plugin)], capture_output=True, text=True, check=True)
    exported = sorted(line.split()[-1] for line in listed.stdout.splitlines() if line.strip())
    assert exported == ["collbenchTunerExamined", *(f"ncclTunerPlugin_v{v}" for v in sorted(ABI_VERSIONS))]
    for source in plugin_sources():
        assert len(source.read_text().splitlines()) <= 600, source
