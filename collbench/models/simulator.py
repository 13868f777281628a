"""Price a schedule (``collbench.schedules.ir``) on a topology: when does the last rank finish?

The model is the one ``costs.py`` writes in closed form, applied to the real schedule:

* a transfer (the k-th send from a to b matched with the k-th receive on b from a, FIFO per ordered
  pair) starts when both ranks have started the steps that hold it (rendezvous);
* it lands ``latency(a->b) + max(out(a), in(b))`` later, where ``out(a)`` is the time rank a's port needs
  for every byte it sends in that step (``bytes * us_per_byte`` of each link, summed: one port,
  full duplex) and ``in(b)`` the same for what b receives in its step: messages of a step share the port;
* a rank's step ends when its last transfer (sent or received) has landed, plus the reduction cost
  ``gamma * bytes reduced`` of that step; its next step starts then;
* the schedule's time is when the last rank finishes.

A transfer to oneself (all-to-all's own block, ir.py) is a local copy: no link, no latency, free at
this model's resolution (memory moves far faster than any link it prices). A step holding nothing
else ends when it starts. A barrier's token carries no data: its transfers cost latency only.

Link parameters come from a :class:`~collbench.topology.model.Topology` (per pair of rank devices:
bandwidth, and ``latency_us`` where known, else a default) or from fitted alpha/beta, uniform, with
optional different parameters between nodes (:class:`UniformLinks`).

Scale, honestly: a ring all-reduce schedule on p ranks has 2p(p-1) transfers, so building and pricing
real schedules is done up to a few hundred ranks (``MAX_SIMULATED_RANKS``). ``predict`` at thousands of
ranks uses the closed forms of ``costs.py``, which tests cross-check against this simulator at small p:
with unit latency and free bytes the simulated time is the closed form's step count; with free latency
and one microsecond per byte it is the closed form's byte term.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Protocol

from collbench.errors import ConfigError
from collbench.schedules.ir import Schedule
from collbench.topology.model import Topology

MAX_SIMULATED_RANKS = 512
DEFAULT_LATENCY_US = 2.0
"""Per-hop latency where a topology gives none (NCCL's per-hop figures are 0.6-5.7 us intra-node)."""


@dataclass(frozen=True, slots=True)
class LinkCost:
    latency_us: float
    us_per_byte: float


class LinkModel(Protocol):
    def cost(self, src: int, dst: int) -> LinkCost: ...


@dataclass(frozen=True, slots=True)
class UniformLinks:
    """The same latency and per-byte cost between every two ranks; optionally others between nodes.

    With ``nodes > 1`` ranks are spread in blocks (ranks 0..p/M-1 on node 0, ...); pairs on different
    nodes use ``inter_latency_us``/``inter_us_per_byte`` (default: the same as within a node).
    """

    latency_us: float
    us_per_byte: float
    world_size: int = 1
    nodes: int = 1
    inter_latency_us: float | None = None
    inter_us_per_byte: float | None = None

    def __post_init__(self) -> None:
        if self.nodes < 1 or (self.nodes > 1 and self.world_size % self.nodes):
            raise ConfigError(f"{self.world_size} ranks do not spread evenly over {self.nodes} nodes")

    def cost(self, src: int, dst: int) -> LinkCost:
        if self.nodes > 1:
            per_node = self.world_size // self.nodes
            if src // per_node != dst // per_node:
                return LinkCost(
                    self.latency_us if self.inter_latency_us is None else self.inter_latency_us,
                    self.us_per_byte if self.inter_us_per_byte is None else self.inter_us_per_byte,
                )
        return LinkCost(self.latency_us, self.us_per_byte)


@dataclass(frozen=True, slots=True)
class TopologyLinks:
    """Links between the topology's rank devices (GPUs, or CPU ranks); bandwidth per direction."""

    topology: Topology
    default_latency_us: float = DEFAULT_LATENCY_US

    def cost(self, src: int, dst: int) -> LinkCost:
        link = self.topology.rank_link(src, dst)
        if link is None or link.bandwidth_gbps <= 0:
            raise ConfigError(
                f"the topology has no link with a bandwidth between ranks {src} and {dst}; "
                "give a topology that connects every pair of ranks"
            )
        latency = link.latency_us if link.latency_us is not None else self.default_latency_us
        # GB/s is 10^9 bytes/s = 10^3 bytes/us.
        return LinkCost(latency, 1e-3 / link.bandwidth_gbps)


@dataclass(frozen=True, slots=True)
class SimResult:
    time_us: float
    """When the last rank finishes."""
    rank_end_us: tuple[float, ...]
    busiest_link_bytes: int
    """The most bytes any directed link carries over the whole schedule."""
    transfers: int


@dataclass
class _Transfer:
    src: int
    src_step: int
    dst: int
    dst_step: int
    nbytes: int


def _match(schedule: Schedule, elem_bytes: int) -> tuple[list[list[list[_Transfer]]], int]:
    """Transfers per (rank, step), sends and receives both listed; and the busiest link's bytes."""
    schedule.require_whole("the simulator")
    p = schedule.world_size
    sends: dict[tuple[int, int], deque[tuple[int, int]]] = {}
    for r, steps in enumerate(schedule.steps):
        for k, step in enumerate(steps):
            for s in step.sends:
                if s.peer != r:
                    sends.setdefault((r, s.peer), deque()).append((k, s.count))
    per_step: list[list[list[_Transfer]]] = [[[] for _ in steps] for steps in schedule.steps]
    link_bytes: dict[tuple[int, int], int] = {}
    for r, steps in enumerate(schedule.steps):
        for k, step in enumerate(steps):
            for rv in step.recvs:
                if rv.peer == r:
                    continue
                queue = sends.get((rv.peer, r))
                if not queue:
                    raise ConfigError(f"{schedule.algo}: rank {r} receives from {rv.peer} more than it is sent")
                sk, count = queue.popleft()
                t = _Transfer(rv.peer, sk, r, k, count * elem_bytes)
                per_step[rv.peer][sk].append(t)
                per_step[r][k].append(t)
                link_bytes[(rv.peer, r)] = link_bytes.get((rv.peer, r), 0) + t.nbytes
    if any(q for q in sends.values()):
        raise ConfigError(f"{schedule.algo}: a send has no matching receive")
    assert len(per_step) == p
    return per_step, max(link_bytes.values(), default=0)


def simulate(
    schedule: Schedule,
    links: LinkModel,
    *,
    elem_bytes: int = 4,
    gamma_us_per_byte: float = 0.0,
) -> SimResult:
    """Price ``schedule`` on ``links``: see the module docstring for the model. Times in microseconds.

    Raises ConfigError for a schedule whose sends and receives do not match, one that deadlocks, or
    one larger than ``MAX_SIMULATED_RANKS``.
    """
    p = schedule.world_size
    if p > MAX_SIMULATED_RANKS:
        raise ConfigError(f"simulating {p} ranks is too slow; the closed forms (costs.py) price that size")
    if not schedule.op.spec.payload:
        # A barrier's token carries no data: its transfers cost their latency only.
        elem_bytes = 0
    per_step, busiest = _match(schedule, elem_bytes)
    cost_cache: dict[tuple[int, int], LinkCost] = {}

    def link(a: int, b: int) -> LinkCost:
        key = (a, b)
        if key not in cost_cache:
            cost_cache[key] = links.cost(a, b)
        return cost_cache[key]

    # Port times of each (rank, step): what it sends, what it receives.
    out_time: list[list[float]] = []
    in_time: list[list[float]] = []
    reduce_bytes: list[list[int]] = []
    for r, steps in enumerate(schedule.steps):
        out_time.append(
            [sum(s.count * elem_bytes * link(r, s.peer).us_per_byte for s in st.sends if s.peer != r) for st in steps]
        )
        in_time.append(
            [sum(v.count * elem_bytes * link(v.peer, r).us_per_byte for v in st.recvs if v.peer != r) for st in steps]
        )
        reduce_bytes.append([sum(v.count * elem_bytes for v in st.recvs if v.reduce) for st in steps])

    start: list[list[float | None]] = [[None] * len(steps) for steps in schedule.steps]
    end: list[list[float | None]] = [[None] * len(steps) for steps in schedule.steps]
    nxt = [0] * p
    for r in range(p):
        if schedule.steps[r]:
            start[r][0] = 0.0
    pending = deque(range(p))
    queued = [True] * p
    done_steps = 0
    total_steps = sum(len(s) for s in schedule.steps)
    while pending:
        r = pending.popleft()
        queued[r] = False
        advanced = False
        while nxt[r] < len(schedule.steps[r]):
            k = nxt[r]
            s0 = start[r][k]
            assert s0 is not None
            finish = s0
            ready = True
            for t in per_step[r][k]:
                peer, peer_step = (t.dst, t.dst_step) if t.src == r else (t.src, t.src_step)
                peer_start = start[peer][peer_step]
                if peer_start is None:
                    ready = False
                    break
                begin = max(start[t.src][t.src_step] or 0.0, start[t.dst][t.dst_step] or 0.0)
                port = max(out_time[t.src][t.src_step], in_time[t.dst][t.dst_step])
                finish = max(finish, begin + link(t.src, t.dst).latency_us + port)
            if not ready:
                break
            e = finish + gamma_us_per_byte * reduce_bytes[r][k]
            end[r][k] = e
            if k + 1 < len(schedule.steps[r]):
                start[r][k + 1] = e
            nxt[r] += 1
            done_steps += 1
            advanced = True
        if advanced:
            # Ranks waiting on this one may go on now.
            for q in _peers(per_step, r):
                if not queued[q] and nxt[q] < len(schedule.steps[q]):
                    queued[q] = True
                    pending.append(q)
    if done_steps != total_steps:
        stuck = [r for r in range(p) if nxt[r] < len(schedule.steps[r])]
        raise ConfigError(f"{schedule.algo}: the schedule deadlocks (ranks {stuck[:8]} cannot go on)")
    rank_end = tuple(max((e for e in end[r] if e is not None), default=0.0) for r in range(p))
    transfers = sum(len(ts) for steps in per_step for ts in steps) // 2
    return SimResult(max(rank_end, default=0.0), rank_end, busiest, transfers)


def _peers(per_step: list[list[list[_Transfer]]], r: int) -> set[int]:
    peers: set[int] = set()
    for ts in per_step[r]:
        for t in ts:
            peers.add(t.dst if t.src == r else t.src)
    return peers


def simulate_terms(schedule: Schedule, *, elem_bytes: int = 4) -> tuple[float, float, float]:
    """The schedule's (steps, bytes, reduced bytes) along its critical path, as ``costs.CostTerms``.

    Three runs on uniform links: unit latency and free bytes (steps), free latency and 1 us per byte
    (bytes), free links and 1 us per reduced byte (reduced bytes).
    """
    p = schedule.world_size
    steps = simulate(schedule, UniformLinks(1.0, 0.0, p), elem_bytes=elem_bytes).time_us
    nbytes = simulate(schedule, UniformLinks(0.0, 1.0, p), elem_bytes=elem_bytes).time_us
    reduced = simulate(schedule, UniformLinks(0.0, 0.0, p), elem_bytes=elem_bytes, gamma_us_per_byte=1.0).time_us
    return steps, nbytes, reduced
