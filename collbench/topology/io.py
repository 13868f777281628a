"""Topology files: YAML or JSON by extension, written atomically, read back identically."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from collbench.errors import InputFileError
from collbench.fileio import atomic_write_text, read_text_file
from collbench.filekinds import TOPOLOGY_KIND, misfiled
from collbench.topology.model import Topology
from collbench.yamljson import parse_json, parse_yaml

# What each field of a device or link may hold: a scalar (str, number, bool: from_dict converts it),
# a list of numbers, or a mapping of scalars. A hand-edited file with a mapping where a name goes, or a
# string where a device goes, is refused naming the field, before anything hashes or sorts it.
_SCALAR = "a scalar"
_DEVICE_FIELDS = {
    "id": _SCALAR,
    "kind": _SCALAR,
    "index": _SCALAR,
    "name": _SCALAR,
    "bus_id": _SCALAR,
    "numa_node": _SCALAR,
    "memory_bytes": _SCALAR,
    "uuid": _SCALAR,
    "host": _SCALAR,
    "cpus": "a list of CPU numbers",
    "extra": "a mapping of names to values",
}
_LINK_FIELDS = {k: _SCALAR for k in ("a", "b", "kind", "count", "bandwidth_gbps", "latency_us", "source")}
_NODE_LINK_FIELDS = {**_LINK_FIELDS, "default": _SCALAR}
_TOP_FIELDS = {k: _SCALAR for k in ("schema_version", "host", "fingerprint", "source", "note")}

YAML_SUFFIXES = (".yaml", ".yml")
JSON_SUFFIXES = (".json",)


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in YAML_SUFFIXES:
        return "yaml"
    if suffix in JSON_SUFFIXES:
        return "json"
    raise InputFileError(str(path), f"unknown extension {suffix or '(none)'!r}; use .yaml, .yml or .json")


def _is_scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _fits(value: object, want: str) -> bool:
    if value is None or want == _SCALAR:
        return _is_scalar(value)
    if want == _DEVICE_FIELDS["cpus"]:
        return isinstance(value, list) and all(isinstance(c, int | str) and not isinstance(c, bool) for c in value)
    return isinstance(value, dict) and all(_is_scalar(v) for v in value.values())


def _check_shape(data: dict[str, Any]) -> str | None:
    """The first field that holds the wrong kind of value, as a sentence; None when all fit."""
    for key, want in _TOP_FIELDS.items():
        if not _fits(data.get(key), want):
            return f"{key} is {type(data[key]).__name__}, expected {want}"
    sections = (("devices", _DEVICE_FIELDS), ("links", _LINK_FIELDS), ("node_links", _NODE_LINK_FIELDS))
    for section, fields in sections:
        items = data.get(section) or []
        if not isinstance(items, list):
            return f"{section} is {type(items).__name__}, expected a list"
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                return f"{section}[{i}] is {type(item).__name__} {str(item)[:40]!r}, expected a mapping"
            for key, want in fields.items():
                if not _fits(item.get(key), want):
                    return f"{section}[{i}].{key} is {type(item[key]).__name__}, expected {want}"
    return None


def dumps_topology(topo: Topology, fmt: str) -> str:
    """The topology document as ``"yaml"`` or ``"json"`` text."""
    data = topo.to_dict()
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    return str(yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120))


def save_topology(topo: Topology, path: Path) -> None:
    """Write a topology to ``path`` (YAML or JSON by extension), atomically.

    Raises InputFileError for an unknown extension.
    """
    atomic_write_text(path, dumps_topology(topo, _format(path)))


def load_topology(path: Path) -> Topology:
    """Read a topology that collbench wrote (YAML or JSON by extension).

    Raises InputFileError when the file is missing, empty, not YAML/JSON, or not a topology document.
    """
    try:
        fmt = _format(path)
    except InputFileError as exc:
        # An nvidia-smi paste or NCCL XML given to --topology: say which option reads it, not the suffix.
        try:
            text = read_text_file(path, "a topology") if path.is_file() else ""
        except InputFileError:
            raise exc from None
        raise misfiled(path, text, TOPOLOGY_KIND) or exc from None
    text = read_text_file(path, "a topology from `collbench discover -O`")
    if not text.strip():
        raise InputFileError(str(path), "the file is empty (expected a topology document)")
    try:
        data: Any = parse_json(text, path) if fmt == "json" else parse_yaml(text, path)
        if not isinstance(data, dict) or "devices" not in data:
            raise InputFileError(str(path), 'not a topology document (expected a mapping with "devices" and "links")')
    except InputFileError as exc:
        # A profile, results or a paste given for the topology: say which, and which option reads it.
        raise misfiled(path, text, TOPOLOGY_KIND) or exc from None
    problem = _check_shape(data)
    if problem is not None:
        raise InputFileError(str(path), f"not a valid topology: {problem}")
    try:
        return Topology.from_dict(data)
    except KeyError as exc:
        raise InputFileError(str(path), f"a device or link lacks the key {exc.args[0]!r}") from None
    except (ValueError, TypeError) as exc:
        raise InputFileError(str(path), f"not a valid topology: {exc}") from None
