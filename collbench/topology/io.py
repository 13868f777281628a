"""Topology files: YAML or JSON by extension, written atomically, read back identically."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from collbench.errors import InputFileError
from collbench.fileio import atomic_write_text, parse_json, parse_yaml, read_text_file
from collbench.topology.model import Topology

YAML_SUFFIXES = (".yaml", ".yml")
JSON_SUFFIXES = (".json",)


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in YAML_SUFFIXES:
        return "yaml"
    if suffix in JSON_SUFFIXES:
        return "json"
    raise InputFileError(str(path), f"unknown extension {suffix or '(none)'!r}; use .yaml, .yml or .json")


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
    fmt = _format(path)
    text = read_text_file(path, "a topology from `collbench discover -o`")
    if not text.strip():
        raise InputFileError(str(path), "the file is empty (expected a topology document)")
    data: Any = parse_json(text, path) if fmt == "json" else parse_yaml(text, path)
    if not isinstance(data, dict) or "devices" not in data:
        raise InputFileError(str(path), 'not a topology document (expected a mapping with "devices" and "links")')
    try:
        return Topology.from_dict(data)
    except KeyError as exc:
        raise InputFileError(str(path), f"a device or link lacks the key {exc.args[0]!r}") from None
    except (ValueError, TypeError) as exc:
        raise InputFileError(str(path), f"not a valid topology: {exc}") from None
