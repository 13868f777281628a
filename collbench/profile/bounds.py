"""Everything in a profile checked against what it can physically be, before anything is built of it.

The JSON Schema says which fields a profile has and their types; it cannot say that a tree is a tree,
that a number is finite or that a size is below :data:`collbench.units.MAX_BYTES`. A profile from
someone else that says otherwise (a cycle, NaN, 2^63, a billion segments, five thousand rings) is
refused here, naming the field and the bound: it would otherwise become an export, or a job that
hangs on every rank.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator
from typing import Any

from collbench.layouts.rings import MAX_CHANNELS
from collbench.schedules.spec import MAX_SEGMENTS
from collbench.text import printable
from collbench.units import MAX_BYTES, MAX_RANKS

_BYTE_FIELDS = frozenset({"min_bytes", "max_bytes", "at_bytes", "segment_bytes", "size_bytes"})
_RANK_FIELDS = frozenset({"world_size", "nodes"})
_UNDEFINED_ALLOWED = (".r2", ".median_abs_pct_error", ".max_abs_pct_error")
"""A fit's statistics, NaN where undefined or not recorded (models/fitted.py): shown, never computed with."""
_NAME_FIELDS = ("fingerprint", "backend")
"""Top-level strings that name something (written into exports and commands as they are)."""
MAX_NAME_CHARS = 200


def profile_problem(data: dict[str, Any]) -> str | None:
    """The first thing in a schema-valid profile mapping outside its physical bounds, as one line
    (``$.path: problem``), or None."""
    for where, value in _leaves(data, "$"):
        problem = _leaf_problem(where, value)
        if problem is not None:
            return problem
    for name in _NAME_FIELDS:
        problem = _name_problem(f"$.{name}", data.get(name))
        if problem is not None:
            return problem
    problem = _created_problem(data.get("created"))
    if problem is not None:
        return problem
    for i, rule_set in enumerate(data.get("rule_sets") or ()):
        problem = _rule_set_problem(f"$.rule_sets[{i}]", rule_set)
        if problem is not None:
            return problem
    return None


def _created_problem(created: Any) -> str | None:
    """Why ``created`` is no ISO 8601 time, or None (absent or empty: not recorded). 'profile merge --prefer
    newer' orders profiles by it: a hand-edited 'yesterday' sorted after every date and was kept as newer."""
    if created is None or created == "":
        return None
    try:
        dt.datetime.fromisoformat(str(created))
    except ValueError:
        return f"$.created: {printable(str(created)[:40])!r} is no ISO 8601 time (such as 2026-11-25T16:48:16Z)"
    return None


def _leaves(value: Any, where: str) -> Iterator[tuple[str, Any]]:
    """Every scalar under ``value`` with its path (iteratively: depth is bounded by the YAML reader)."""
    stack = [(where, value)]
    while stack:
        at, node = stack.pop()
        if isinstance(node, dict):
            stack.extend((f"{at}.{k}", v) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((f"{at}[{i}]", v) for i, v in reversed(list(enumerate(node))))
        else:
            yield at, node


def _leaf_problem(where: str, value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value) and not where.endswith(_UNDEFINED_ALLOWED):
        return f"{where}: {value} is not a finite number"
    if isinstance(value, (int, float)):
        key = where.rsplit(".", 1)[-1]
        shown = f"{value:,}" if isinstance(value, int) else f"{value:g}"
        if key in _BYTE_FIELDS and value >= MAX_BYTES:
            return f"{where}: {shown} bytes is not below 2^50 bytes (1 PiB), the most collbench takes"
        if key in _RANK_FIELDS and value >= MAX_RANKS:
            unit = "ranks" if key == "world_size" else "nodes"
            return f"{where}: {value} {unit}, not below 2^20 (1,048,576), the most collbench takes"
        if key == "segments" and value > MAX_SEGMENTS:
            return f"{where}: {shown} segments is more than {MAX_SEGMENTS}, the most a pipelined schedule is cut in"
        if isinstance(value, int) and abs(value) >= 2**63:
            return f"{where}: {shown} does not fit a 64-bit number"
    return None


def _name_problem(where: str, value: Any) -> str | None:
    if isinstance(value, str) and (len(value) > MAX_NAME_CHARS or printable(value) != value):
        shown = printable(value[:40]) + ("..." if len(value) > 40 else "")
        return f"{where}: {shown!r} is not a name (at most {MAX_NAME_CHARS} characters, no control characters)"
    return None


def _rule_set_problem(where: str, rule_set: dict[str, Any]) -> str | None:
    world = rule_set.get("world_size")
    for key in ("rules", "nccl_rules"):
        for j, rule in enumerate(rule_set.get(key) or ()):
            params = rule.get("params") or {}
            for name in ("layout", "protocol"):
                problem = _name_problem(f"{where}.{key}[{j}].params.{name}", params.get(name))
                if problem is not None:
                    return problem
    layout = rule_set.get("layout")
    if not isinstance(layout, dict) or not isinstance(world, int):
        return None
    problem = _name_problem(f"{where}.layout.name", layout.get("name"))
    if problem is not None:
        return problem
    for kind in ("rings", "trees"):
        if len(layout.get(kind) or ()) > MAX_CHANNELS:
            return f"{where}.layout.{kind}: {len(layout[kind])} {kind}, more than {MAX_CHANNELS} (NCCL's channels)"
    for t, tree in enumerate(layout.get("trees") or ()):
        problem = tree_problem(tree, world)
        if problem is not None:
            return f"{where}.layout.trees[{t}]: {problem}"
    return None


def tree_problem(parents: list[int], world_size: int) -> str | None:
    """Why ``parents`` (rank r's parent, -1 for the root) is not a tree over ranks 0..world_size-1, or None.

    One root, every rank reaches it, no cycle, no rank its own parent: in O(world_size), each rank's
    path walked once.
    """
    if len(parents) != world_size or any(not -1 <= p < world_size for p in parents):
        return f"must give each of the {world_size} ranks a parent rank (-1: the root)"
    roots = [r for r, p in enumerate(parents) if p == -1]
    if len(roots) != 1:
        return f"has {len(roots)} roots (ranks with parent -1); a tree has one"
    state = [0] * world_size  # 0 not seen, 1 on the path being walked, 2 reaches the root
    state[roots[0]] = 2
    for start in range(world_size):
        path = []
        rank = start
        while state[rank] == 0:
            state[rank] = 1
            path.append(rank)
            rank = parents[rank]
        if state[rank] == 1:
            return f"rank {rank} is its own ancestor (a cycle): not every rank reaches the root {roots[0]}"
        for r in path:
            state[r] = 2
    return None
