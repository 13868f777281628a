"""The NCCL exporters' output, read back by a parser of NCCL's own grammar (Open MPI: test_ompi_rules.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from export_text import unwrapped
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from collbench.errors import InputFileError, UserError
from collbench.exporters import export_nccl_env, export_nccl_tuner
from collbench.exporters.nccl_env import build_nccl_env, nccl_env_values
from collbench.exporters.nccl_tuner import build_nccl_tuner
from collbench.nccl.algorithms import algorithm as nccl_algorithm
from collbench.nccl.algorithms import protocol_number
from collbench.nccl.channels import MAX_CHANNELS
from collbench.profile.document import SCHEMA_PATH, Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.schedules.ops import Op
from collbench.tuning.consumers.nccl import why_not
from collbench.tuning.consumers.nccl_list import check_env

P = {"segment_bytes": None, "layout": "rank-order"}


def profile(rules: tuple[Rule, ...], backend: str = "nccl") -> Profile:
    return Profile(fingerprint="fp", host="h", backend=backend, rule_sets=(RuleSet(8, 2, rules),))


MIXED = profile(
    (
        Rule("all-reduce", 0, 4095, "recursive-doubling", P),
        Rule("all-reduce", 4096, 65535, "two-tree", P),
        Rule("all-reduce", 65536, 1048575, "native", P),
        Rule("all-reduce", 1048576, None, "ring", {**P, "channels": 4, "segment_bytes": 131072}),
        Rule("all-gather", 0, 999, "direct", P),
        Rule("all-gather", 1000, None, "ring", P),
        Rule("broadcast", 0, None, "tree", P),
    )
)


# --- NCCL's example tuner plugin grammar (plugins/tuner/example/plugin.c) -----------------------------

COLLS = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"}
ALGOS = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"}
PROTOS = {"ll", "ll128", "simple"}
SIZE_MAX = 2**64 - 1


@dataclass
class NcclRule:
    coll: str
    min_bytes: int
    max_bytes: int
    algo: str
    proto: str
    channels: int
    nodes: int
    ranks: int


def strtoull(text: str) -> int:
    value = int(text)
    return value % 2**64  # C's strtoull negates in unsigned arithmetic: "-1" is SIZE_MAX


def parse_nccl_tuner(text: str) -> list[NcclRule]:
    """Lines starting with '#' or empty are skipped; others: 8-10 comma fields, trimmed of spaces/tabs."""
    rules = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        assert len(line) < 256, "the plugin reads lines of at most 255 characters"
        fields = [f.strip(" \t") for f in line.split(",")]
        assert 8 <= len(fields) <= 10, line
        coll, lo, hi, algo, proto, ch, nn, nr = fields[:8]
        # The plugin maps unknown names to defaults silently; a correct file uses only known names.
        assert coll in COLLS and algo in ALGOS and proto in PROTOS, line
        rules.append(NcclRule(coll, strtoull(lo), strtoull(hi), algo, proto, int(ch), int(nn), int(nr)))
    return rules


def nccl_choice(rules: list[NcclRule], coll: str, nbytes: int, nodes: int, ranks: int) -> NcclRule | None:
    for r in rules:  # first match wins; the range is inclusive
        if (
            r.coll == coll
            and r.min_bytes <= nbytes <= r.max_bytes
            and r.nodes in (-1, nodes)
            and r.ranks in (-1, ranks)
        ):
            return r
    return None


def test_nccl_tuner_lines_parse_and_select_as_the_profile() -> None:
    text = export_nccl_tuner(MIXED)
    rules = parse_nccl_tuner(text)
    # broadcast's tree winner has no line: NCCL runs broadcast with ring only (it used to get one).
    assert [(r.coll, r.algo) for r in rules] == [("allreduce", "tree"), ("allreduce", "ring"), ("allgather", "ring")]
    assert all((r.nodes, r.ranks) == (2, 8) for r in rules)
    ring = rules[1]
    assert (ring.min_bytes, ring.max_bytes, ring.channels, ring.proto) == (1048576, SIZE_MAX, 4, "simple")
    assert rules[0].channels == -1  # no channel count measured: keep NCCL's
    # Every size of the profile: NCCL ends up with the profile's algorithm where NCCL has it, else its own.
    for nbytes in (0, 100, 4095, 4096, 65535, 65536, 1 << 20, 1 << 40):
        chosen = nccl_choice(rules, "allreduce", nbytes, 2, 8)
        rule = MIXED.select("all-reduce", nbytes)
        expect = {"two-tree": "tree", "ring": "ring"}.get(rule.algo)
        assert (chosen.algo if chosen else None) == expect, nbytes
    assert nccl_choice(rules, "allreduce", 1 << 30, 1, 8) is None  # another machine shape: untouched
    assert nccl_choice(rules, "broadcast", 100, 2, 8) is None


def test_nccl_tuner_writes_only_what_nccl_runs_and_comments_stay_readable() -> None:
    text = export_nccl_tuner(MIXED)
    for r in parse_nccl_tuner(text):
        algo = nccl_algorithm(r.algo)
        assert algo is not None
        assert why_not(Op.parse(r.coll), algo, protocol_number(r.proto), nodes=r.nodes, ranks=r.ranks) is None, r
    # The example plugin reads 255 characters a line; a longer comment's tail would become a line.
    assert all(len(line) < 256 for line in text.splitlines())


def test_nccl_tuner_explains_what_it_leaves_out() -> None:
    built = build_nccl_tuner(MIXED)
    text = unwrapped(built.text)
    assert "recursive-doubling has no NCCL equivalent (NCCL has ring and tree); NCCL keeps its own choice" in text
    assert "direct has no NCCL equivalent" in text
    assert "tree has no NCCL equivalent for broadcast: NCCL runs broadcast with Ring only" in text
    assert "native wins: NCCL's own choice; no line" in text
    # The terminal hears of every rule NCCL will not follow, not of native ones (nothing lost there).
    assert len(built.notes) == 3 and all("no NCCL equivalent" in n for n in built.notes)
    gloo = export_nccl_tuner(profile(MIXED.rules, backend="gloo"), from_other_backend=True)
    assert "measured with gloo, not NCCL" in gloo


def test_forced_nccl_variants_map_with_their_protocol() -> None:
    p = profile(
        (
            Rule("all-reduce", 0, 65535, "native:tree/ll128", P),
            Rule("all-reduce", 65536, None, "native:NVLSTree", P),
            Rule("reduce-scatter", 0, None, "native:collnetdirect", P),
        )
    )
    rules = parse_nccl_tuner(export_nccl_tuner(p))
    assert [(r.coll, r.algo, r.proto, r.min_bytes) for r in rules] == [
        ("allreduce", "tree", "ll128", 0),
        ("allreduce", "nvls_tree", "simple", 65536),
        ("reducescatter", "collnet_direct", "simple", 0),
    ]
    text = unwrapped(export_nccl_tuner(p))
    assert "only where NCCL enables it: needs a CollNet network plugin, NCCL_COLLNET_ENABLE=1, NVSwitch" in text
    one_gpu_per_node = Profile(
        fingerprint="fp",
        host="h",
        backend="nccl",
        rule_sets=(RuleSet(4, 4, (Rule("all-gather", 0, None, "native:pat", P),)),),
    )
    assert parse_nccl_tuner(export_nccl_tuner(one_gpu_per_node))[0].algo == "pat"
    only_ring = profile((Rule("all-reduce", 0, None, "native:ring", P),))
    assert parse_nccl_algo(export_nccl_env(only_ring)) == {"allreduce": "ring"}


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        (Rule("broadcast", 0, None, "native:tree", P), "NCCL runs broadcast with Ring only"),
        (Rule("all-reduce", 0, None, "native:nvls/ll128", P), "nvls with the simple protocol only"),
        (Rule("all-reduce", 0, None, "native:pat", P), "NCCL runs all-reduce with"),
        (Rule("all-gather", 0, None, "native:pat", P), "PAT with one GPU per node only"),
        (Rule("all-reduce", 0, None, "ring", {**P, "protocol": "ll64"}), "NCCL has LL, LL128 and Simple"),
    ],
)
def test_nccl_exports_refuse_rules_nccl_cannot_have_run(rule: Rule, why: str) -> None:
    for export in (export_nccl_tuner, export_nccl_env):
        with pytest.raises(UserError, match=why):
            export(profile((rule,)))


def test_nvls_tree_on_one_node_is_refused() -> None:
    one_node = Profile(
        fingerprint="fp",
        host="h",
        backend="nccl",
        rule_sets=(RuleSet(8, 1, (Rule("all-reduce", 0, None, "native:nvlstree", P),)),),
    )
    with pytest.raises(UserError, match="NCCL disables NVLSTree on a single node"):
        export_nccl_tuner(one_node)


def test_every_rule_set_gets_its_lines_and_predicted_ones_say_so() -> None:
    p = Profile(
        fingerprint="fp",
        host="h",
        backend="nccl",
        rule_sets=(
            RuleSet(8, 2, (Rule("all-reduce", 0, 999, "ring", P), Rule("all-reduce", 1000, None, "two-tree", P))),
            RuleSet(4, 1, (Rule("all-reduce", 0, None, "ring", P),)),
            RuleSet(64, 8, (Rule("all-reduce", 0, None, "two-tree", P),), predicted=True),
        ),
    )
    text = export_nccl_tuner(p)
    rules = parse_nccl_tuner(text)
    assert [(r.nodes, r.ranks, r.algo) for r in rules] == [
        (2, 8, "ring"),
        (2, 8, "tree"),
        (1, 4, "ring"),
        (8, 64, "tree"),
    ]
    for ranks, nodes in ((8, 2), (4, 1), (64, 8)):
        for nbytes in (0, 999, 1000, 1 << 30):
            chosen = nccl_choice(rules, "allreduce", nbytes, nodes, ranks)
            expect = {"two-tree": "tree"}.get(
                p.select("all-reduce", nbytes, world_size=ranks, nodes=nodes).algo, "ring"
            )
            assert chosen is not None and chosen.algo == expect
    assert nccl_choice(rules, "allreduce", 10, 2, 16) is None  # a shape the profile lacks: NCCL's choice
    predicted = text[text.index("# --- 64 ranks on 8 nodes, predicted") :]
    assert "predicted from the fitted models, not measured" in predicted.splitlines()[1]
    # NCCL_ALGO is process-wide: ring at one shape and tree at another cannot be one setting.
    assert parse_nccl_algo(export_nccl_env(p)) == {}
    same = Profile(
        fingerprint="fp",
        host="h",
        backend="nccl",
        rule_sets=(
            RuleSet(8, 2, (Rule("all-reduce", 0, None, "ring", P),)),
            RuleSet(4, 1, (Rule("all-reduce", 0, None, "ring", P),)),
        ),
    )
    assert parse_nccl_algo(export_nccl_env(same)) == {"allreduce": "ring"}


# --- NCCL_ALGO / NCCL_PROTO ----------------------------------------------------------------------


def env_values(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.startswith("export "):
            name, value = line.removeprefix("export ").split("=", 1)
            out[name] = value.strip('"')
    return out


def parse_nccl_algo(text: str) -> dict[str, str]:
    """`export NCCL_ALGO="coll:algo;..."`, read with NCCL's parser; every collective keeps a runnable algorithm."""
    values = env_values(text)
    assert check_env(values.get("NCCL_ALGO"), values.get("NCCL_PROTO")) == []
    if "NCCL_ALGO" not in values:
        return {}
    return dict(part.split(":") for part in values["NCCL_ALGO"].split(";"))


def test_env_sets_ops_with_one_winner_and_says_why_not_for_others() -> None:
    text = unwrapped(export_nccl_env(MIXED))
    assert parse_nccl_algo(text) == {}  # broadcast's tree has no NCCL equivalent: no broadcast:tree
    reasons = [line for line in text.splitlines() if line.startswith("# allreduce")]
    assert len(reasons) == 1 and "changes with size" in reasons[0] and "nccl-plugin" in reasons[0]
    assert "# allgather: the answer changes with size" in text
    assert "# broadcast: tree has no NCCL equivalent for broadcast: NCCL runs broadcast with Ring only" in text


def test_env_single_algorithm_everywhere() -> None:
    p = profile((Rule("all-reduce", 0, None, "two-tree", P), Rule("broadcast", 0, None, "ring", P)))
    assert parse_nccl_algo(export_nccl_env(p)) == {"allreduce": "tree", "broadcast": "ring"}
    assert "needs NCCL 2.24 or later" in export_nccl_env(p)
    only_rd = profile((Rule("all-reduce", 0, None, "recursive-doubling", P),))
    text = export_nccl_env(only_rd)
    assert parse_nccl_algo(text) == {}
    assert "recursive-doubling has no NCCL equivalent" in text
    assert "no NCCL_ALGO or NCCL_PROTO setting expresses this profile" in text


def test_env_carries_protocols_and_keeps_ring_beside_conditional_algorithms() -> None:
    p = profile(
        (
            Rule("all-reduce", 0, 65535, "native:tree/ll128", P),
            Rule("all-reduce", 65536, None, "native:tree/ll128", P),
            Rule("all-gather", 0, None, "native:nvls", P),
            Rule("reduce", 0, None, "native:*/ll", P),
        )
    )
    built = build_nccl_env(p)
    values = env_values(built.text)
    assert values == {"NCCL_ALGO": "allreduce:tree;allgather:nvls,ring", "NCCL_PROTO": "allreduce:ll128;reduce:ll"}
    assert parse_nccl_algo(built.text) == {"allreduce": "tree", "allgather": "nvls,ring"}
    assert any("nvls with ring beside it" in n for n in built.notes)
    mixed_proto = profile(
        (Rule("all-reduce", 0, 99, "native:ring/ll", P), Rule("all-reduce", 100, None, "native:ring", P))
    )
    values = env_values(export_nccl_env(mixed_proto))
    assert values == {"NCCL_ALGO": "allreduce:ring"}


ALGO_CHOICES = [
    "native",
    "ring",
    "tree",
    "two-tree",
    "direct",
    "recursive-doubling",
    "native:ring",
    "native:tree/ll",
    "native:nvls",
    "native:nvlstree",
    "native:collnetchain",
    "native:pat",
    "native:*/ll128",
]


@st.composite
def nccl_profiles(draw: st.DrawFn) -> Profile:
    sets = []
    for ranks, nodes in draw(
        st.lists(st.sampled_from([(8, 2), (4, 1), (4, 4), (16, 2)]), min_size=1, max_size=3, unique=True)
    ):
        rules: list[Rule] = []
        for op in draw(st.lists(st.sampled_from([o.value for o in Op]), min_size=1, max_size=3, unique=True)):
            cuts = sorted(draw(st.sets(st.integers(1, 1 << 30), max_size=3)))
            starts = [0, *cuts]
            # collbench's ring, tree... do none of the point-to-point ops: only native and its variants.
            choices = ALGO_CHOICES if Op.parse(op).spec.nccl_tuned else [a for a in ALGO_CHOICES if "native" in a]
            for i, start in enumerate(starts):
                end = starts[i + 1] - 1 if i + 1 < len(starts) else None
                rules.append(Rule(op, start, end, draw(st.sampled_from(choices)), P))
        try:
            sets.append(RuleSet(ranks, nodes, tuple(rules)))
        except ValueError:  # an algorithm collbench does not run for that op: not a profile
            assume(False)
    return Profile(fingerprint="fp", host="h", backend="nccl", rule_sets=tuple(sets))


@settings(max_examples=60, deadline=None)
@given(nccl_profiles())
def test_any_profile_exports_only_what_nccl_runs_or_is_refused_in_one_line(p: Profile) -> None:
    try:
        tuner = export_nccl_tuner(p)
        env = export_nccl_env(p)
    except UserError as exc:
        assert "NCCL cannot run" in str(exc) and "\n" not in str(exc)
        return
    for r in parse_nccl_tuner(tuner):
        algo = nccl_algorithm(r.algo)
        assert algo is not None
        assert why_not(Op.parse(r.coll), algo, protocol_number(r.proto), nodes=r.nodes, ranks=r.ranks) is None
        assert (r.ranks, r.nodes) in {(s.world_size, s.nodes) for s in p.rule_sets}
    assert all(len(line) < 256 for line in tuner.splitlines())
    parse_nccl_algo(env)  # NCCL's parser accepts it and every collective keeps an algorithm it can run


# --- the ops NCCL runs as grouped point-to-point: no rules, one comment line ----------------------------

POINT_TO_POINT_LINE = (
    "# alltoall, scatter, gather, sendrecv, barrier: no rules: NCCL runs all-to-all, scatter, gather, send/recv "
    "and barrier as grouped point-to-point (ncclSend/ncclRecv): no algorithm or protocol to choose"
)
NO_SCAN_LINE = (
    "# scan, exscan: no rules: NCCL has no scan (nor has torch.distributed); the profile's scan rules run "
    "through collbench.torch.scan"
)


def _with_point_to_point() -> Profile:
    rules = [Rule("all-reduce", 0, None, "ring", P)]
    rules += [Rule(op.value, 0, None, "native", P) for op in Op if not op.spec.nccl_tuned]
    return profile(tuple(rules))


def test_point_to_point_ops_get_no_rules_and_one_comment_line() -> None:
    p = _with_point_to_point()
    for text in (export_nccl_tuner(p), export_nccl_env(p)):
        lines = unwrapped(text).splitlines()
        assert lines.count(POINT_TO_POINT_LINE) == 1
        # Nothing else names them: no rule line, no per-range comment, no NCCL_ALGO entry.
        for name in ("alltoall", "scatter", "gather", "sendrecv", "barrier"):
            assert [line for line in lines if name in line] == [POINT_TO_POINT_LINE]
        # NCCL has no scan at all: its own line, pointing at the Python API that runs the rule.
        assert [line for line in lines if "scan" in line] == [NO_SCAN_LINE]
    assert [r.coll for r in parse_nccl_tuner(export_nccl_tuner(p))] == ["allreduce"]
    algo, _proto, _reasons = nccl_env_values(p)
    assert algo == "allreduce:ring"
    # A profile of the first five alone has no such line.
    assert "point-to-point" not in export_nccl_tuner(profile((Rule("all-reduce", 0, None, "ring", P),)))


def test_an_nccl_profiles_point_to_point_ops_get_no_rules_either() -> None:
    # A tune over NCCL keeps a selection among NCCL's own variants; for these ops it holds native only.
    own = (
        Rule("all-reduce", 0, None, "native:ring/ll", P),
        Rule("all-to-all", 0, None, "native", P),
        Rule("barrier", 0, None, "native", P),
    )
    overall = (
        Rule("all-reduce", 0, None, "native:ring/ll", P),
        Rule("all-to-all", 0, None, "pairwise", P, gain_vs_native=1.3),
        Rule("barrier", 0, None, "native", P),
    )
    p = Profile(fingerprint="fp", host="h", backend="nccl", rule_sets=(RuleSet(8, 2, overall, nccl_rules=own),))
    text = unwrapped(export_nccl_tuner(p))
    assert [r.coll for r in parse_nccl_tuner(text)] == ["allreduce"]
    assert len([line for line in text.splitlines() if "point-to-point" in line]) == 1
    # collbench's own all-to-all won overall: the export points at the Python API that runs it.
    assert "alltoall [0, unbounded] bytes: collbench's pairwise wins overall (1.30x NCCL's own choice)" in text
    assert "collbench.torch.all_to_all_single" in text


def test_a_forced_nccl_algorithm_for_a_point_to_point_op_is_refused_in_one_line() -> None:
    p = profile((Rule("all-to-all", 0, None, "native:ring", P),))
    for export in (export_nccl_tuner, export_nccl_env):
        with pytest.raises(UserError, match="NCCL cannot run: NCCL runs all-to-all as grouped point-to-point") as info:
            export(p)
        assert "\n" not in str(info.value)


# --- channel counts NCCL can hold (collbench.nccl.channels) ---------------------------------------------


def _ring_with(channels: int) -> Profile:
    return profile((Rule("all-reduce", 0, None, "ring", {**P, "channels": channels}),))


@pytest.mark.parametrize("channels", [65, 128, 256, 10**6])
def test_a_channel_count_no_nccl_holds_is_refused_by_the_exporters(channels: int) -> None:
    """NCCL keeps the count in 8 signed bits (256 would become 0) and has at most 64 channels."""
    for build in (build_nccl_tuner, build_nccl_env):
        with pytest.raises(UserError, match=f"asks for {channels} channels; NCCL holds 1 to 64"):
            build(_ring_with(channels))


def test_a_channel_count_only_newer_nccl_holds_is_written_with_a_note() -> None:
    built = build_nccl_tuner(_ring_with(48))
    assert "allreduce,0,-1,ring,simple,48,2,8" in built.text.splitlines()
    assert "channels 48 applies from NCCL 2.25" in built.text
    assert any("channels 48 applies from NCCL 2.25" in note for note in built.notes)
    plain = build_nccl_tuner(_ring_with(32))
    assert "allreduce,0,-1,ring,simple,32,2,8" in plain.text.splitlines() and "applies from" not in plain.text
    assert "allreduce,0,-1,ring,simple,64,2,8" in build_nccl_tuner(_ring_with(64)).text.splitlines()


@pytest.mark.parametrize("channels", [65, 256])
def test_the_profile_schema_bounds_channels(tmp_path: Path, channels: int) -> None:
    schema = json.loads(SCHEMA_PATH.read_text())
    rule = schema["$defs"]["rule"]  # rules and nccl_rules both hold rules of this form
    assert rule["properties"]["params"]["properties"]["channels"]["maximum"] == MAX_CHANNELS
    path = _ring_with(64).save(tmp_path / "p.yaml")
    assert Profile.load(path).rule_sets[0].rules[0].params["channels"] == 64
    path.write_text(path.read_text().replace("channels: 64", f"channels: {channels}"))
    with pytest.raises(InputFileError, match="channels"):
        Profile.load(path)


# --- the two selections: NCCL's exports follow the one among NCCL's own variants -----------------------

NCCL_SELECTION = (
    Rule("all-reduce", 0, 8191, "native:ring/ll@4ch", P, 1024, None, 10.0, 1.6),
    Rule("all-reduce", 8192, 262143, "native", P, 65536, None, 30.0, 1.0),
    Rule("all-reduce", 262144, None, "native:ring/simple@32ch", P, 1 << 20, None, 90.0, 1.3),
)
OVERALL = (
    Rule("all-reduce", 0, 2047, "native:ring/ll@4ch", P, 1024, None, 10.0, 1.6),
    Rule("all-reduce", 2048, 32767, "recursive-doubling", P, 8192, None, 14.0, 1.4),
    Rule("all-reduce", 32768, 262143, "native", P, 65536, None, 30.0, 1.0),
    Rule("all-reduce", 262144, None, "native:ring/simple@32ch", P, 1 << 20, None, 90.0, 1.3),
)
TWO_SELECTIONS = Profile(
    fingerprint="fp", host="h", backend="nccl", rule_sets=(RuleSet(8, 1, OVERALL, nccl_rules=NCCL_SELECTION),)
)


def test_nccl_tuner_follows_the_selection_among_nccl_variants() -> None:
    built = build_nccl_tuner(TWO_SELECTIONS)
    rules = parse_nccl_tuner(built.text)
    assert [(r.min_bytes, r.max_bytes, r.algo, r.proto, r.channels) for r in rules] == [
        (0, 8191, "ring", "ll", 4),
        (262144, SIZE_MAX, "ring", "simple", 32),
    ]
    # collbench's own recursive doubling won overall between 2048 and 32767 bytes: a comment (and a
    # note) says so and points at the Python API, and no line names it.
    text = unwrapped(built.text)
    assert "allreduce [2048, 32767] bytes: collbench's recursive-doubling wins overall (1.40x NCCL's own" in text
    assert "Python API" in text
    assert any("recursive-doubling wins overall" in n for n in built.notes)
    assert "chosen among NCCL's own variants" in text
    assert "32 channels: measured on a communicator of 32 channels" in text


def test_nccl_env_follows_the_selection_among_nccl_variants() -> None:
    algo, proto, reasons = nccl_env_values(TWO_SELECTIONS)
    assert algo is None and proto is None  # native in the middle: no one algorithm at every size
    assert any("channel count won" in r for r in reasons)
    one = Profile(
        fingerprint="fp",
        host="h",
        backend="nccl",
        rule_sets=(RuleSet(8, 1, OVERALL, nccl_rules=(Rule("all-reduce", 0, None, "native:tree/ll128", P),)),),
    )
    assert nccl_env_values(one)[:2] == ("allreduce:tree", "allreduce:ll128")
    text = build_nccl_env(one).text
    assert "collbench's recursive-doubling wins overall" in text and "Python API" in text


def test_old_nccl_profile_maps_its_one_selection_and_says_so() -> None:
    built = build_nccl_tuner(MIXED)
    assert "no selection among NCCL's own variants" in " ".join(built.text.split())
    assert [r.algo for r in parse_nccl_tuner(built.text)] == ["tree", "ring", "ring"]


@pytest.mark.parametrize("build", [build_nccl_tuner, build_nccl_env])
def test_profile_of_another_backend_is_refused_unless_asked(build) -> None:  # type: ignore[no-untyped-def]
    gloo = profile(MIXED.rules, backend="gloo")
    with pytest.raises(UserError) as info:
        build(gloo)
    message = str(info.value)
    assert "\n" not in message and "measured over gloo, not NCCL" in message
    assert "collbench tune --backend nccl" in message and "--from-other-backend" in message
    assert "measured with gloo, not NCCL" in build(gloo, from_other_backend=True).text


def test_shape_without_nccl_selection_keeps_nccl_choice_when_others_have_one() -> None:
    # A shape predicted from the fits measured none of NCCL's variants: its collbench ring is not
    # mapped onto NCCL's ring (what the NCCL selection replaces); NCCL keeps its own choice there.
    predicted = RuleSet(16, 2, (Rule("all-reduce", 0, None, "ring", P),), predicted=True)
    both = Profile(
        fingerprint="fp",
        host="h",
        backend="nccl",
        rule_sets=(RuleSet(8, 1, OVERALL, nccl_rules=NCCL_SELECTION), predicted),
    )
    built = build_nccl_tuner(both)
    assert [(r.ranks, r.algo) for r in parse_nccl_tuner(built.text)] == [(8, "ring"), (8, "ring")]
    assert "no selection among NCCL's own variants at this shape (predicted from the fitted models)" in unwrapped(
        built.text
    )
    algo, _proto, _reasons = nccl_env_values(both)
    assert algo is None
