"""bench_scale.py's item 5: the probe's topology file at 512, 4,096 and 16,384 ranks, by nodes and with
every pair of ranks listed (the file before), from probe data made in the process (no launch at that size).
Rank 0 builds the topology from what it gathered and writes it (``discover --probe``), then, in a
launcher's ``tune --topology``, reads it and plans on it (``placement._planned``: ``load_topology`` and
``plan_layout``, over nodes past 2,048 ranks), with the plan's peak memory. CPU seconds
(``time.process_time``): the machine is shared.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from dataclasses import dataclass

from collbench.runtime.probe import PairMeasure

PROBE_NODE_RANKS = 8
"""Ranks per node of the made-up probe (a GPU node's 8)."""


@dataclass(frozen=True, slots=True)
class FileCost:
    """Rank 0's topology file after a probe, and its load and plan in a launcher's ``tune --topology``."""

    mib: float
    """The YAML file's size (MiB); estimated where ``write_s`` is None (see :func:`topology_file_cost`)."""
    write_s: float | None
    """CPU seconds to build the topology from the measurements and write the file (rank 0, once)."""
    load_s: float | None
    """CPU seconds of ``placement``'s load (None: not read, over the read limit or only estimated)."""
    plan_s: float | None
    """CPU seconds of its plan (or of reaching its refusal, ``planned`` False)."""
    planned: bool
    plan_mib: float | None = None
    """The plan's peak Python memory (MiB, tracemalloc, in a second plan: tracing slows the first)."""


def _probe_measures(world_size: int, every_pair: bool) -> tuple[list[str], list[PairMeasure]]:
    """What rank 0 gathers from a probe of ``world_size`` ranks on nodes of :data:`PROBE_NODE_RANKS`: every pair
    of ranks, or by nodes (the pairs :func:`collbench.runtime.probe._peers` gives, through the same
    :func:`partner`). Figures: 20 GB/s within a node, 10 between nodes, every 7th pair of nodes 1."""
    from collbench.runtime.probe import partner, rounds_for
    from collbench.runtime.probe_pairs import NODE_ROUNDS

    n, per = world_size, PROBE_NODE_RANKS
    hosts = [f"node{r // per:05d}" for r in range(n)]

    def both(a: int, b: int) -> list[PairMeasure]:
        gbps = 20.0 if a // per == b // per else (1.0 if (a // per + b // per) % 7 == 0 else 10.0)
        return [PairMeasure(a, b, 5.0, gbps), PairMeasure(b, a, 5.0, gbps)]

    if every_pair:
        return hosts, [m for a in range(n) for b in range(a + 1, n) for m in both(a, b)]
    nodes = -(-n // per)
    measures = [m for a in range(n) for b in range(a + 1, min(n, (a // per + 1) * per)) for m in both(a, b)]
    for k in range(min(rounds_for(nodes), NODE_ROUNDS)):
        for node in range(nodes):
            other = partner(nodes, node, k)
            if other is not None and node < other:
                measures += both(node * per, other * per)
    return hosts, measures


def _devices_bytes(world_size: int) -> int:
    """The YAML bytes of a probe's topology of ``world_size`` ranks with no link: its devices and header."""
    from collbench.runtime.probe import measured_topology
    from collbench.topology.io import dumps_topology

    hosts = [f"node{r // PROBE_NODE_RANKS:05d}" for r in range(world_size)]
    return len(dumps_topology(measured_topology(hosts, [], gpus=True), "yaml").encode())


def topology_file_cost(world_size: int, *, every_pair: bool, per_link_bytes: float | None = None) -> FileCost:
    """:class:`FileCost` at ``world_size`` ranks: rank 0 builds the topology from the measurements and
    writes it (``discover --probe``), then reads and plans on it as ``placement._planned`` does
    (``load_topology``, ``plan_layout``). With ``per_link_bytes`` (every pair, past the sizes measured)
    nothing is built: the size is the devices' bytes plus n(n-1)/2 links of the bytes one took where
    measured, a file collbench refuses to read past its read limit."""
    import tempfile
    from pathlib import Path

    from collbench.errors import CollbenchError
    from collbench.layouts.plan import plan_layout
    from collbench.runtime.probe import measured_topology
    from collbench.topology.io import load_topology, save_topology

    if per_link_bytes is not None:
        size = _devices_bytes(world_size) + world_size * (world_size - 1) // 2 * per_link_bytes
        return FileCost(mib=size / 2**20, write_s=None, load_s=None, plan_s=None, planned=False)
    hosts, measures = _probe_measures(world_size, every_pair)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "probe.yaml"
        gc.collect()
        c0 = time.process_time()
        save_topology(measured_topology(hosts, measures, gpus=True, per_node=not every_pair), path)
        write_s = time.process_time() - c0
        del measures
        size = path.stat().st_size
        gc.collect()
        c0 = time.process_time()
        topology = load_topology(path)
        load_s = time.process_time() - c0
    c0 = time.process_time()
    try:
        plan_layout(topology, world_size)
        planned = True
    except CollbenchError:  # placement notes a refusal, and the ranks run in rank order
        planned = False
    plan_s = time.process_time() - c0
    plan_mib = None
    if planned:
        gc.collect()
        tracemalloc.start()
        try:
            plan_layout(topology, world_size)
            plan_mib = tracemalloc.get_traced_memory()[1] / 2**20
        finally:
            tracemalloc.stop()
    return FileCost(mib=size / 2**20, write_s=write_s, load_s=load_s, plan_s=plan_s, planned=planned, plan_mib=plan_mib)


def _cost_text(cost: FileCost) -> str:
    if cost.load_s is None or cost.write_s is None or cost.plan_s is None:
        from collbench.fileio import MAX_TEXT_FILE_BYTES

        over = cost.mib * 2**20 > MAX_TEXT_FILE_BYTES
        return f"{cost.mib:10,.1f} (estimated{', over the read limit' if over else ''})"
    plan = f"{cost.plan_s:7.2f}" if cost.planned else f"{'refused':>7}"
    memory = f"{cost.plan_mib:9.1f}" if cost.plan_mib is not None else f"{'-':>9}"
    return f"{cost.mib:10,.1f} {cost.write_s:8.2f} {cost.load_s:7.2f} {plan} {memory}"


def topology_files(topology_at: tuple[int, ...], every_pair_at: tuple[int, ...]) -> dict[str, dict[str, object]]:
    """Measure :func:`topology_file_cost` at the sizes asked, print its table (80 columns), return the JSON part."""
    out: dict[str, dict[str, object]] = {}
    if not topology_at and not every_pair_at:
        return out
    print("the probe's topology file: rank 0 writes it, then reads and plans on it (CPU s)")
    print(f"{'ranks':>6} {'pairs':<10} {'MiB':>10} {'write s':>8} {'load s':>7} {'plan s':>7} {'plan MiB':>9}")
    per_link: float | None = None
    for n in sorted(set(topology_at) | set(every_pair_at)):
        costs: dict[str, FileCost] = {}
        if n in every_pair_at:
            costs["every_pair"] = topology_file_cost(n, every_pair=True)
            links = n * (n - 1) // 2
            per_link = (costs["every_pair"].mib * 2**20 - _devices_bytes(n)) / links
        elif per_link is not None:
            costs["every_pair"] = topology_file_cost(n, every_pair=False, per_link_bytes=per_link)
        if n in topology_at:
            costs["by_nodes"] = topology_file_cost(n, every_pair=False)
        for name, cost in costs.items():
            print(f"{n:>6} {name.replace('_', ' '):<10} {_cost_text(cost)}", flush=True)
        out[str(n)] = {
            name: {
                "mib": round(c.mib, 2),
                "write_s": None if c.write_s is None else round(c.write_s, 3),
                "load_s": None if c.load_s is None else round(c.load_s, 3),
                "plan_s": None if c.plan_s is None else round(c.plan_s, 3),
                "plan_mib": None if c.plan_mib is None else round(c.plan_mib, 2),
                "planned": c.planned,
            }
            for name, c in costs.items()
        }
    return out
