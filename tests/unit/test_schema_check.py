"""collbench's own profile schema check names the same first violation as the jsonschema library.

Profiles that are valid (the repository's own) are mutated at random paths (keys removed, unknown keys
added, values replaced by other JSON values: wrong types, out of range numbers, booleans for integers,
empty lists) and both checks must agree: the same set of violations (path and message), the same one
chosen as best, and ``schema_problem``'s line the same with or without the library installed.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collbench.profile import document
from collbench.profile.document import upgrade_v1
from collbench.profile.schema_check import CHECKED, SchemaChecker, where

REPO = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((REPO / "collbench" / "profile" / "schema.json").read_text(encoding="utf-8"))
VALID = [
    yaml.safe_load((REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml").read_text(encoding="utf-8")),
    yaml.safe_load((REPO / "tests" / "fixtures" / "profiles" / "cpu-2core-gloo-4ranks.yaml").read_text("utf-8")),
]
VALID = [v if v.get("schema_version") == 2 else upgrade_v1(v) for v in VALID]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=70000),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(["", "ring", "native", "gloo", "nccl", "x" * 300, "all-reduce"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


def _library(data: Any) -> tuple[list[tuple[str, str]], tuple[str, str] | None]:
    validator = jsonschema.Draft202012Validator(SCHEMA)
    errors = sorted((where(tuple(e.absolute_path)), e.message) for e in validator.iter_errors(data))
    best = jsonschema.exceptions.best_match(validator.iter_errors(data))
    return errors, None if best is None else (where(tuple(best.absolute_path)), best.message)


def _ours(data: Any) -> tuple[list[tuple[str, str]], tuple[str, str] | None]:
    checker = SchemaChecker(SCHEMA)
    errors = sorted((where(e.path), e.message) for e in checker.iter_errors(data))
    best = checker.best(data)
    return errors, None if best is None else (where(best.path), best.message)


def _containers(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path] if isinstance(node, dict | list) else []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        found += _containers(child, (*path, key))
    return found


def _at(node: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        node = node[key]
    return node


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    data = copy.deepcopy(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        containers = _containers(data)
        target = _at(data, draw(st.sampled_from(containers)))
        action = draw(st.sampled_from(["replace", "remove", "add", "empty"]))
        if isinstance(target, dict):
            keys = list(target)
            if action == "add" or not keys:
                target[draw(st.sampled_from(["zz", "extra", "rules", "world_size", "a"]))] = draw(values)
            elif action == "remove":
                del target[draw(st.sampled_from(keys))]
            else:
                target[draw(st.sampled_from(keys))] = draw(values) if action == "replace" else []
        elif target:
            index = draw(st.integers(min_value=0, max_value=len(target) - 1))
            if action == "remove":
                del target[index]
            else:
                target[index] = draw(values)
    return data


def test_the_repositorys_profiles_are_valid_for_both() -> None:
    for data in VALID:
        assert _library(data) == ([], None) == _ours(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_both_checks_find_the_same_violations_and_pick_the_same(data: Any) -> None:
    assert _ours(data) == _library(data)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: d["rule_sets"][0].update(world_size=0),
            "$.rule_sets[0].world_size: 0 is less than the minimum of 1",
        ),
        (
            lambda d: d["rule_sets"][0].update(world_size=True),
            "$.rule_sets[0].world_size: True is not of type 'integer'",
        ),
        (lambda d: d.pop("host"), "$: 'host' is a required property"),
        (lambda d: d.update(zz=1, aa=2), "$: Additional properties are not allowed ('aa', 'zz' were unexpected)"),
        (lambda d: d.update(backend="ucc"), "$.backend: 'ucc' is not one of ['gloo', 'nccl', 'mpi', 'mpich']"),
        (lambda d: d.update(rule_sets=[]), "$.rule_sets: [] should be non-empty"),
    ],
)
def test_schema_problem_is_the_same_line_without_the_library(
    change: Any, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = copy.deepcopy(VALID[0])
    change(data)
    document._validator.cache_clear()
    with_library = document.schema_problem(data)
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # import jsonschema raises ImportError
    document._validator.cache_clear()
    try:
        without = document.schema_problem(data)
        assert isinstance(document._validator(), SchemaChecker)
    finally:
        document._validator.cache_clear()
    assert with_library == without == expected


def test_a_keyword_the_own_check_lacks_is_refused_not_ignored() -> None:
    assert {"pattern", "oneOf"}.isdisjoint(CHECKED)
    with pytest.raises(NotImplementedError, match="'pattern'"):
        SchemaChecker({"properties": {"host": {"type": "string", "pattern": "^a"}}})
