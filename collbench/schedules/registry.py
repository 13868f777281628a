"""Algorithms by name. Each builder module registers its algorithms here; nothing else names them.

An algorithm is a builder ``(op, world_size, count, root=..., layout=..., segments=...) -> Schedule``
plus the set of ops it implements. ``native`` (the backend's own collective) has no builder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from collbench.errors import NotApplicableError, UnknownNameError
from collbench.layouts.model import Layout
from collbench.schedules.ir import Schedule
from collbench.schedules.ops import Op


class Builder(Protocol):
    def __call__(
        self,
        op: Op,
        world_size: int,
        count: int,
        *,
        root: int = 0,
        layout: Layout | None = None,
        segments: int = 1,
    ) -> Schedule: ...


@dataclass(frozen=True, slots=True)
class AlgorithmSpec:
    name: str
    ops: frozenset[Op]
    builder: Builder | None
    """None for ``native``: the backend runs it, there is no schedule."""
    summary: str
    """One line for ``--help`` and ``explain``."""
    segmented: bool = False
    """Whether ``segments`` changes the schedule (pipelined trees)."""

    def supports(self, op: Op) -> bool:
        return op in self.ops

    def build(
        self,
        op: Op,
        world_size: int,
        count: int,
        *,
        root: int = 0,
        layout: Layout | None = None,
        segments: int = 1,
    ) -> Schedule:
        """Build the schedule; raise NotApplicableError for an op this algorithm does not do."""
        if self.builder is None:
            raise NotApplicableError(f"{self.name} is the backend's own collective and has no schedule")
        if op not in self.ops:
            does = ", ".join(o.value for o in sorted_ops(self.ops))
            raise NotApplicableError(f"{self.name} does not implement {op.value}; it does: {does}")
        if world_size < 1:
            raise NotApplicableError(f"world size must be >= 1, got {world_size}")
        if not 0 <= root < world_size:
            raise NotApplicableError(f"root {root} is not a rank of a world of {world_size}")
        return self.builder(op, world_size, count, root=root, layout=layout, segments=segments)


def sorted_ops(ops: frozenset[Op]) -> list[Op]:
    order = list(Op)
    return sorted(ops, key=order.index)


class _Registry:
    """The table of algorithms, filled once when ``collbench.schedules.algorithms`` is imported."""

    def __init__(self) -> None:
        self._specs: dict[str, AlgorithmSpec] = {}

    def register(self, spec: AlgorithmSpec) -> AlgorithmSpec:
        assert spec.name not in self._specs, f"algorithm {spec.name} registered twice"
        self._specs[spec.name] = spec
        return spec

    def get(self, name: str) -> AlgorithmSpec:
        self._load()
        key = name.strip().lower()
        if key not in self._specs:
            raise UnknownNameError("algorithm", name, list(self._specs))
        return self._specs[key]

    def names(self) -> list[str]:
        self._load()
        return list(self._specs)

    def for_op(self, op: Op) -> list[AlgorithmSpec]:
        self._load()
        return [s for s in self._specs.values() if op in s.ops]

    def _load(self) -> None:
        # Importing the package runs every builder module's register() calls.
        import collbench.schedules.algorithms  # noqa: F401


REGISTRY = _Registry()


def get_algorithm(name: str) -> AlgorithmSpec:
    """The algorithm called ``name``; raise UnknownNameError listing the known ones."""
    return REGISTRY.get(name)


def algorithm_names() -> list[str]:
    return REGISTRY.names()


def algorithms_for(op: Op) -> list[AlgorithmSpec]:
    return REGISTRY.for_op(op)


def register(spec: AlgorithmSpec) -> AlgorithmSpec:
    return REGISTRY.register(spec)


NATIVE = AlgorithmSpec(
    name="native",
    ops=frozenset(Op),
    builder=None,
    summary="the backend's own collective (gloo's or NCCL's), which has no schedule",
)
