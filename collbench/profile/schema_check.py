"""The profile schema checked without the ``jsonschema`` library, with that library's messages.

A GPU machine lent bare (a Python with torch and a fixed set of packages, no package index) has no
``jsonschema``; collbench runs from a checkout there. ``document.schema_problem`` uses the library
where it is installed and this module otherwise. Both must name the same first violation in the
same words, so this follows jsonschema 4.x (``jsonschema/_keywords.py``, ``_types.py``, ``_utils.py``
and ``exceptions.py``) for the keywords the schema uses and no others:

* keywords are checked in the order the schema lists them; ``properties`` and ``items`` descend in
  the instance's path; ``$ref`` (local ``#/...`` pointers only) descends without adding to it;
* the messages are the library's (``'x' is a required property``, ``1 is less than the minimum of
  2``, ``[] should be non-empty``, ``Additional properties are not allowed ('a' was unexpected)``...);
* types as draft 2020-12 has them: ``integer`` includes floats with no fraction, booleans are
  neither integers nor numbers, ``enum`` tells ``True`` from ``1``;
* the best error is the library's ``best_match`` with its default relevance: the shallowest path,
  then the greatest path among those, then an error whose schema's ``type`` the instance does not
  match, then the first found.

A schema keyword this module does not check raises ``NotImplementedError`` when the checker is built,
so a schema edit cannot be checked less strictly here than with the library without a test failing.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "title", "description", "default", "examples", "$comment"})
"""Keywords that check nothing."""
CHECKED = frozenset(
    {
        "type",
        "enum",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "minItems",
        "minimum",
        "maximum",
        "$ref",
    }
)
"""The keywords this module checks, as jsonschema does."""

PathPart = str | int


@dataclass(frozen=True, slots=True)
class SchemaError:
    """One violation: where in the instance, the library's message, and what relevance needs."""

    path: tuple[PathPart, ...]
    message: str
    keyword: str
    matches_type: bool
    """Whether the instance matches the ``type`` of the schema the keyword sits in (False without one)."""


def is_type(instance: Any, name: str) -> bool:
    """Draft 2020-12's type check (jsonschema's ``draft202012_type_checker``)."""
    if name == "object":
        return isinstance(instance, dict)
    if name == "array":
        return isinstance(instance, list)
    if name == "string":
        return isinstance(instance, str)
    if name == "boolean":
        return isinstance(instance, bool)
    if name == "null":
        return instance is None
    if isinstance(instance, bool):
        return False  # bool is an int in Python, neither integer nor number in JSON Schema
    if name == "integer":
        return isinstance(instance, int) or (isinstance(instance, float) and instance.is_integer())
    if name == "number":
        return isinstance(instance, int | float)
    raise NotImplementedError(f"unknown JSON Schema type {name!r}")


def _equal(one: Any, two: Any) -> bool:
    """jsonschema's ``_utils.equal``: ``==`` except that booleans equal only booleans."""
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, dict) and isinstance(two, dict):
        return len(one) == len(two) and all(k in two and _equal(v, two[k]) for k, v in one.items())
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one == two
    return bool(one == two)


class SchemaChecker:
    """Checks instances against one schema document; see the module docstring."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.root = schema
        _refuse_unchecked(schema)

    def iter_errors(self, instance: Any) -> Iterator[SchemaError]:
        """Every violation, in the order jsonschema finds them."""
        yield from self._errors(instance, self.root, ())

    def best(self, instance: Any) -> SchemaError | None:
        """The violation jsonschema's ``best_match`` picks, or None when the instance is valid."""
        best: SchemaError | None = None
        best_key: tuple[Any, ...] | None = None
        for error in self.iter_errors(instance):
            key = (-len(error.path), error.path, True, False, not error.matches_type)
            if best_key is None or key > best_key:  # max() keeps the first of equals
                best, best_key = error, key
        return best

    def _resolve(self, ref: str) -> Mapping[str, Any]:
        if not ref.startswith("#"):
            raise NotImplementedError(f"only local $ref pointers are checked, not {ref!r}")
        node: Any = self.root
        for part in ref[1:].split("/")[1:]:
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def _errors(self, instance: Any, schema: Mapping[str, Any], path: tuple[PathPart, ...]) -> Iterator[SchemaError]:
        expected = schema.get("type")
        matches = False
        if isinstance(expected, str):
            matches = is_type(instance, expected)
        elif isinstance(expected, list):
            matches = any(is_type(instance, t) for t in expected)

        def error(keyword: str, message: str) -> SchemaError:
            return SchemaError(path, message, keyword, matches)

        for keyword, value in schema.items():
            if keyword == "$ref":
                yield from self._errors(instance, self._resolve(value), path)
            elif keyword == "type":
                types = [value] if isinstance(value, str) else list(value)
                if not any(is_type(instance, t) for t in types):
                    yield error(keyword, f"{instance!r} is not of type {', '.join(repr(t) for t in types)}")
            elif keyword == "enum":
                if all(not _equal(each, instance) for each in value):
                    yield error(keyword, f"{instance!r} is not one of {value!r}")
            elif keyword == "minimum":
                if is_type(instance, "number") and instance < value:
                    yield error(keyword, f"{instance!r} is less than the minimum of {value!r}")
            elif keyword == "maximum":
                if is_type(instance, "number") and instance > value:
                    yield error(keyword, f"{instance!r} is greater than the maximum of {value!r}")
            elif keyword == "minItems":
                if isinstance(instance, list) and len(instance) < value:
                    yield error(keyword, f"{instance!r} {'should be non-empty' if value == 1 else 'is too short'}")
            elif keyword == "items":
                if isinstance(instance, list):
                    for index, item in enumerate(instance):
                        yield from self._errors(item, value, (*path, index))
            elif keyword == "required":
                if isinstance(instance, dict):
                    for name in value:
                        if name not in instance:
                            yield error(keyword, f"{name!r} is a required property")
            elif keyword == "properties":
                if isinstance(instance, dict):
                    for name, sub in value.items():
                        if name in instance:
                            yield from self._errors(instance[name], sub, (*path, name))
            elif keyword == "additionalProperties":
                yield from self._additional(instance, schema, value, path, error)

    def _additional(
        self, instance: Any, schema: Mapping[str, Any], allowed: Any, path: tuple[PathPart, ...], error: Any
    ) -> Iterator[SchemaError]:
        if not isinstance(instance, dict):
            return
        known = schema.get("properties", {})
        extras = [name for name in instance if name not in known]
        if isinstance(allowed, dict):
            for name in extras:
                yield from self._errors(instance[name], allowed, (*path, name))
        elif allowed is False and extras:
            names = sorted(set(extras), key=str)
            verb = "was" if len(names) == 1 else "were"
            joined = ", ".join(repr(n) for n in names)
            yield error("additionalProperties", f"Additional properties are not allowed ({joined} {verb} unexpected)")


def _refuse_unchecked(schema: Any) -> None:
    """NotImplementedError for a keyword this module would not check (or a pattern it would ignore)."""
    if not isinstance(schema, Mapping):
        return
    for keyword, value in schema.items():
        if keyword not in CHECKED and keyword not in ANNOTATIONS:
            raise NotImplementedError(f"the profile schema uses {keyword!r}, which collbench's own check lacks")
        if keyword in ("properties", "$defs"):
            for sub in value.values():
                _refuse_unchecked(sub)
        elif keyword in ("items", "additionalProperties"):
            _refuse_unchecked(value)


def where(path: Sequence[PathPart]) -> str:
    """A path as the one-line problem shows it: ``$.rule_sets[0].world_size``."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
