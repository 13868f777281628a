"""A validator for the subset of JSON Schema that profiles/schema.json uses (no new dependency).

Supported keywords: ``type`` (a name or a list of names), ``enum``, ``required``, ``properties``,
``additionalProperties`` (a boolean or a schema), ``items``, ``minimum``, ``minItems``. Annotation
keywords (``description``, ``title``, ``$schema``, ``$id``) are ignored; any other keyword is an error,
so the schema cannot silently use something this validator does not check.
"""

from __future__ import annotations

from typing import Any

_ANNOTATIONS = frozenset({"description", "title", "$schema", "$id"})
_SUPPORTED = frozenset(
    {"type", "enum", "required", "properties", "additionalProperties", "items", "minimum", "minItems"}
)


def _is_type(value: Any, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    raise ValueError(f"unsupported JSON Schema type {name!r}")


def validate(instance: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """Every violation of ``schema`` by ``instance``, as ``path: problem`` strings (empty when valid)."""
    unknown = set(schema) - _SUPPORTED - _ANNOTATIONS
    if unknown:
        raise ValueError(f"{path}: schema uses unsupported keywords {sorted(unknown)}")
    errors: list[str] = []
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(instance, n) for n in names):
            return [f"{path}: expected {' or '.join(names)}, got {type(instance).__name__}"]
    if "enum" in schema and instance not in schema["enum"]:
        errors.append(f"{path}: {instance!r} is not one of {schema['enum']}")
    if "minimum" in schema and _is_type(instance, "number") and instance < schema["minimum"]:
        errors.append(f"{path}: {instance} is below the minimum {schema['minimum']}")
    if isinstance(instance, dict):
        errors.extend(f"{path}: lacks required {key!r}" for key in schema.get("required", ()) if key not in instance)
        props: dict[str, Any] = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, value in instance.items():
            if key in props:
                errors.extend(validate(value, props[key], f"{path}.{key}"))
            elif extra is False:
                errors.append(f"{path}: unexpected property {key!r}")
            elif isinstance(extra, dict):
                errors.extend(validate(value, extra, f"{path}.{key}"))
    if isinstance(instance, list):
        if "minItems" in schema and len(instance) < schema["minItems"]:
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "items" in schema:
            for i, item in enumerate(instance):
                errors.extend(validate(item, schema["items"], f"{path}[{i}]"))
    return errors
