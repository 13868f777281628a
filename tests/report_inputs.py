"""Inputs for the report tests: the committed example profile and its results, a GPU topology with NICs,
and rows that carry a stall fraction (as the sweep records it, iterations slower than 3x the fastest)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

from collbench.runtime.results import ResultRow
from collbench.topology.model import Topology
from collbench.topology.nvidia_smi import read_nvidia_smi_topo
from collbench.tuning.profile import Profile

REPO = Path(__file__).resolve().parents[1]
EXAMPLE_PROFILE = REPO / "profiles" / "cpu-2core-gloo-4ranks.yaml"
EXAMPLE_RESULTS = REPO / "profiles" / "cpu-2core-gloo-4ranks-results.jsonl"
A100_TOPO = REPO / "tests" / "fixtures" / "topologies" / "a100x4-nv4-nics.topo.txt"


@dataclass(frozen=True, slots=True)
class StalledRow(ResultRow):
    """A result row with the sweep's stall fraction, whether or not this ResultRow has the field yet."""

    stall_fraction: float | None = None


def with_stalls(rows: list[ResultRow], every: int = 7, fraction: float = 0.2) -> list[ResultRow]:
    """Every ``every``-th row stalled ``fraction`` of its iterations; the others none."""
    out: list[ResultRow] = []
    for i, r in enumerate(rows):
        data = {f.name: getattr(r, f.name) for f in fields(ResultRow)}
        data["stall_fraction"] = fraction if i % every == 0 else 0.0
        out.append(StalledRow(**data))
    return out


def a100_topology() -> Topology:
    return read_nvidia_smi_topo(A100_TOPO)


def example_profile() -> Profile:
    return Profile.load(EXAMPLE_PROFILE)


def as_other_world(rows: list[ResultRow], world_size: int) -> list[ResultRow]:
    return [replace(r, world_size=world_size) for r in rows]
