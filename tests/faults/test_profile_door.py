"""A profile from someone else is checked whole when it is loaded, before anything is made of it.

The attacker's profiles (a tree with a cycle, two roots or none, a rank its own parent; NaN fits and
times; bounds of 2^63; a billion segments; five thousand rings; a key given twice; a 100,000-digit
integer) were exported with exit 0, or hung every rank of a job using them. Each is now one error
line naming the file, the field and the bound; exit 2, and no output written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import ConfigError, InputFileError
from collbench.profile.bounds import tree_problem
from collbench.profile.document import Profile
from collbench.schedules.ops import Op

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml"


def _layout(d: dict[str, Any]) -> dict[str, Any]:
    return d["rule_sets"][0]["layout"]


def _rule(d: dict[str, Any]) -> dict[str, Any]:
    return d["rule_sets"][0]["rules"][0]


MUTATIONS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "tree cycle": (lambda d: _layout(d).update(trees=[[1, 0]]), "trees[0]: has 0 roots"),
    "two roots": (lambda d: _layout(d).update(trees=[[-1, -1]]), "trees[0]: has 2 roots"),
    "own parent": (lambda d: _layout(d).update(trees=[[-1, 1]]), "rank 1 is its own ancestor"),
    "NaN fit": (lambda d: d["fits"][0].update(alpha_us=float("nan")), "$.fits[0].alpha_us: nan is not a finite"),
    "inf time": (lambda d: _rule(d).update(measured_us=float("inf")), "measured_us: inf is not a finite"),
    "2^63 bound": (lambda d: _rule(d).update(max_bytes=2**63), "9,223,372,036,854,775,808 bytes is not below 2^50"),
    "1e9 segments": (lambda d: _rule(d)["params"].update(segments=10**9), "segments is more than 64"),
    "1e30 segments": (lambda d: _rule(d)["params"].update(segments=10**30), "an integer of 31 digits"),
    "5000 rings": (lambda d: _layout(d).update(rings=[[0, 1]] * 5000), "layout.rings: 5000 rings, more than 32"),
    "2^20 ranks": (lambda d: d["rule_sets"][0].update(world_size=1 << 20), "1048576 ranks, not below 2^20"),
    "escape in layout name": (lambda d: _layout(d).update(name="t\x1b[2J"), "layout.name: 't\\\\x1b[2J' is not a name"),
}  # fmt: skip


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_an_impossible_profile_is_one_error_line_naming_the_field_and_nothing_is_written(
    tmp_path: Path, name: str
) -> None:
    mutate, expected = MUTATIONS[name]
    data = yaml.safe_load(PROFILE.read_text())
    mutate(data)
    path = _write(tmp_path, data)
    out = tmp_path / "tuner.conf"
    result = CliRunner().invoke(app, ["export", "nccl-tuner", str(path), "--from-other-backend", "-O", str(out)])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and result.output.startswith(f"error: {path}"), result.output
    assert expected in result.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda t: t.replace("host: vm\n", "host: vm\nhost: other\n"), ":8: key 'host' is given twice"),
        (lambda t: t.replace("schema_version: 2", "schema_version: " + "9" * 100_000), ":3: an integer of 100,000"),
    ],
)  # fmt: skip
def test_duplicate_keys_and_huge_integers_are_refused_before_they_are_built(
    tmp_path: Path, edit: Callable[[str], str], expected: str
) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(edit(PROFILE.read_text()))
    with pytest.raises(InputFileError) as err:
        Profile.load(path)
    assert expected in str(err.value)


def test_a_profile_past_the_size_cap_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(PROFILE.read_text() + "#" * (9 << 20) + "\n")
    with pytest.raises(InputFileError, match="larger than 8 MiB"):
        Profile.load(path)


def test_the_real_profile_and_its_trees_pass_the_door() -> None:
    profile = Profile.load(PROFILE)
    assert profile.layout is not None and profile.layout.trees == ((-1, 0), (1, -1))


@pytest.mark.parametrize("n", [1, 2, 7, 64, 1000])
def test_a_chain_and_a_star_are_trees_and_a_ring_of_parents_is_not(n: int) -> None:
    assert tree_problem([-1, *range(n - 1)], n) is None
    assert tree_problem([-1] + [0] * (n - 1), n) is None
    if n > 1:
        assert "ancestor" in str(tree_problem([-1, *[(r % (n - 1)) + 1 for r in range(1, n)]], n))


def test_the_python_api_refuses_a_segment_smaller_than_an_element_before_it_communicates() -> None:
    # collbench.torch reads what it builds (pure, no communication) before ScheduleRunner sends anything;
    # every rank holds the same profile, size and dtype, so every rank raises this same error.
    from collbench.torch.rules import plan_key

    data = yaml.safe_load(PROFILE.read_text())
    profile = Profile.from_dict(data)
    rule_set = profile.default_set
    rule = dataclasses.replace(rule_set.rules[0], algo="ring", params={"segment_bytes": 1, "layout": "rank-order"})
    with pytest.raises(ConfigError, match="segments of 1 bytes, less than one 4-byte element"):
        plan_key(rule_set, rule, 2, 1024, 4, Op.ALL_REDUCE, 0, 0, "cpu")
    rule = dataclasses.replace(rule, params={"segments": 10**9})
    with pytest.raises(ConfigError, match="1000000000 segments; a schedule takes 1 to 64"):
        plan_key(rule_set, rule, 2, 1024, 4, Op.ALL_REDUCE, 0, 0, "cpu")
