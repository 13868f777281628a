"""Measured links: one-way latency and point-to-point bandwidth between pairs of ranks.

``probe_topology`` runs a worker on every rank (local processes, or this process as one rank of a
torchrun, mpirun or srun job) through :func:`collbench.runtime.launch.ranks.launch`. Pairs are
measured in the rounds of a round-robin tournament (the circle method): within a round every rank
is in at most one pair, so a rank's own link never carries two measurements. Each rank computes
its own partner per round (:func:`partner`, O(1)), and the rounds are not separated by barriers:
a rank goes on to its next pair as soon as its last one is done, and waits only for that partner
(ranks still take the rounds in the same order, so the rank furthest behind can always go on, and
nothing waits in a cycle). Per pair:

* latency: small ping-pongs (8 bytes), after warm-ups; one-way latency = median round trip / 2;
* bandwidth, per direction and repeat: the sender first sizes the transfer to last about
  ``target_s`` from a 256 KiB trial (clamped to 256 KiB..64 MiB), then times one large send until the
  receiver's 1-element acknowledgement comes back, less one one-way latency. The median of the repeats
  is kept, per direction, and how far they lay apart ((max - min) / median); the link records the mean
  of the two directions (links are symmetric in the model), the wider direction's spread and the latency.

**Pairs at scale.** Every pair of ranks is n(n-1)/2 pairs in n-1 rounds, and a file that lists them
grows as n^2. Up to :data:`ALL_PAIRS_MAX_RANKS` ranks (``pairs="auto"``) that is what is measured:
small jobs see every pair. Beyond it (or with ``pairs="nodes"``) the probe measures what the
topology's ``node_links`` hold: within each node every pair of its ranks (all nodes at once, in the
rounds of the node's own tournament), then, between nodes, one pair of ranks per pair of nodes (the
nodes' first ranks) in the first :data:`NODE_ROUNDS` rounds of a tournament over the nodes, so every
pair of nodes up to 17 nodes and 16 other nodes each beyond. The pairs of nodes left out are
``inferred``: the median of the pairs of nodes measured, and the file and ``discover`` say so.

The measurements are gathered to rank 0 alone (``gather_object``: each rank sends its own, rank 0
receives them all), which builds the topology and writes it; the other ranks return None.
Without barriers ranks drift apart (one with slow links holds up each partner it meets), and the
last wait, rank 0's for the slowest rank, can last nearly the whole probe: so the default timeout
grows with the rounds, :func:`default_timeout_s`.

On GPUs the clock is the device's: with NCCL, ``dist.send``/``recv`` return when the work is queued
and ``Work.wait()`` only orders streams (torch's ProcessGroupNCCL: ``WorkNCCL::wait`` makes the
current stream wait on NCCL's), so host time around them measures queueing, not the transfer. There,
CUDA events recorded on the current stream bracket the whole ping-pong (send, then the receive of
the answer, which cannot complete before the peer got the data), and the elapsed time is read after
synchronising the end event. A measured bandwidth above what its link can physically carry (the
known link's nominal speed with a margin, or ``MAX_LINK_GBPS`` for any link) is refused in one line:
such a number would feed ``layout`` and ``sweep --topology`` silently.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from collbench.backends import backend_named
from collbench.backends.gloo import GLOO
from collbench.errors import ConfigError, HardwareError
from collbench.runtime.launch.ranks import RankContext, joined_job, launch
from collbench.runtime.probe_pairs import NODE_ROUNDS, Pairs, by_nodes
from collbench.topology.model import Device, DeviceKind, Link, LinkKind, NodeLink, Topology

_TRIAL_BYTES = 256 * 1024
_MAX_BYTES = 64 * 1024 * 1024
MAX_LINK_GBPS = 1000.0
"""No link carries more per direction: NVLink 5's 18 links give a Blackwell GPU 900 GB/s in all."""
NOMINAL_MARGIN = 1.25
"""A measured link may beat its nominal speed by this much (rounding of nominal figures, caches)."""


class _Stopwatch:
    """Seconds between ``start`` and ``stop``: CUDA events on the current stream on GPUs, else the host clock."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self._t0 = 0.0
        self._events: tuple[Any, Any] | None = None

    def start(self) -> None:
        if self.cuda:
            # Whatever ran before (the previous transfer, the allocation) is done before timing starts.
            torch.cuda.synchronize()
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            self._events = (begin, end)
        else:
            self._t0 = time.perf_counter()

    def stop(self) -> float:
        if self._events is not None:
            begin, end = self._events
            end.record()
            end.synchronize()
            self._events = None
            return float(begin.elapsed_time(end)) / 1e3
        return time.perf_counter() - self._t0


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeConfig:
    """What the probe measures and how long it may take per measurement."""

    repeats: int = 3
    """Bandwidth measurements per direction (the median is kept)."""
    pings: int = 20
    """Timed small ping-pongs per pair (after 3 warm-ups)."""
    target_s: float = 0.2
    """How long one bandwidth transfer should last, seconds."""
    node_rounds: int = NODE_ROUNDS
    """By nodes, the rounds of the tournament over the nodes measured (each node meets that many others)."""


@dataclass(frozen=True, slots=True)
class PairMeasure:
    """What rank ``src`` measured towards ``dst``."""

    src: int
    dst: int
    latency_us: float
    bandwidth_gbps: float
    spread_pct: float = 0.0
    """How far the repeats of the bandwidth lay apart: (max - min) / median, in %."""


def round_robin_rounds(n: int) -> list[list[tuple[int, int]]]:
    """Rounds of disjoint pairs covering every pair of ``n`` ranks once (circle method), pairs (a<b)."""
    players = list(range(n)) + ([-1] if n % 2 else [])
    m = len(players)
    rounds: list[list[tuple[int, int]]] = []
    for _ in range(m - 1):
        pairs = []
        for i in range(m // 2):
            a, b = players[i], players[m - 1 - i]
            if a != -1 and b != -1:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(pairs)
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def partner(n: int, rank: int, round_index: int) -> int | None:
    """``rank``'s partner in round ``round_index`` of :func:`round_robin_rounds` (None: it sits out).

    The circle method without its table: rank 0 stays put and the others turn one place a round,
    so a rank finds its partner in O(1) (the table is O(n^2) on every rank: 16,384 ranks would hold
    134 million pairs each).
    """
    m = n + n % 2
    turn = m - 1
    if rank == 0:
        other = 1 + (turn - 1 - round_index) % turn
    else:
        place = 1 + (rank - 1 + round_index) % turn
        facing = m - 1 - place
        other = 0 if facing == 0 else 1 + (facing - 1 - round_index) % turn
    return other if other < n else None


def rounds_for(n: int) -> int:
    """How many rounds the probe of ``n`` ranks takes (``n - 1``, or ``n`` for odd ``n``)."""
    return n - 1 + n % 2


TIMEOUT_BASE_S = 60.0
"""What the probe's default timeout allows for starting (joining the job) whatever the rounds."""


NODE_RANKS_BOUND = 72
"""The ranks of a node the default timeout of a probe by nodes allows for (the node sizes are known only
once the ranks have joined): GPU nodes hold 4-16, and a larger one wants ``--timeout``."""


def default_timeout_s(n: int, config: ProbeConfig | None = None, pairs: Pairs = "all") -> float:
    """The probe's default timeout for ``n`` ranks: :data:`TIMEOUT_BASE_S` plus 4 x (repeats + 1) x
    target_s per round (3.2 s at the defaults): each pair times two directions of repeats + 1 sized
    transfers (twice that for its trial and latency and for a slower rank's drift). Without barriers the
    last wait (rank 0's gather) may span the whole probe, so it grows with its rounds: every pair, 70 s
    at 4 ranks, 108 s at 16; by nodes (``pairs``, :func:`by_nodes`), a node's rounds up to
    :data:`NODE_RANKS_BOUND` ranks and :data:`NODE_ROUNDS` between nodes, 338 s at any size."""
    cfg = config or ProbeConfig()
    rounds = rounds_for(min(n, NODE_RANKS_BOUND)) + cfg.node_rounds if by_nodes(pairs, n) else rounds_for(n)
    return TIMEOUT_BASE_S + rounds * 4 * (cfg.repeats + 1) * cfg.target_s


def _ping_pong(ctx: RankContext, peer: int, leader: bool, pings: int) -> float:
    """Median round trip in microseconds (leader's view; the follower returns 0)."""
    buf = torch.zeros(2, dtype=torch.float32, device=ctx.device)
    times: list[float] = []
    clock = _Stopwatch(ctx.device)
    for k in range(pings + 3):
        if leader:
            clock.start()
            dist.send(buf, peer)
            dist.recv(buf, peer)
            elapsed = clock.stop()
            if k >= 3:
                times.append(elapsed * 1e6)
        else:
            dist.recv(buf, peer)
            dist.send(buf, peer)
    return statistics.median(times) if times else 0.0


def _timed_send(ctx: RankContext, peer: int, nbytes: int, sender: bool, one_way_s: float) -> float:
    """One transfer of ``nbytes`` to ``peer`` (or from it); the sender returns GB/s, the receiver 0."""
    data = torch.empty(max(1, nbytes // 4), dtype=torch.float32, device=ctx.device)
    ack = torch.zeros(1, dtype=torch.float32, device=ctx.device)
    if sender:
        clock = _Stopwatch(ctx.device)
        clock.start()
        dist.send(data, peer)
        dist.recv(ack, peer)
        # The acknowledgement cannot arrive before the data did: less its own one-way trip.
        elapsed = max(clock.stop() - one_way_s, 1e-9)
        return data.numel() * 4 / elapsed / 1e9
    dist.recv(data, peer)
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)
    dist.send(ack, peer)
    return 0.0


def _direction(ctx: RankContext, peer: int, sender: bool, one_way_s: float, cfg: ProbeConfig) -> tuple[float, float]:
    """Median GB/s over ``cfg.repeats`` sized transfers from the sender to the receiver, and their spread
    ((max - min) / median, in %): how sure the median is."""
    trial = _timed_send(ctx, peer, _TRIAL_BYTES, sender, one_way_s)
    size = torch.zeros(1, dtype=torch.int64)
    if sender:
        # Both ends must agree on the size: the sender decides and tells the receiver.
        size[0] = int(min(_MAX_BYTES, max(_TRIAL_BYTES, trial * 1e9 * cfg.target_s)))
        dist.send(size.to(ctx.device), peer)
    else:
        got = torch.zeros(1, dtype=torch.int64, device=ctx.device)
        dist.recv(got, peer)
        size[0] = int(got.item())
    results = [_timed_send(ctx, peer, int(size.item()), sender, one_way_s) for _ in range(cfg.repeats)]
    median = statistics.median(results)
    return median, (max(results) - min(results)) / median * 100 if median > 0 else 0.0


def _measure_pair(ctx: RankContext, peer: int, cfg: ProbeConfig) -> list[PairMeasure]:
    """Latency and both directions' bandwidth with ``peer``; what this rank sent (one PairMeasure)."""
    a, b = min(ctx.rank, peer), max(ctx.rank, peer)
    rtt_us = _ping_pong(ctx, peer, ctx.rank == a, cfg.pings)
    lat = torch.tensor([rtt_us / 2], dtype=torch.float64, device=ctx.device)
    # The follower needs the latency too, to correct its own bandwidth timing.
    if ctx.rank == a:
        dist.send(lat, peer)
    else:
        dist.recv(lat, peer)
    one_way_s = float(lat.item()) / 1e6
    mine: list[PairMeasure] = []
    for src, dst in ((a, b), (b, a)):
        bw, spread = _direction(ctx, peer, ctx.rank == src, one_way_s, cfg)
        if ctx.rank == src:
            mine.append(PairMeasure(src, dst, latency_us=float(lat.item()), bandwidth_gbps=bw, spread_pct=spread))
    return mine


def _peers(ctx: RankContext, pairs: Pairs, node_rounds: int) -> tuple[str, list[tuple[str, int]]]:
    """This rank's node name and its partners in order, each with what to call the step.

    By nodes, the ranks' nodes come from one all-gather of their hosts (``launch/membership.py``: host
    name and boot id, 128 bytes a rank), the partners from the circle method over the node's ranks, then,
    for a node's first rank, over the nodes' first ranks: O(ranks) on every rank, no table of pairs."""
    n = ctx.world_size
    if not by_nodes(pairs, n):
        found = ((k, partner(n, ctx.rank, k)) for k in range(rounds_for(n)))
        return ctx.node, [(f"round {k + 1}", peer) for k, peer in found if peer is not None]
    from collbench.runtime.launch.membership import gather_membership

    members = gather_membership(ctx.control, n)
    node = members.node_of_rank[ctx.rank]
    ranks_of: list[list[int]] = [[] for _ in range(members.nodes)]
    for r, k in enumerate(members.node_of_rank):
        ranks_of[k].append(r)
    local = ranks_of[node]
    out: list[tuple[str, int]] = []
    for k in range(rounds_for(len(local))):
        other = partner(len(local), members.local_rank_of[ctx.rank], k)
        if other is not None:
            out.append((f"round {k + 1} within the node", local[other]))
    if members.local_rank_of[ctx.rank] == 0:
        for k in range(min(rounds_for(members.nodes), node_rounds)):
            other = partner(members.nodes, node, k)
            if other is not None:
                out.append((f"round {k + 1} between nodes", ranks_of[other][0]))
    return members.node_name(ctx.rank), out


def _probe_worker(
    ctx: RankContext, task: tuple[ProbeConfig, bool, Pairs]
) -> tuple[list[str], list[PairMeasure]] | None:
    """Measure this rank's pairs (:func:`_peers`), one after another, no barrier between them; rank 0
    returns every rank's host and every measurement (every rank does when ``everywhere``), the others None."""
    cfg, everywhere, pairs = task
    node, peers = _peers(ctx, pairs, cfg.node_rounds)
    mine: list[PairMeasure] = []
    for step, peer in peers:
        ctx.doing(f"probing ranks {min(ctx.rank, peer)} and {max(ctx.rank, peer)} ({step})")
        mine.extend(_measure_pair(ctx, peer, cfg))
    ctx.doing("gathering the measurements")
    gathered: list[Any] = [None] * ctx.world_size
    # Each rank's node as the job knows it (host name and boot id, launch/membership.py), not its bare
    # host name: namespaces or containers that share a host name are nodes of their own, and a sweep on
    # this topology counts its nodes so; by host name alone they made a topology of one host.
    if everywhere:
        dist.all_gather_object(gathered, (node, mine), group=ctx.control)
    else:
        dist.gather_object((node, mine), gathered if ctx.rank == 0 else None, dst=0, group=ctx.control)
        if ctx.rank != 0:
            return None
    hosts = [str(g[0]) for g in gathered]
    measures = [m for g in gathered for m in g[1]]
    return hosts, measures


def measured_topology(
    hosts: list[str],
    measures: list[PairMeasure],
    *,
    gpus: bool,
    base: Topology | None = None,
    per_node: bool = False,
) -> Topology:
    """Build the topology of the ranks from the probe's measurements (see the module docstring).

    Raises HardwareError when a measurement is faster than its link can physically be.

    With ``base`` on one host holding at least as many rank devices, its devices (and links to NICs
    and CPUs) are kept and the links between the first ranks replaced by measured ones; otherwise
    the devices are the ranks themselves (GPU<r> or CPU<r>, with their host names). ``per_node``
    (a probe by nodes across several hosts): links between hosts become ``node_links``, one per pair of
    hosts measured and, where some were not, an ``inferred`` default, the median of those measured.
    """
    n = len(hosts)
    same_host = len(set(hosts)) == 1
    based = base is not None and same_host and len(base.rank_devices) >= n
    if base is not None and based:
        ranks = base.rank_devices[:n]
        keep = {d.id for d in ranks}
        devices = tuple(d for d in base.devices if d.kind not in (DeviceKind.GPU, DeviceKind.CPU) or d.id in keep)
        kept_ids = {d.id for d in devices}
        others = tuple(
            lk for lk in base.links if lk.a in kept_ids and lk.b in kept_ids and not (lk.a in keep and lk.b in keep)
        )
        host = base.host
    else:
        kind = DeviceKind.GPU if gpus else DeviceKind.CPU
        prefix = "GPU" if gpus else "CPU"
        ranks = tuple(Device(id=f"{prefix}{r}", kind=kind, index=r, name=f"rank {r}", host=hosts[r]) for r in range(n))
        devices, others = ranks, ()
        host = hosts[0] if same_host else ",".join(dict.fromkeys(hosts))
    for m in measures:
        # Against the known link (from discovery) where the ranks are its devices; else any link's bound.
        nominal = base.link(ranks[m.src].id, ranks[m.dst].id) if based and base is not None else None
        check_physical(m, nominal.bandwidth_gbps if nominal is not None else None)
    # Both directions of a pair, by the pair: one pass over the measurements (a loop over every pair of
    # ranks was 134 million steps at 16,384 ranks, most of them pairs a probe by nodes never measured).
    by_pair: dict[tuple[int, int], list[PairMeasure]] = {}
    for m in measures:
        by_pair.setdefault((min(m.src, m.dst), max(m.src, m.dst)), []).append(m)
    links: list[Link] = []
    between: dict[tuple[str, str], list[PairMeasure]] = {}
    for (a, b), got in sorted(by_pair.items()):
        if per_node and hosts[a] != hosts[b]:
            between.setdefault((hosts[a], hosts[b]), []).extend(got)
            continue
        links.append(
            Link(
                a=ranks[a].id,
                b=ranks[b].id,
                kind=LinkKind.MEASURED,
                bandwidth_gbps=statistics.fmean(m.bandwidth_gbps for m in got),
                latency_us=statistics.fmean(m.latency_us for m in got),
                source="measured",
                spread_pct=max(m.spread_pct for m in got),
            )
        )
    node_links = [
        NodeLink(
            LinkKind.MEASURED,
            statistics.fmean(m.bandwidth_gbps for m in got),
            statistics.fmean(m.latency_us for m in got),
            "measured",
            a=a,
            b=b,
            spread_pct=max(m.spread_pct for m in got),
        )
        for (a, b), got in between.items()
    ]
    nodes = len(set(hosts))
    note = f"links between {n} ranks measured by collbench's probe (point-to-point, one pair per rank at a time)"
    if per_node and nodes > 1:
        node_pairs = nodes * (nodes - 1) // 2
        note = (
            f"links measured by collbench's probe by nodes: every pair of ranks within each of {nodes} nodes; "
            f"between nodes one pair of ranks (the nodes' first) for {len(node_links)} of {node_pairs} pairs of nodes"
        )
        if node_links and len(node_links) < node_pairs:
            node_links.append(
                NodeLink(
                    LinkKind.MEASURED,
                    statistics.median(nl.bandwidth_gbps for nl in node_links),
                    statistics.median(nl.latency_us for nl in node_links if nl.latency_us is not None),
                    "inferred",
                )
            )
            note += ", the other pairs inferred as the median of those (node_links' default, source inferred)"
    return Topology(
        host=host,
        devices=devices,
        links=(*others, *links),
        source="probe",
        note=note,
        node_links=tuple(node_links),
    )


def check_physical(m: PairMeasure, nominal_gbps: float | None) -> None:
    """Raise HardwareError (one line) for a measured bandwidth no link of its kind can carry."""
    bound = MAX_LINK_GBPS if nominal_gbps is None else min(MAX_LINK_GBPS, nominal_gbps * NOMINAL_MARGIN)
    if m.bandwidth_gbps <= bound:
        return
    what = f"its link's nominal {nominal_gbps:g} GB/s" if nominal_gbps is not None else "any link"
    raise HardwareError(
        f"the probe measured {m.bandwidth_gbps:.3g} GB/s from rank {m.src} to rank {m.dst}, more than {what} "
        f"can carry (bound {bound:g} GB/s): the timing did not measure the transfer; nothing was written"
    )


def _on_gpu(backend: str) -> bool:
    """Whether ``--backend`` named a GPU backend (``auto`` probes as it is resolved, but its links are not
    labelled as GPUs': it may have fallen back to CPU ranks)."""
    named = backend_named(backend)
    return named is not None and named.on_gpu


def probe_topology(
    world_size: int | None,
    *,
    backend: str = GLOO.name,
    timeout_s: float | None = None,
    base: Topology | None = None,
    config: ProbeConfig | None = None,
    everywhere: bool = False,
    pairs: Pairs = "auto",
) -> Topology | None:
    """Measure latency and bandwidth between the ranks' pairs; return the topology.

    ``pairs``: ``all`` every pair of ranks, ``nodes`` by nodes (the pairs within nodes, a pair of ranks
    per pair of nodes: the module docstring), ``auto`` all up to :data:`ALL_PAIRS_MAX_RANKS` ranks.

    Local ranks are spawned; under a launcher (torchrun, mpirun, srun) this process is one rank and
    ``world_size`` is None or the job's. Links are ``measured`` (GB/s per direction, latency in us).
    The measurements go to rank 0 alone: it returns the topology, other ranks of a launcher's job
    None; ``everywhere`` gives every rank the whole topology (an all-gather of O(n^2) to each rank:
    for scripts of a few ranks that lay rings on every rank). ``timeout_s`` None is
    :func:`default_timeout_s` for the job's size.
    Raises ConfigError for fewer than 2 ranks, RankError when a rank fails or times out,
    BackendUnavailableError for a backend that cannot run here, HardwareError for a measured link
    faster than it can physically be (see ``check_physical``).
    """
    job = joined_job()
    ranks = job.world_size if job is not None and world_size is None else world_size
    if ranks is None or ranks < 2:
        raise ConfigError(f"--probe needs at least 2 ranks to measure a link, got {ranks}")
    cfg = config or ProbeConfig()
    # Ranks spawned here are one node: by nodes they still measure every pair of ranks (n - 1 rounds,
    # past what NODE_RANKS_BOUND allows a job of several nodes: 127 rounds at 128 local ranks), none between.
    spread: Pairs = pairs if job is not None else "all"
    timeout = default_timeout_s(ranks, cfg, spread) if timeout_s is None else timeout_s
    task = (cfg, everywhere, pairs)
    results = launch(world_size, _probe_worker, task, backend=backend, timeout_s=timeout, result_types=(PairMeasure,))
    if results[0] is None:
        return None
    hosts, measures = results[0]
    return measured_topology(hosts, measures, gpus=_on_gpu(backend), base=base, per_node=by_nodes(pairs, ranks))
