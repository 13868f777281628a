"""YAML and JSON a user hands collbench, read into plain data with one clear error instead of a traceback.

A document is checked before it is built: aliases that expand past a bound, nesting past a depth, a key
given twice, integers of more digits than any count has; each is refused as :class:`InputFileError`
naming the file, the problem and its line. The text itself comes from :mod:`collbench.fileio`.
"""

from __future__ import annotations

import gc
import json
import re
from pathlib import Path
from typing import Any

from collbench.errors import InputFileError
from collbench.units import MAX_INT_DIGITS

MAX_YAML_NODES = 1_000_000
"""The most nodes a user's YAML's aliases may add once expanded, beyond the nodes the text itself holds.

A few KB of nested aliases (a "billion laughs") stand for billions of values: every later walk over
them (a fingerprint, a copy, a dump) then takes minutes and gigabytes. What the text holds written
out is bounded by :data:`collbench.fileio.MAX_TEXT_FILE_BYTES` instead: a probe's topology of n ranks holds about
7 n^2 nodes (n^2 / 2 links), 1.8 million at 512 ranks, and counting those against this bound refused
the file ``discover --probe`` had written.
"""


MAX_YAML_DEPTH = 100
"""The deepest a user's YAML may nest (collections in collections). Topologies and profiles nest fewer
than ten; PyYAML's own loader runs out of stack a few hundred deep, libyaml's at 1,000, and a
document only as deep as either allows would still overflow later walks over it."""


def parse_yaml(text: str, path: Path, *, libyaml: bool = True) -> Any:
    """YAML ``text`` read from ``path``; InputFileError with the problem and its line, on one line.

    PyYAML's own message spans several lines (the problem, then a context excerpt). Only plain data
    is built (the safe loader), and a document whose aliases expand past :data:`MAX_YAML_NODES`, an
    alias to itself, or nesting past :data:`MAX_YAML_DEPTH` (or too deep for the parser) is refused
    before anything is built.

    The text is parsed by libyaml (``yaml.CSafeLoader``) where PyYAML was built with it: PyYAML's
    pure-Python parser takes about 30 s for a 1 MB topology. Whatever libyaml finds wrong is parsed
    again by PyYAML's own ``SafeLoader``, so the result, or the error and its line, is the same with
    or without libyaml. ``libyaml=False`` uses PyYAML's loader alone.
    """
    import yaml

    fast = getattr(yaml, "CSafeLoader", None) if libyaml else None
    if fast is not None:
        try:
            return _load_yaml(fast, text, path)
        except (yaml.YAMLError, RecursionError, ValueError):
            # libyaml's messages differ from PyYAML's (and it may refuse what PyYAML reads): PyYAML decides.
            pass
    try:
        return _load_yaml(yaml.SafeLoader, text, path)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        # A ReaderError (a control character) has a reason, not a problem; either may span lines.
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc)
        raise InputFileError(str(path), f"not YAML: {' '.join(str(problem).split())}", line=line) from None
    except RecursionError:
        raise InputFileError(str(path), _TOO_DEEP) from None


_TOO_DEEP = "not YAML collbench reads: nested too deeply"


def _load_yaml(loader_class: Any, text: str, path: Path) -> Any:
    """The document in ``text`` built by ``loader_class`` once its node graph passed _check_expansion.

    Python's cyclic collector is paused meanwhile: the nodes and values made are all kept, and each of its
    passes walked them again (half of a 2.5 MiB topology's load). It only defers: nothing leaks."""
    loader, collecting = None, gc.isenabled()
    gc.disable()
    try:
        # The loader's constructor already reads the text (and refuses control characters).
        loader = loader_class(text)
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, path)
        return loader.construct_document(node)
    finally:
        if collecting:
            gc.enable()
        if loader is not None:
            loader.dispose()


def _check_expansion(root: Any, path: Path) -> None:
    """Raise InputFileError when the node graph under ``root`` expands past MAX_YAML_NODES, nests past
    MAX_YAML_DEPTH, or holds an alias to itself.

    Aliases make the graph a DAG (or a cycle); each collection's expanded size and depth are computed once,
    without recursion (a scalar is counted and checked where met), in time linear in the text. A node's
    expanded size is held against the bound plus the nodes met so far: only what aliases add counts.
    """
    if root.id == "scalar":
        return _check_scalar(root, path)
    sizes: dict[int, int] = {}  # of collections: a scalar is 1 node, 0 deep, checked where it is met
    depths: dict[int, int] = {}
    on_path: set[int] = set()
    met = 0  # nodes met so far
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            total, depth = 1, 1
            for child in _children(node):
                if child.id == "scalar":
                    total += 1
                else:
                    total += sizes[id(child)]
                    depth = max(depth, 1 + depths[id(child)])
            met += 1
            if total > MAX_YAML_NODES + met or depth > MAX_YAML_DEPTH:
                if depth > MAX_YAML_DEPTH:
                    # No line, as when the parser itself runs out of stack: the same words either way.
                    raise InputFileError(str(path), _TOO_DEEP)
                mark = node.start_mark
                raise InputFileError(
                    str(path),
                    f"YAML aliases expand to more than {MAX_YAML_NODES:,} values; write the values out",
                    line=mark.line + 1 if mark is not None else None,
                )
            sizes[key] = total
            depths[key] = depth
            on_path.discard(key)
            continue
        if key in sizes:
            continue
        if node.id == "mapping":
            _check_unique_keys(node, path)
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if child.id == "scalar":
                _check_scalar(child, path)
                met += 1
            elif id(child) in on_path:
                raise InputFileError(str(path), "a YAML alias refers to itself", line=child.start_mark.line + 1)
            elif id(child) not in sizes:
                stack.append((child, False))


_INT_TAG = "tag:yaml.org,2002:int"


def _check_scalar(node: Any, path: Path) -> None:
    """An integer of more than MAX_INT_DIGITS digits is refused before PyYAML's ``int()`` sees it."""
    digits = sum(c.isdigit() for c in node.value) if node.tag == _INT_TAG else 0
    if digits > MAX_INT_DIGITS:
        problem = f"an integer of {digits:,} digits; numbers here have at most {MAX_INT_DIGITS}"
        raise InputFileError(str(path), problem, line=node.start_mark.line + 1)


def _check_unique_keys(node: Any, path: Path) -> None:
    """A key given twice in one mapping is refused: YAML says keys are unique, and PyYAML would keep the
    last silently, so what a reader sees first is not what collbench uses."""
    seen: set[tuple[str, str]] = set()
    for key_node, _ in node.value:
        if not hasattr(key_node, "value") or not isinstance(key_node.value, str):
            continue
        key = (key_node.tag, key_node.value)
        if key in seen:
            raise InputFileError(
                str(path),
                f"key {key_node.value[:60]!r} is given twice in one mapping",
                line=key_node.start_mark.line + 1,
            )
        seen.add(key)


def _children(node: Any) -> list[Any]:
    """A mapping node's keys and values, or a sequence node's items (only collections are asked)."""
    return [part for pair in node.value for part in pair] if node.id == "mapping" else list(node.value)


class _JSONProblem(ValueError):
    """A number or a key json.loads would take, but collbench does not."""


def json_int(text: str) -> int:
    """``json.loads``'s ``parse_int``: an integer of sane length (checked before ``int()``)."""
    digits = len(text) - text.startswith("-")
    if digits > MAX_INT_DIGITS:
        raise _JSONProblem(f"an integer of {digits:,} digits; numbers here have at most {MAX_INT_DIGITS}")
    return int(text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise _JSONProblem(f"key {twice[:60]!r} is given twice in one object")
    return out


def parse_json(text: str, path: Path) -> Any:
    """JSON ``text`` read from ``path``; InputFileError with the problem and its line."""
    try:
        # A BOM is no JSON, but Windows editors write one: json.loads said "Unexpected UTF-8 BOM".
        return json.loads(text.removeprefix("\ufeff"), parse_int=json_int, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise InputFileError(str(path), f"not JSON: {exc.msg}", line=exc.lineno) from None
    except _JSONProblem as exc:
        # json.loads says nowhere where its hook refused: a run of too many digits is found again.
        found = re.search(rf"\d{{{MAX_INT_DIGITS + 1},}}", text) if "digits" in str(exc) else None
        line = text.count("\n", 0, found.start()) + 1 if found else None
        raise InputFileError(str(path), str(exc), line=line) from None
    except RecursionError:
        raise InputFileError(str(path), "not JSON collbench reads: nested too deeply") from None
