"""Whether the topology and the profile a report is given are of the machine its rows ran on.

The page draws the three side by side (the machine section, the rows' charts with the profile's
models over them, the profile's rules), and nothing else ties them together: a report of one host's
rows with another machine's topology or profile drew both as the rows' without a word. Only facts
both sides record are compared (an ``nvidia-smi topo -m`` text names no host, an nccl-tests log no
GPU model): each differing one is named, as ``collbench compare`` names how two runs differ.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from collbench.profile.document import Profile
from collbench.results.row import CPU_DEVICE_NAME, ResultRow
from collbench.topology.model import Topology
from collbench.units import counted

UNKNOWN_HOSTS = ("", "unknown")
"""Host names that name no host: rows of a log without its host lines, a topology from pasted text."""

MAX_NAMED = 4
"""Distinct values named per fact; the rest counted, so one warning stays one line however many."""


def _listing(values: Iterable[str] | Iterable[int]) -> str:
    """Distinct values, names alphabetically and rank counts by value."""
    shown = [str(v) for v in sorted(set(values), key=lambda v: str(v).zfill(20) if isinstance(v, int) else str(v))]
    more = len(shown) - MAX_NAMED
    return ", ".join(shown[:MAX_NAMED]) + (f" and {more} more" if more > 0 else "")


def _row_hosts(rows: Sequence[ResultRow]) -> set[str]:
    return {r.host for r in rows if r.host not in UNKNOWN_HOSTS}


def _topology_facts(rows: Sequence[ResultRow], topology: Topology) -> list[str]:
    out = []
    ranks = topology.rank_devices
    hosts = {d.host or topology.host for d in ranks} - set(UNKNOWN_HOSTS)
    row_hosts = _row_hosts(rows)
    if hosts and row_hosts and not row_hosts <= hosts:
        out.append(f"hosts: the rows' {_listing(row_hosts)}, the topology's {_listing(hosts)}")
    devices = {r.device_name for r in rows if r.device_name}
    gpu_rows = devices - {CPU_DEVICE_NAME}
    gpu_names = {g.name for g in topology.gpus if g.name}
    if devices == {CPU_DEVICE_NAME} and topology.gpus:
        out.append(f"GPUs: the rows ran on CPU ranks, the topology's ranks are {counted(len(topology.gpus), 'GPU')}")
    elif gpu_rows and devices == gpu_rows and not topology.gpus:
        out.append(f"GPUs: the rows ran on {_listing(gpu_rows)}, the topology has no GPU")
    elif gpu_rows and gpu_names and not gpu_rows & gpu_names:
        out.append(f"GPUs: the rows ran on {_listing(gpu_rows)}, the topology's are {_listing(gpu_names)}")
    widest = max(r.world_size for r in rows)
    if widest > len(ranks):
        out.append(
            f"world size: the rows ran {counted(widest, 'rank')}, the topology holds "
            f"{counted(len(ranks), 'rank device')}"
        )
    return out


def _profile_facts(rows: Sequence[ResultRow], profile: Profile) -> list[str]:
    out = []
    row_hosts = _row_hosts(rows)
    if profile.host not in UNKNOWN_HOSTS and row_hosts and row_hosts != {profile.host}:
        out.append(f"hosts: the rows' {_listing(row_hosts)}, the profile's {profile.host}")
    backends = {r.backend for r in rows}
    if profile.backend not in backends:
        out.append(f"backend: the rows' {_listing(backends)}, the profile's {profile.backend}")
    row_sizes = {r.world_size for r in rows}
    shapes = {s.world_size for s in profile.rule_sets}
    if not row_sizes & shapes:
        out.append(
            f"world size: the rows ran {_listing(row_sizes)} ranks, the profile's shapes are {_listing(shapes)} ranks"
        )
    return out


def mismatches(
    rows: Sequence[ResultRow],
    *,
    topology: Topology | None = None,
    topology_name: str = "the topology",
    profile: Profile | None = None,
    profile_name: str = "the profile",
) -> list[str]:
    """One warning per given input that is not of the machine the rows ran on, naming each fact that
    differs (hosts, GPUs, world size; for the profile its backend too). Empty where everything known agrees.

    ``rows`` must not be empty."""
    out = []
    if topology is not None:
        facts = _topology_facts(rows, topology)
        if facts:
            out.append(
                f"{topology_name} does not match the rows: {'; '.join(facts)}; the page draws it beside them as given"
            )
    if profile is not None:
        facts = _profile_facts(rows, profile)
        if facts:
            out.append(
                f"{profile_name} does not match the rows: {'; '.join(facts)}; the page draws its rules and "
                "models beside them as given"
            )
    return out
