"""The profile: YAML round trip, schema (checked with the jsonschema library), atomic save, select, shapes."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import jsonschema
import pytest
import yaml

import collbench
from collbench.errors import InputFileError, UnknownNameError, UserError
from collbench.models.fitted import Fit
from collbench.profile.document import Profile, ProfileLayout, RuleSet, nccl_selection_view, schema_problem
from collbench.profile.rules import Rule

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "profiles" / "schema.json").read_text())


def validate(data: object) -> list[str]:
    """Every violation of the published schema, checked by the jsonschema library itself."""
    validator = jsonschema.Draft202012Validator(SCHEMA)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(data)]


def make_profile(**overrides: object) -> Profile:
    rules = (
        Rule(
            "all-reduce",
            0,
            32767,
            "recursive-doubling",
            {"segment_bytes": None, "layout": "rank-order"},
            4096,
            30.5,
            31.0,
            1.8,
        ),
        Rule(
            "all-reduce",
            32768,
            1048575,
            "native",
            {"segment_bytes": None, "layout": "rank-order"},
            131072,
            300.0,
            310.0,
            1.0,
        ),
        Rule(
            "all-reduce",
            1048576,
            None,
            "ring",
            {"segment_bytes": 262144, "layout": "topology", "channels": 2},
            4194304,
            5000.0,
            4900.0,
            1.3,
        ),
        Rule("broadcast", 0, None, "tree", {"segment_bytes": None, "layout": "rank-order"}, 65536, None, 80.0, 1.1),
    )
    fields: dict[str, object] = dict(
        fingerprint="abc123",
        host="box",
        backend="gloo",
        rule_sets=(RuleSet(4, 1, rules, layout=ProfileLayout("topology", rings=((0, 1, 2, 3), (0, 2, 1, 3)))),),
        fits=(
            Fit.from_dict(
                {
                    "op": "all-reduce",
                    "algo": "ring",
                    "backend": "gloo",
                    "world_size": 4,
                    "alpha_us": 12.0,
                    "beta_gbps": 3.2,
                    "gamma_gbps": None,
                    "r2": 0.99,
                    "median_abs_pct_error": 2.0,
                    "max_abs_pct_error": 9.0,
                    "min_bytes": 1024,
                    "max_bytes": 4194304,
                    "segments": None,
                }
            ),
        ),
        versions={"torch": "2.13.0", "collbench": "0.1.0"},
        command="collbench tune --ranks 4 --quick",
        created="2026-11-22T11:00:00Z",
        selection={"min_gain": 0.03, "max_threshold": 0.25},
    )
    fields.update(overrides)
    return Profile(**fields)  # type: ignore[arg-type]


def test_round_trip_is_identical_and_validates(tmp_path: Path) -> None:
    profile = make_profile()
    path = profile.save(tmp_path / "p.yaml")
    loaded = Profile.load(path)
    assert loaded == profile
    assert path.stat().st_mode & 0o777 == 0o644  # shareable, not the temporary file's 0600
    data = yaml.safe_load(path.read_text())
    assert validate(data) == []
    assert path.read_text().startswith("# collbench tuning profile")
    assert "# made by: collbench tune --ranks 4 --quick" in path.read_text()


def test_schema_rejects_what_it_should() -> None:
    data = make_profile().to_dict()
    rule0 = data["rule_sets"][0]["rules"][0]

    def with_rule(rule: dict[str, object]) -> dict[str, object]:
        return {**data, "rule_sets": [{**data["rule_sets"][0], "rules": [rule]}]}

    assert validate(data) == []
    assert any("minimum" in e for e in validate(with_rule({**rule0, "min_bytes": -1})))
    missing = {k: v for k, v in data.items() if k != "backend"}
    assert any("'backend' is a required property" in e for e in validate(missing))
    assert any("'algorithm' was unexpected" in e for e in validate(with_rule({**rule0, "algorithm": "ring"})))
    assert any("'predicted'" in e for e in validate({**data, "rule_sets": [{**data["rule_sets"][0], "predicted": 1}]}))
    fit0 = data["fits"][0]
    assert validate({**data, "fits": [{**fit0, "usable": False, "unusable_because": "misses 512 B by 28%"}]}) == []
    assert any("not of type 'boolean'" in e for e in validate({**data, "fits": [{**fit0, "usable": "no"}]}))


def test_every_example_profile_validates_and_loads() -> None:
    examples = sorted((REPO / "profiles").glob("*.yaml"))
    assert examples, "profiles/ must hold an example profile measured on a real machine"
    for path in examples:
        assert validate(yaml.safe_load(path.read_text())) == [], path
        profile = Profile.load(path)
        assert profile.command.startswith("collbench tune"), path
        assert profile.rules_for("all-reduce")


def test_select_finds_the_covering_rule() -> None:
    p = make_profile()
    assert p.select("all-reduce", 0).algo == "recursive-doubling"
    assert p.select("allreduce", 32767).algo == "recursive-doubling"
    assert p.select("all_reduce", 32768).algo == "native"
    assert p.select("all-reduce", 1 << 40).algo == "ring"
    assert p.select("broadcast", 5).algo == "tree"
    with pytest.raises(UserError, match="no rules for all-gather"):
        p.select("all-gather", 5)
    with pytest.raises(UnknownNameError):
        p.select("gossip", 5)
    with pytest.raises(ValueError):
        p.select("all-reduce", -1)
    for bad in (math.nan, math.inf, 1.5, "64"):
        with pytest.raises(ValueError, match="whole number of bytes"):
            p.select("all-reduce", bad)  # type: ignore[arg-type]
    assert p.select("all-reduce", 32768.0).algo == "native"


def test_profile_with_a_gap_cannot_be_built() -> None:
    with pytest.raises(ValueError, match="starts at"):
        RuleSet(4, 1, (Rule("all-reduce", 0, 10, "ring"), Rule("all-reduce", 20, None, "tree")))
    with pytest.raises(ValueError, match="starts at"):  # an overlap is the same error as a gap
        RuleSet(4, 1, (Rule("all-reduce", 0, 10, "ring"), Rule("all-reduce", 5, None, "tree")))


def test_save_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "p.yaml"
    make_profile().save(path)
    before = path.read_bytes()

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    # A write that fails is the user's one-line error naming the file, never an OSError's traceback.
    with pytest.raises(InputFileError, match=r"p\.yaml.*disk full"):
        make_profile(host="other").save(path)
    assert path.read_bytes() == before  # the old profile is whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]  # no temporary left behind


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="no such profile"):
        Profile.load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 99\n")
    with pytest.raises(InputFileError, match="schema_version 99"):
        Profile.load(bad)
    bad.write_text("[1, 2]\n")
    with pytest.raises(InputFileError, match="mapping"):
        Profile.load(bad)
    data = make_profile().to_dict()
    data["rule_sets"][0]["rules"][0]["min_bytes"] = "lots"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(InputFileError, match=str(bad)):
        Profile.load(bad)


def test_lazy_reexport() -> None:
    assert collbench.Profile is Profile
    with pytest.raises(AttributeError):
        collbench.NoSuchThing  # noqa: B018


def two_shapes() -> Profile:
    base = make_profile()
    eight = RuleSet(
        8,
        2,
        (Rule("all-reduce", 0, 4095, "direct"), Rule("all-reduce", 4096, None, "rabenseifner")),
    )
    sixteen = RuleSet(16, 2, (Rule("all-reduce", 0, None, "ring"),), predicted=True)
    return make_profile(rule_sets=(*base.rule_sets, eight, sixteen))


def test_select_by_shape_and_the_default_shape() -> None:
    p = two_shapes()
    assert (p.world_size, p.nodes, p.layout) == (4, 1, p.rule_sets[0].layout)  # the first measured shape
    assert p.rules == p.rule_sets[0].rules
    assert p.select("all-reduce", 100).algo == "recursive-doubling"
    assert p.select("all-reduce", 100, world_size=4, nodes=1).algo == "recursive-doubling"
    assert p.select("all-reduce", 100, world_size=8).algo == "direct"
    assert p.select("all-reduce", 4096, world_size=8, nodes=2).algo == "rabenseifner"
    assert p.select("all-reduce", 4096, world_size=16).algo == "ring"
    assert p.rule_set(16).predicted
    with pytest.raises(
        UserError, match=r"no rules for 8 ranks on 1 node; it has: 4 ranks on 1 node, 8 ranks on 2 nodes"
    ):
        p.select("all-reduce", 1, world_size=8, nodes=1)
    with pytest.raises(UserError, match="16 ranks on 2 nodes \\(predicted\\)"):
        p.select("all-reduce", 1, world_size=32)
    # A group of one rank (the API on a new_group([0])) was told to add it predicted: `profile predict
    # --ranks 1:1`, which profile predict refuses (a predicted shape needs at least 2 ranks).
    with pytest.raises(UserError) as one:
        p.select("all-reduce", 1, world_size=1, nodes=1)
    assert str(one.value).endswith(
        "(a collective of one rank moves no data: a profile holds shapes of 2 ranks or more)"
    ) and "profile predict" not in str(one.value)


def test_default_shape_is_the_first_measured_one() -> None:
    predicted = RuleSet(2, 1, (Rule("all-reduce", 0, None, "ring"),), predicted=True)
    p = make_profile(rule_sets=(predicted, *make_profile().rule_sets))
    assert p.world_size == 4 and p.select("all-reduce", 0).algo == "recursive-doubling"
    with pytest.raises(ValueError, match="at least one measured"):
        make_profile(rule_sets=(predicted,))
    with pytest.raises(ValueError, match="repeated: 4 ranks on 1 node"):
        make_profile(rule_sets=make_profile().rule_sets * 2)


def test_several_shapes_round_trip_and_validate(tmp_path: Path) -> None:
    p = two_shapes()
    path = p.save(tmp_path / "p.yaml")
    assert Profile.load(path) == p
    data = yaml.safe_load(path.read_text())
    assert data["schema_version"] == 2 and validate(data) == []
    assert [(s["world_size"], s["nodes"], s["predicted"]) for s in data["rule_sets"]] == [
        (4, 1, False),
        (8, 2, False),
        (16, 2, True),
    ]


def test_version_1_files_still_load_as_one_rule_set(tmp_path: Path) -> None:
    p = make_profile()
    v2 = p.to_dict()
    rule_set = v2.pop("rule_sets")[0]
    v1 = {**v2, "schema_version": 1, **{k: rule_set[k] for k in ("world_size", "nodes", "layout", "rules")}}
    path = tmp_path / "v1.yaml"
    path.write_text(yaml.safe_dump(v1))
    loaded = Profile.load(path)
    assert loaded.rule_sets == p.rule_sets and loaded.schema_version == 2
    del v1["nodes"]
    path.write_text(yaml.safe_dump(v1))
    with pytest.raises(InputFileError, match="'nodes' is a required property"):
        Profile.load(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r[0].update(algo="warp-drive"), "unknown algorithm 'warp-drive'; known: .*ring"),
        (lambda r: r[0].update(algo="native:telepathy"), "unknown NCCL algorithm .telepathy."),
        (lambda r: r[1].update(min_bytes=100), "all-reduce: rule 1 starts at 100 bytes, expected 32768"),
        (lambda r: r[0].update(op="gossip"), r"rule_sets\[0\]\.rules\[0\]\.op: 'gossip' is not one of"),
        (lambda r: r[3].update(algo="rabenseifner"), "names rabenseifner, which does not do broadcast"),
    ],
)
def test_bad_rules_fail_at_load_in_one_line(tmp_path: Path, change: object, message: str) -> None:
    data = make_profile().to_dict()
    change(data["rule_sets"][0]["rules"])  # type: ignore[operator]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputFileError, match=message) as info:
        Profile.load(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_schema_problem_names_the_element() -> None:
    data = make_profile().to_dict()
    data["rule_sets"][0]["world_size"] = 0
    assert schema_problem(data) == "$.rule_sets[0].world_size: 0 is less than the minimum of 1"
    assert schema_problem(make_profile().to_dict()) is None


NP = {"segment_bytes": None, "layout": "rank-order"}
NCCL_SELECTION = (
    Rule("all-reduce", 0, 65535, "native:ring/ll@4ch", NP, 1024, None, 10.0, 1.5),
    Rule("all-reduce", 65536, None, "native", NP, 1 << 20, None, 90.0, 1.0),
    Rule("broadcast", 0, None, "native:ring/simple@32ch", NP, 65536, None, 70.0, 1.2),
)


def nccl_profile(nccl_rules: tuple[Rule, ...] | None = NCCL_SELECTION) -> Profile:
    base = make_profile()
    return make_profile(
        backend="nccl", rule_sets=(RuleSet(4, 1, base.rules, layout=base.layout, nccl_rules=nccl_rules),)
    )


def test_both_selections_round_trip_and_validate(tmp_path: Path) -> None:
    profile = nccl_profile()
    path = profile.save(tmp_path / "p.yaml")
    data = yaml.safe_load(path.read_text())
    assert validate(data) == []
    assert [r["algo"] for r in data["rule_sets"][0]["nccl_rules"]] == [r.algo for r in NCCL_SELECTION]
    loaded = Profile.load(path)
    assert loaded == profile
    assert loaded.default_set.nccl_rules == NCCL_SELECTION
    # The Python API reads the selection among everything.
    assert loaded.select("all-reduce", 1024).algo == "recursive-doubling"


def test_a_profile_without_the_nccl_selection_still_loads(tmp_path: Path) -> None:
    # Made before collbench kept it, or over gloo: the key is absent, and the profile has one selection.
    path = nccl_profile(None).save(tmp_path / "old.yaml")
    assert "nccl_rules" not in path.read_text()
    assert Profile.load(path).default_set.nccl_rules is None
    for example in sorted((REPO / "profiles").glob("*.yaml")):
        assert all(s.nccl_rules is None for s in Profile.load(example).rule_sets)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: {**r, "algo": "ring"}, "not one of NCCL's own variants"),
        (lambda r: {**r, "max_bytes": 1000}, "starts at 65536 bytes, expected 1001"),
        (lambda r: {**r, "algo": "native:ring/simple@99ch"}, "channel count is 1 to 64"),
    ],
)
def test_bad_nccl_selection_fails_at_load_in_one_line(tmp_path: Path, change: object, message: str) -> None:
    data = nccl_profile().to_dict()
    rules = data["rule_sets"][0]["nccl_rules"]
    rules[0] = change(rules[0])  # type: ignore[operator]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(InputFileError) as info:
        Profile.load(path)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert "nccl_rules" in str(info.value) or "native:ring/simple@99ch" in str(info.value)


def test_schema_rejects_an_empty_nccl_selection() -> None:
    data = nccl_profile().to_dict()
    data["rule_sets"][0]["nccl_rules"] = []
    assert any("nccl_rules" in e for e in validate(data))


def test_nccl_selection_view_shows_it_as_rules() -> None:
    view = nccl_selection_view(nccl_profile())
    assert view is not None and view.rules == NCCL_SELECTION and view.default_set.nccl_rules is None
    assert nccl_selection_view(nccl_profile(None)) is None


def test_a_rules_op_is_typed_at_load_and_written_back_as_its_name() -> None:
    from collbench.schedules.ops import Op

    rule = Rule.from_dict({"op": "all-reduce", "min_bytes": 0, "max_bytes": None, "algo": "ring"})
    assert rule.op is Op.ALL_REDUCE
    assert Rule("reduce-scatter", 0, None, "ring").op is Op.REDUCE_SCATTER
    written = rule.to_dict()["op"]
    assert type(written) is str and written == "all-reduce"
    # The YAML carries the plain name, no Python tag a strict reader would refuse.
    assert yaml.safe_dump({"op": written}) == "op: all-reduce\n"
    with pytest.raises(ValueError, match="bogus"):
        Rule("bogus", 0, None, "ring")


def test_a_rules_algorithm_is_typed_at_load_and_written_back_as_its_text(tmp_path: Path) -> None:
    from collbench.profile.rules import AlgoRef

    for text, name, variant in [
        ("ring", "ring", ""),
        ("native", "native", ""),
        ("native:segmented_ring", "native", "segmented_ring"),  # Open MPI's, forced
        ("native:ring/ll128@4ch", "native", "ring/ll128@4ch"),  # NCCL's
        ("native@16ch", "native", "@16ch"),
    ]:
        rule = Rule.from_dict({"op": "all-reduce", "min_bytes": 0, "max_bytes": None, "algo": text})
        assert isinstance(rule.algo, AlgoRef) and (rule.algo.name, rule.algo.variant) == (name, variant)
        assert rule.algo.native == (name == "native") and rule.algo.forced == bool(variant)
        assert rule.algo.own_choice == (text == "native")
        assert rule.algo == text and Rule("all-reduce", 0, None, text).algo.variant == variant
        written = rule.to_dict()["algo"]
        assert type(written) is str and written == text
    # The text as written, whatever its case: the parts are read from it, the text stays.
    odd = Rule("all-reduce", 0, None, "Native:Ring").algo
    assert (odd, odd.name, odd.variant) == ("Native:Ring", "native", "ring")
    with pytest.raises(AttributeError, match="frozen"):
        odd.name = "x"  # type: ignore[misc]
    # Byte for byte: a saved profile, loaded (every algorithm typed) and saved again, is the same file.
    saved, again = tmp_path / "saved.yaml", tmp_path / "again.yaml"
    Profile.load(REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml").save(saved)
    loaded = Profile.load(saved)
    assert all(type(r.algo) is AlgoRef for s in loaded.rule_sets for r in s.rules)
    loaded.save(again)
    assert again.read_bytes() == saved.read_bytes()
