"""The profile: YAML round trip, schema, atomic save, select."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

import collbench
from collbench.errors import InputFileError, UnknownNameError, UserError
from collbench.tuning.jsonschema_lite import validate
from collbench.tuning.profile import Profile, ProfileLayout
from collbench.tuning.selection import Rule

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "profiles" / "schema.json").read_text())


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
        world_size=4,
        nodes=1,
        rules=rules,
        fits=(
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
            },
        ),
        versions={"torch": "2.13.0", "collbench": "0.1.0"},
        command="collbench tune --ranks 4 --quick",
        created="2026-11-22T11:00:00Z",
        selection={"min_gain": 0.03, "max_threshold": 0.25},
        layout=ProfileLayout("topology", rings=((0, 1, 2, 3), (0, 2, 1, 3))),
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
    assert validate(data, SCHEMA) == []
    assert path.read_text().startswith("# collbench tuning profile")
    assert "# made by: collbench tune --ranks 4 --quick" in path.read_text()


def test_schema_rejects_what_it_should() -> None:
    data = make_profile().to_dict()
    bad = {**data, "rules": [{**data["rules"][0], "min_bytes": -1}]}
    assert any("minimum" in e for e in validate(bad, SCHEMA))
    missing = {k: v for k, v in data.items() if k != "backend"}
    assert any("backend" in e for e in validate(missing, SCHEMA))
    extra = {**data, "rules": [{**data["rules"][0], "algorithm": "ring"}]}
    assert any("unexpected property 'algorithm'" in e for e in validate(extra, SCHEMA))


def test_every_example_profile_validates_and_loads() -> None:
    examples = sorted((REPO / "profiles").glob("*.yaml"))
    assert examples, "profiles/ must hold an example profile measured on a real machine"
    for path in examples:
        assert validate(yaml.safe_load(path.read_text()), SCHEMA) == [], path
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


def test_profile_with_a_gap_cannot_be_built() -> None:
    with pytest.raises(ValueError, match="starts at"):
        make_profile(rules=(Rule("all-reduce", 0, 10, "ring"), Rule("all-reduce", 20, None, "tree")))


def test_save_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "p.yaml"
    make_profile().save(path)
    before = path.read_bytes()

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
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
    data["rules"][0]["min_bytes"] = "lots"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(InputFileError, match=str(bad)):
        Profile.load(bad)


def test_lazy_reexport() -> None:
    assert collbench.Profile is Profile
    with pytest.raises(AttributeError):
        collbench.NoSuchThing  # noqa: B018
