"""collbench at the scale its users run (issue 31, item 5): one rank's schedule build, and the store
traffic of a tune's decisions.

1. **Build.** A rank that runs a schedule builds only its own steps (``spec.build(..., rank=r)``,
   ``schedules/algorithms/_common.py``). For ring, two-tree, rabenseifner and recursive-doubling
   all-reduce, pairwise all-to-all and the dissemination barrier, at 64, 512, 4,096 and 16,384
   ranks: the one-rank build's CPU seconds (``time.process_time``, what the build costs whatever
   else the machine runs) and wall seconds, its peak Python memory (tracemalloc, in a second build:
   tracing slows the first several times), and its steps; for the ranks 0 and n/2, the larger of
   each. Beside it, as the reference, the whole build (every rank's steps, what every rank built
   before) at the sizes it finishes in reasonable time (``--whole-at``, 64 and 512). Targets: under
   1 s and under 64 MiB per rank at 16,384.
2. **Store traffic.** :func:`store_traffic`: rank 0's store operations per decision per rank in a
   simulated 4,096-rank tune (target: O(1) per rank): every rank a real ``JobSession`` on one
   counting store, decisions handed over by a broadcast wire in the process.
3. **A call of the Python API.** :func:`api_call_us`: the CPU microseconds ``collbench.torch.all_reduce``
   spends on one rank of n before any message, its plan already kept (choosing the rule, the plan's
   key on the rule set's layout, the plan cache's lookup), at the sizes of 1. Target: the same at
   every n (it was 1.7 ms at 16,384, rebuilding and hashing the layout's rings at every call).

4. **A tune's placement.** :func:`placement_cost`: under a launcher with ``--topology`` rank 0 alone
   reads the topology and plans; a rank other than 0 gets the layout's rings, trees and nodes and its
   own all-to-all partners (O(ranks)), where every sweep's plan sent it the whole layout, O(ranks^2)
   with the exchange order (``--placement-at``, 512 and 4,096).
5. **The probe's topology file.** ``scale_topology_file.topology_file_cost`` (beside this file): what
   rank 0 writes after ``discover --probe`` and what a launcher's ``tune --topology`` costs it to read
   and plan on (the calls ``placement`` makes), from probe data made in the process (nodes of 8 ranks;
   no launch at that size): by nodes (every pair within a node, a pair of ranks per pair of nodes for
   16 rounds, the rest inferred) at ``--topology-at`` (512, 4,096, 16,384), and every pair of ranks,
   the file before, at ``--every-pair-at`` (512; beyond it the size is the per-link bytes measured
   there times the pairs). Past 2,048 ranks the plan is over nodes (``layouts/nodes.py``); its CPU
   seconds and peak memory are rank 0's.

The last line is one JSON object::

    {"build_s": {"ring": {"16384": s, ...}, ...}, "build_mib": {...}, "build_wall_s": {...},
     "whole_build_s": {...}, "whole_build_mib": {...}, "store_ops_per_rank_per_decision": x,
     "api_call_us": {"16384": us, ...},
     "placement": {"4096": {"rank_kib": k, "rank_s": s, "whole_kib": k, "table_s": s}, ...},
     "topology_file": {"16384": {"by_nodes": {"mib": m, "write_s": s, "load_s": s, "plan_s": s,
                                              "plan_mib": m, "planned": bool}, "every_pair": {...}}, ...}}

``build_s`` is CPU seconds; ``store_ops_per_rank_per_decision`` counts every store operation any
rank asks in the simulated tune's decisions, divided by decisions and ranks.

    python benchmarks/bench_scale.py [--sizes 64,512,4096,16384] [--whole-at 64,512] [--store-ranks 4096]
        [--algos six|all|NAME,...] [--placement-at 512,4096] [--topology-at 512,4096,16384]
        [--every-pair-at 512]

``--algos all`` measures every registered algorithm with a schedule, the others on their heaviest op
for a rank (:data:`MORE`).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch.distributed as dist

# The probe's topology file (item 5) is measured beside this file (benchmarks/ is no package).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_topology_file import topology_files

from collbench.errors import NotApplicableError
from collbench.layouts.model import Layout
from collbench.schedules.ops import Op
from collbench.schedules.registry import get_algorithm

ALGORITHMS: dict[str, Op] = {
    "ring": Op.ALL_REDUCE,
    "two-tree": Op.ALL_REDUCE,
    "rabenseifner": Op.ALL_REDUCE,
    "recursive-doubling": Op.ALL_REDUCE,
    "pairwise": Op.ALL_TO_ALL,
    "dissemination": Op.BARRIER,
}
"""The algorithms measured, each with the op it is measured on."""

MORE: dict[str, Op] = {
    "hierarchical": Op.ALL_REDUCE,
    "tree": Op.ALL_REDUCE,
    "bruck": Op.ALL_TO_ALL,
    "topo-pairwise": Op.ALL_TO_ALL,
    "binomial": Op.SCATTER,
    "blelloch": Op.SCAN,
    "direct": Op.ALL_REDUCE,
    "one-shot": Op.ALL_REDUCE,
    "linear": Op.ALL_TO_ALL,
}
"""Every other registered algorithm with a schedule (``--algos all``), on its heaviest op for a rank:
hierarchical on nodes of :data:`NODE_RANKS` ranks, the rooted ones with rank 0 as the root."""

NODE_RANKS = 8
"""Ranks per node of hierarchical's layout (consecutive ranks, as a launcher places them)."""

COUNT = 1 << 24
"""Elements of the buffer (64 MiB of float32): every rank holds data at 16,384 ranks."""


@dataclass(frozen=True, slots=True)
class BuildCost:
    """One build's cost: the largest over the ranks measured."""

    cpu_s: float
    wall_s: float
    peak_mib: float
    steps: int
    """The steps of the rank measured (the most of them), or every rank's together for a whole build."""


def build_cost(algo: str, world_size: int, *, whole: bool = False, count: int = COUNT) -> BuildCost:
    """The cost of building ``algo``'s schedule at ``world_size`` ranks: one rank's (0 and n/2, the
    larger of each), or with ``whole`` every rank's (the reference)."""
    spec = get_algorithm(algo)
    op = {**ALGORITHMS, **MORE}[algo]
    layout = nodes_layout(world_size) if spec.needs_nodes else None
    ranks: list[int | None] = [None] if whole else sorted({0, world_size // 2})
    cpu = wall = mib = 0.0
    steps = 0
    for rank in ranks:
        # Every timed build starts from a collected heap, so none pays for a collection the one
        # before left pending (ring at 16,384: 0.24 s of CPU from a collected heap, 0.43 s without).
        # The traced build needs none: a schedule holds no cycles, what the timed one made is freed
        # when it is dropped. (A collection walks every object the process holds: 0.3 s in a test
        # process under load.)
        gc.collect()
        c0, w0 = time.process_time(), time.perf_counter()
        schedule = spec.build(op, world_size, count, layout=layout, rank=rank)
        cpu, wall = max(cpu, time.process_time() - c0), max(wall, time.perf_counter() - w0)
        steps = max(steps, sum(len(s) for s in schedule.steps))
        del schedule
        tracemalloc.start()
        try:
            spec.build(op, world_size, count, layout=layout, rank=rank)
            mib = max(mib, tracemalloc.get_traced_memory()[1] / 2**20)
        finally:
            tracemalloc.stop()
    return BuildCost(cpu, wall, mib, steps)


def nodes_layout(world_size: int) -> Layout:
    """Nodes of :data:`NODE_RANKS` consecutive ranks (at least two nodes; fewer ranks a node below
    ``2 * NODE_RANKS``); hierarchical refuses nodes of different sizes, as it does on a real job."""
    per = min(NODE_RANKS, max(world_size // 2, 1))
    nodes = tuple(tuple(range(a, min(a + per, world_size))) for a in range(0, world_size, per))
    return Layout(nodes=nodes, name=f"nodes of {per}")


TUNE_DECISIONS = 4
"""The decisions of a full tune under a launcher: rank 0's files checked, then one per tie round at
most (``THOROUGH``: rounds 3 to 5)."""


class CountingStore(dist.Store):
    """Rank 0's store, in memory, counting every operation a rank asks of it (torch's ``Store`` API:
    the calls ``TCPStore`` serves on rank 0's host). Keys hold bytes; a queue key a list of them."""

    def __init__(self) -> None:
        super().__init__()
        self.ops = 0
        self._keys: dict[str, bytes] = {}
        self._queues: dict[str, list[bytes]] = {}

    def set(self, key: str, value: object) -> None:  # type: ignore[override]
        self.ops += 1
        self._keys[key] = value if isinstance(value, bytes) else str(value).encode()

    def get(self, key: str) -> bytes:  # type: ignore[override]
        self.ops += 1
        return self._keys[key]

    def add(self, key: str, amount: int) -> int:  # type: ignore[override]
        self.ops += 1
        value = int(self._keys.get(key, b"0")) + amount
        self._keys[key] = str(value).encode()
        return value

    def check(self, keys: list[str]) -> bool:  # type: ignore[override]
        self.ops += 1
        return all(k in self._keys for k in keys)

    def queue_push(self, key: str, value: bytes) -> None:  # type: ignore[override]
        self.ops += 1
        self._queues.setdefault(key, []).append(value)

    def queue_pop(self, key: str, block: bool = True) -> bytes:  # type: ignore[override]
        self.ops += 1
        queue = self._queues.get(key)
        if not queue:
            raise dist.QueueEmptyError(f"queue {key} is empty")
        return queue.pop(0)

    def queue_len(self, key: str) -> int:  # type: ignore[override]
        self.ops += 1
        return len(self._queues.get(key, []))


def store_traffic(world_size: int, decisions: int = TUNE_DECISIONS) -> float:
    """Rank 0's store operations per decision per rank in a simulated tune of ``world_size`` ranks.

    Every rank is a ``JobSession`` (the real one) on one counting store, its process group made (as
    the tune's first step makes it) and its broadcast a wire that hands each rank what rank 0 sent, in
    order (``dist.broadcast``'s contract). Each decision runs on rank 0, then on every other rank;
    every operation any rank asks of the store is counted. Prints the figure and what rank 0 itself
    asked; returns operations / (decisions x ranks).
    """
    import torch

    from collbench.runtime.launch.launchers import JobEnv
    from collbench.runtime.launch.rankstore import SignedStore, new_token
    from collbench.runtime.launch.session import JobSession, KeptGroup

    store = CountingStore()
    token = new_token()
    sent: list[torch.Tensor] = []
    read = [0] * world_size

    def wire(rank: int) -> Callable[[torch.Tensor, object], None]:
        def broadcast(tensor: torch.Tensor, group: object) -> None:
            if rank == 0:
                sent.append(tensor.clone())
                return
            tensor.copy_(sent[read[rank]])
            read[rank] += 1

        return broadcast

    def never(prefix: str) -> None:
        raise AssertionError("the group was made by the tune's first step")

    sessions = []
    for rank in range(world_size):
        job = JobEnv(
            launcher="torchrun", rank=rank, world_size=world_size, local_rank=rank % 8, local_world_size=8,
            master_addr="10.0.0.1", master_port=29500,
        )  # fmt: skip
        session = JobSession(job, store)
        session.signed = SignedStore(store, token)
        session.kept = KeptGroup("gloo", never, made=True)
        session.broadcast = wire(rank)
        sessions.append(session)
    ties = [["all-reduce", [[size, algo] for size in (1 << 20, 16 << 20) for algo in ("ring", "rabenseifner")]]]
    rank0_ops = 0
    for index in range(decisions):
        before = store.ops
        decided = sessions[0].agree(f"which points round {index} re-measures", lambda: ties, 60.0, ())
        rank0_ops += store.ops - before
        for session in sessions[1:]:
            assert session.agree(f"which points round {index} re-measures", lambda: None, 60.0, ()) == decided
    per_rank = store.ops / (decisions * world_size)
    print(f"store: {decisions} decisions of {world_size} ranks: {store.ops} operations in all")
    print(f"  {per_rank:.3f} per rank per decision, {rank0_ops / decisions:.0f} of them rank 0's own;")
    print(f"  {len(sent) // decisions} broadcasts per decision")
    return per_rank


API_CALLS = 200
"""Calls of the Python API timed at each size (after one that builds and keeps the plan)."""


def api_call_us(world_size: int, calls: int = API_CALLS) -> float:
    """CPU microseconds per ``collbench.torch.all_reduce`` on rank 1 of ``world_size`` (0 of 1), before any message.

    The profile holds one ring rule measured on its rule set's layout (two rings and a tree over every
    rank, as a tune records one); torch.distributed answers the group's size and rank, the group's nodes
    are the ones its first call gathered (kept per group), and the runner's ``run`` (the messages, what a
    launch would time) does nothing. The first call builds the plan.
    """
    from unittest import mock

    import torch
    import torch.distributed as dist

    import collbench.torch as ctorch
    import collbench.torch.rules as torch_rules
    from collbench.profile.document import Profile, ProfileLayout, RuleSet
    from collbench.profile.rules import Rule
    from collbench.runtime.executor.schedule_runner import ScheduleRunner

    ring = tuple(range(world_size))
    layout = ProfileLayout("topology", rings=(ring, ring[::-1]), trees=((-1, *range(world_size - 1)),))
    rules = (Rule(Op.ALL_REDUCE, 0, None, "ring", {"segment_bytes": None, "layout": "topology"}),)
    rule_set = RuleSet(world_size, max(1, world_size // NODE_RANKS), rules, layout=layout)
    profile = Profile(fingerprint="bench", host="bench", backend="gloo", rule_sets=(rule_set,))
    tensor = torch.zeros(1024)
    with (
        mock.patch.object(dist, "is_initialized", lambda: True),
        mock.patch.object(dist, "get_world_size", lambda group=None: world_size),
        mock.patch.object(dist, "get_rank", lambda group=None: min(1, world_size - 1)),
        mock.patch.object(ScheduleRunner, "run", lambda self, buffer, redop: None),
        # The group's nodes, as membership.GROUPS holds them after the group's first call (one gather).
        mock.patch.object(torch_rules, "group_nodes", lambda group: (rule_set.nodes, False)),
    ):
        ctorch.all_reduce(tensor, profile)
        c0 = time.process_time()
        for _ in range(calls):
            ctorch.all_reduce(tensor, profile)
        return (time.process_time() - c0) / calls * 1e6


@dataclass(frozen=True, slots=True)
class PlacementCost:
    """What a rank other than 0 of a launcher's ``tune --topology`` receives of rank 0's layout, and
    what it received before (the whole layout, which every sweep's plan broadcast to every rank)."""

    rank_kib: float
    """The decision (rings, trees, nodes: JSON) and the rank's all-to-all partners (int32)."""
    rank_s: float
    """CPU seconds for the rank to make its layout from them (``tuning.placement``, the real code)."""
    whole_kib: float
    """The whole layout pickled, as the sweep's plan sent it to every rank before."""
    table_s: float
    """Rank 0's CPU seconds to make the partners' table it scatters (once per tune)."""


def placement_cost(world_size: int) -> PlacementCost:
    """:class:`PlacementCost` of a layout of ``world_size`` ranks as a probe's plan gives one: two rings,
    two trees, nodes of :data:`NODE_RANKS`, and an exchange order that is not the round-robin one (the
    tournament's rounds reversed), so every rank's partners travel. The job's decision and scatter are
    played by their contracts in the process (``session.agree``: rank 0's value through JSON;
    ``handout.hand_out``: row r of rank 0's table on rank r); planning on a probe topology of 4,096
    ranks is not what is measured (rank 0 alone does it now, once)."""
    import pickle
    from pathlib import Path
    from types import SimpleNamespace
    from unittest import mock

    import torch

    from collbench.layouts.exchange import round_robin_rounds
    from collbench.runtime.launch import handout, ranks, session
    from collbench.runtime.launch.rankstore import encode
    from collbench.tuning import placement
    from collbench.tuning.config import TuneConfig

    n = world_size
    ring = tuple(range(n))
    whole = Layout(
        rings=(ring, ring[::-1]),
        trees=((-1, *range(n - 1)), (*range(1, n), -1)),
        name="topology",
        ring_bandwidths_gbps=(1.0, 1.0),
        exchange_rounds=tuple(reversed(round_robin_rounds(n))),
        nodes=nodes_layout(n).nodes,
    )
    shape = placement._shape(whole)
    decision = json.dumps(encode(shape)).encode()
    c0 = time.process_time()
    table = torch.tensor(whole.exchange_rounds, dtype=torch.int32).t().contiguous()
    table_s = time.process_time() - c0
    rank = n // 2
    mine = [int(v) for v in table[rank].tolist()]
    del table
    config = TuneConfig(ranks=None, topology_path=Path("probe.yaml"), output=Path("p.yaml"))
    with (
        mock.patch.object(ranks, "joined_job", lambda: SimpleNamespace(rank=rank, world_size=n)),
        mock.patch.object(session, "agree", lambda name, decide, **_: json.loads(decision)),
        mock.patch.object(handout, "hand_out", lambda name, table, width, **_: mine),
    ):
        gc.collect()
        c0 = time.process_time()
        got = placement.plan_placement(config, [])
        rank_s = time.process_time() - c0
    assert got.layout == whole.for_rank(rank)
    return PlacementCost(
        rank_kib=(len(decision) + 4 * len(mine)) / 1024,
        rank_s=rank_s,
        whole_kib=len(pickle.dumps(whole)) / 1024,
        table_s=table_s,
    )


def _table_row(algo: str, n: int, one: BuildCost, ref: BuildCost | None) -> str:
    whole = f"{ref.cpu_s * 1e3:10.1f} {ref.peak_mib:9.1f}" if ref else f"{'-':>10} {'-':>9}"
    one_ms = f"{one.cpu_s * 1e3:8.1f} {one.wall_s * 1e3:8.1f}"
    return f"{algo:<18} {n:>6} {one_ms} {one.peak_mib:7.1f} {one.steps:>6} {whole}"


def run(
    sizes: list[int],
    whole_at: list[int],
    store_ranks: int,
    algos: tuple[str, ...] = tuple(ALGORITHMS),
    placement_at: tuple[int, ...] = (),
    topology_at: tuple[int, ...] = (),
    every_pair_at: tuple[int, ...] = (),
) -> dict[str, object]:
    """Measure, print the table (80 columns), and return the JSON object."""
    build_s: dict[str, dict[str, float]] = {}
    build_wall_s: dict[str, dict[str, float]] = {}
    build_mib: dict[str, dict[str, float]] = {}
    whole_s: dict[str, dict[str, float]] = {}
    whole_mib: dict[str, dict[str, float]] = {}
    print("one rank's build (ranks 0 and n/2, the larger) beside the whole build")
    print(f"{'algorithm':<18} {'ranks':>6} {'cpu ms':>8} {'wall ms':>8} {'MiB':>7} {'steps':>6}", end=" ")
    print(f"{'whole ms':>10} {'whole MiB':>9}")
    for algo in algos:
        for n in sizes:
            try:
                one = build_cost(algo, n)
            except NotApplicableError as exc:
                # hierarchical on one node (or nodes of different sizes): nothing to build, said so.
                print(f"{algo:<18} {n:>6} {str(exc)[:53]}", flush=True)
                continue
            ref = build_cost(algo, n, whole=True) if n in whole_at else None
            print(_table_row(algo, n, one, ref), flush=True)
            build_s.setdefault(algo, {})[str(n)] = round(one.cpu_s, 4)
            build_wall_s.setdefault(algo, {})[str(n)] = round(one.wall_s, 4)
            build_mib.setdefault(algo, {})[str(n)] = round(one.peak_mib, 2)
            if ref is not None:
                whole_s.setdefault(algo, {})[str(n)] = round(ref.cpu_s, 4)
                whole_mib.setdefault(algo, {})[str(n)] = round(ref.peak_mib, 2)
    store = store_traffic(store_ranks)
    api_us: dict[str, float] = {}
    for n in sizes:
        api_us[str(n)] = round(api_call_us(n), 1)
        print(f"collbench.torch.all_reduce at {n} ranks, plan kept: {api_us[str(n)]:.1f} us CPU a call", flush=True)
    placed: dict[str, dict[str, float]] = {}
    for n in placement_at:
        cost = placement_cost(n)
        placed[str(n)] = {
            "rank_kib": round(cost.rank_kib, 1),
            "rank_s": round(cost.rank_s, 4),
            "whole_kib": round(cost.whole_kib, 1),
            "table_s": round(cost.table_s, 3),
        }
        print(
            f"placement, {n} ranks: {cost.rank_kib:,.0f} KiB, {cost.rank_s:.3f} s CPU a rank "
            f"(was {cost.whole_kib / 1024:,.1f} MiB a sweep)",
            flush=True,
        )
    files = topology_files(topology_at, every_pair_at)
    return {
        "build_s": build_s,
        "build_mib": build_mib,
        "build_wall_s": build_wall_s,
        "whole_build_s": whole_s,
        "whole_build_mib": whole_mib,
        "store_ops_per_rank_per_decision": store,
        "api_call_us": api_us,
        "placement": placed,
        "topology_file": files,
    }


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=_ints, default=[64, 512, 4096, 16384], help="world sizes (ranks)")
    parser.add_argument("--whole-at", type=_ints, default=[64, 512], help="world sizes of the whole build too")
    parser.add_argument("--store-ranks", type=int, default=4096, help="ranks of the simulated tune")
    parser.add_argument(
        "--placement-at", type=_ints, default=[512, 4096], help="ranks of the tune --topology hand-over"
    )
    parser.add_argument(
        "--topology-at", type=_ints, default=[512, 4096, 16384], help="ranks of the probe's topology file, by nodes"
    )
    parser.add_argument(
        "--every-pair-at", type=_ints, default=[512], help="ranks of the probe's file listing every pair (before)"
    )
    parser.add_argument(
        "--algos",
        default="six",
        help="six (issue 31's: ring, two-tree, rabenseifner, recursive-doubling, pairwise, dissemination), "
        "all (every registered schedule), or names with commas",
    )
    args = parser.parse_args(argv)
    known = {**ALGORITHMS, **MORE}
    names = {"six": tuple(ALGORITHMS), "all": tuple(known)}.get(args.algos) or tuple(args.algos.split(","))
    if unknown := [a for a in names if a not in known]:
        parser.error(f"unknown algorithm {', '.join(unknown)}; known: {', '.join(known)}")
    placement, topology, every = tuple(args.placement_at), tuple(args.topology_at), tuple(args.every_pair_at)
    print(json.dumps(run(args.sizes, args.whole_at, args.store_ranks, names, placement, topology, every)))


if __name__ == "__main__":
    main()
