"""Inputs for the report tests: the committed example profile and its results, a GPU topology with NICs,
and rows with a stall fraction (the fraction of iterations slower than 3x the fastest) set."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from collbench.profile.document import Profile
from collbench.results.row import ResultRow
from collbench.topology.model import Topology
from collbench.topology.nvidia_smi import read_nvidia_smi_topo

REPO = Path(__file__).resolve().parents[1]
# The example profiles/ once held (4 ranks on 2 cores, noisy, some fits that do not explain their
# data): the report's tests need exactly that mix, and the example there is regenerated at times.
EXAMPLE_PROFILE = REPO / "tests" / "fixtures" / "profiles" / "cpu-2core-gloo-4ranks.yaml"
EXAMPLE_RESULTS = REPO / "tests" / "fixtures" / "golden" / "example-results.jsonl"
A100_TOPO = REPO / "tests" / "fixtures" / "topologies" / "a100x4-nv4-nics.topo.txt"


def with_stalls(rows: list[ResultRow], every: int = 7, fraction: float = 0.2) -> list[ResultRow]:
    """Every ``every``-th row stalled ``fraction`` of its iterations; the others none."""
    return [replace(r, stall_fraction=fraction if i % every == 0 else 0.0) for i, r in enumerate(rows)]


def a100_topology() -> Topology:
    return read_nvidia_smi_topo(A100_TOPO)


def example_profile() -> Profile:
    return Profile.load(EXAMPLE_PROFILE)
