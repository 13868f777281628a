"""An Open MPI rankfile that puts MPI_COMM_WORLD ranks in the order of the profile's ring.

Open MPI's ring algorithms (allreduce ring and segmented ring, allgather ring, reduce_scatter ring,
the bcast/reduce pipeline) send from rank ``r`` to rank ``r + 1``: they follow rank order and nothing
else. Where the links are uneven (two hosts' pair slower than the others), the ring collbench's layout
found (``collbench.layouts``, recorded in the profile as ``layout.rings``; the first is the fastest)
takes the fast pairs and rank order may not. A rankfile is the one knob that changes which process is
which rank: rank ``j`` of the job is put where the tuned job's rank ``ring[j]`` ran, so Open MPI's
``j -> j + 1`` is the ring's own hop.

Syntax (Open MPI 4.1 ``orterun(1)``, "Rankfiles"): one line per rank, ``rank <N>=<host> slot=<slot
list>``, the slot list a logical core (``1``), a range (``0-3``) or ``socket:core``; the slot list is
required (4.1.4's mpirun refuses a line without one). Hosts are absolute names, or relative ``+n<X>``:
the X-th host of an allocation a resource manager made (Slurm, PBS); mpirun's own ``-H``/``--hostfile``
is no such allocation (4.1.4: "A relative host was specified, but no prior allocation has been made").
``#`` starts a comment, on its own line or after an entry (4.1.4's lexer skips both).

Which ring: the profile's recorded layout; or, given a topology (``--topology``, the file ``discover``
writes, ``discover --probe`` across a job's hosts), the layout planned on it for the shape's ranks, as
``tune`` plans one (with one rank per host, over the links measured between them: :func:`_pairwise`).
A profile of Open MPI's own collectives records none (its rows run in whatever order mpirun gave), so
the topology is how its ranks get a ring.

Where tuned ranks were: ranks fill each node in turn (rank ``r`` on node ``r // per_node``, at local
position ``r % per_node``), as mpirun's default ``--map-by slot`` and torchrun number them; a node's
host is the name given for it (``hosts``), else ``localhost`` on one node, else ``+n<node>``. The slot
is the local position (the tuned rank's core, one rank per core), unless one slot list is given for
every rank.

The ``--map-by`` alternative: where the ring order is what a mapping policy gives (rank order: the
default, ``--map-by slot``; round robin over nodes: ``--map-by node``; each node's ranks together and
in order, nodes in another order: ``-H`` with the hosts in ring order), that line does it without a
file; otherwise the comment says that no policy expresses it.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from collbench.errors import UserError
from collbench.exporters.exported import Exported, wrap_comments
from collbench.profile.document import Profile, ProfileLayout, RuleSet
from collbench.text import printable
from collbench.units import counted

if TYPE_CHECKING:
    from collbench.topology.model import Topology


@dataclass(frozen=True, slots=True)
class RankPlace:
    """Where rank ``rank`` of the job runs: where the tuned job's rank ``tuned_rank`` ran."""

    rank: int
    tuned_rank: int
    node: int
    local: int


@dataclass(frozen=True, slots=True)
class OmpiRankfile(Exported):
    """The rankfile's text, notes for the terminal, the places, and the ``--map-by`` alternative."""

    places: tuple[RankPlace, ...] = ()
    map_by: str | None = None
    """The mpirun options that give the same order without a file; None where none does."""


def places_along(ring: Sequence[int], nodes: int) -> tuple[RankPlace, ...]:
    """Rank ``j`` at tuned rank ``ring[j]``'s node and local position (ranks fill each node in turn)."""
    per_node = len(ring) // nodes
    return tuple(RankPlace(j, r, r // per_node, r % per_node) for j, r in enumerate(ring))


def map_by_alternative(places: Sequence[RankPlace], nodes: int, hosts: Sequence[str] | None) -> str | None:
    """mpirun's mapping options that give ``places`` without a rankfile, or None where none does."""
    per_node = len(places) // nodes
    if all(p.tuned_rank == p.rank for p in places):
        return "--map-by slot (mpirun's default: rank order is the ring)"
    if all(p.node == p.rank % nodes and p.local == p.rank // nodes for p in places):
        return "--map-by node"
    node_order = list(dict.fromkeys(p.node for p in places))
    contiguous = all(p.node == node_order[p.rank // per_node] and p.local == p.rank % per_node for p in places)
    if contiguous and hosts is not None:
        listed = ",".join(f"{hosts[n]}:{per_node}" for n in node_order)
        return f"-H {listed} --map-by slot"
    return None


def _rule_set(profile: Profile, world_size: int | None, planned: bool) -> RuleSet:
    if world_size is not None:
        return profile.rule_set(world_size)
    measured = [
        s for s in profile.rule_sets if not s.predicted and (planned or (s.layout is not None and s.layout.rings))
    ]
    if len(measured) > 1:
        sizes = ", ".join(str(s.world_size) for s in measured)
        raise UserError(f"the profile has ring layouts for {sizes} ranks: pick one with --ranks")
    return measured[0] if measured else profile.default_set


def _pairwise(topology: Topology, world: int) -> Topology:
    """``topology`` with its ranks on one fabric where each of the first ``world`` ranks is a host of its
    own and every pair of them has a measured link (``discover --probe`` across hosts).

    collbench's multi-host planner keeps the nodes in rank order (on a uniform network every order is
    the same ring) and never reads links between hosts; with one rank per host, the links the probe
    measured between them are the whole fabric, and the one-fabric search picks the ring from them.
    """
    from collbench.layouts.fabric import MAX_LAYOUT_RANKS

    if world > MAX_LAYOUT_RANKS:
        # No one-fabric search past it: plan_layout plans over nodes there (layouts/nodes.py), each
        # rank's host a node, from the links between hosts. The pairs looked at below are O(world^2)
        # (3,000 ranks: 2 min).
        return topology
    ranks = topology.rank_devices[:world]
    own_hosts = len({d.host for d in ranks}) == len(ranks) > 1
    measured = all(topology.link(a.id, b.id) is not None for i, a in enumerate(ranks) for b in ranks[i + 1 :])
    if not (own_hosts and measured):
        return topology
    one = topology.host.split(",")[0]
    devices = tuple(replace(d, host=one) if d in ranks else d for d in topology.devices)
    if not topology.node_links:
        return replace(topology, devices=devices)
    # Links said per pair of hosts (node_links) name hosts that are one now: each pair of ranks takes
    # its hosts' link as its own (the one-fabric search reads an n x n table of them anyway).
    ids = {d.id for d in ranks}
    kept = tuple(lk for lk in topology.links if not (lk.a in ids and lk.b in ids))
    pairs = tuple(
        found for i, a in enumerate(ranks) for b in ranks[i + 1 :] if (found := topology.link(a.id, b.id)) is not None
    )
    return replace(topology, devices=devices, links=kept + pairs, node_links=())


def planned_layout(topology: Topology, world: int) -> ProfileLayout:
    """The layout ``tune`` would plan on ``topology`` for ``world`` ranks (one rank per host: :func:`_pairwise`).

    Raises ConfigError where the topology has fewer ranks than ``world``.
    """
    from collbench.layouts.plan import plan_layout

    planned = plan_layout(_pairwise(topology, world), world)
    return ProfileLayout(planned.name, rings=tuple(planned.rings), trees=tuple(planned.trees))


def rankfile_entries(places: Sequence[RankPlace], names: Sequence[str], slots: str | None) -> list[str]:
    """One ``rank N=host slot=list`` line per place, ``names`` the host of each node."""
    return [
        f"rank {p.rank}={names[p.node]} slot={slots.strip() if slots is not None else p.local}  "
        f"# where tuned rank {p.tuned_rank} ran (node {p.node}, position {p.local})"
        for p in places
    ]


_SLOT_LIST = re.compile(r"[0-9]{1,6}(?:-[0-9]{1,6})?(?:,[0-9]{1,6}(?:-[0-9]{1,6})?)*", re.ASCII)
_HOST_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?", re.ASCII)
_RELATIVE_HOST = re.compile(r"\+n[0-9]{1,6}", re.ASCII)


def _check_slots(slots: str) -> None:
    """UserError unless ``slots`` is Open MPI's slot syntax: a list of cores (``0-3``, ``0,2``), or a
    socket list and a core list joined by a colon (``1:0-2``), every range ascending.

    The text is written into each rankfile line as it is: anything else (a space, a ``#``, a ``;``)
    would end the line's value early, start a comment or make mpirun refuse the file.
    """
    example = "like 0-3, 0,2 or 1:0-2 (socket:cores)"
    parts = slots.strip().split(":")
    if len(parts) > 2 or not all(_SLOT_LIST.fullmatch(part) for part in parts):
        raise UserError(
            f"--slots {slots[:80]!r}: not one Open MPI slot list (digits, ranges, commas, one colon), {example}"
        )
    for part in parts:
        for item in part.split(","):
            low, _, high = item.partition("-")
            if high and int(high) < int(low):
                raise UserError(f"--slots {slots!r}: the range {item} runs backwards; write {high}-{low}")


def _check_host(host: str) -> None:
    """UserError unless ``host`` is an RFC 1123 host name, an IP address or Open MPI's relative ``+n<N>``.

    Each name is written into a rankfile line as it is, where a space, ``#`` or ``=`` would change
    what mpirun reads.
    """
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    labels = host.split(".")
    if _RELATIVE_HOST.fullmatch(host) or (len(host) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in labels)):
        return
    raise UserError(
        f"--hosts: {host[:80]!r} is not a host name (letters, digits, '-' and '.', RFC 1123), an IP address or +n<N>"
    )


def _host_names(rule_set: RuleSet, hosts: Sequence[str] | None) -> list[str]:
    if hosts is not None:
        if len(hosts) != rule_set.nodes:
            raise UserError(
                f"--hosts names {counted(len(hosts), 'host')}; the profile's {rule_set.shape_label} ran on "
                f"{rule_set.nodes}: "
                "give one per node, in the order the tuned job's ranks filled them"
            )
        repeated = sorted({h for h in hosts if list(hosts).count(h) > 1})
        if repeated:
            # Two nodes under one name would put two ranks on one slot of that host.
            raise UserError(f"--hosts names {', '.join(repeated)} more than once; give each node's own host, once")
        return list(hosts)
    if rule_set.nodes == 1:
        return ["localhost"]
    return [f"+n{i}" for i in range(rule_set.nodes)]


def build_ompi_rankfile(
    profile: Profile,
    *,
    world_size: int | None = None,
    hosts: Sequence[str] | None = None,
    slots: str | None = None,
    topology: Topology | None = None,
) -> OmpiRankfile:
    """The rankfile putting ranks along the first ring of the profile's layout for ``world_size`` ranks.

    ``hosts``: the tuned job's hosts, one per node in the order its ranks filled them; ``slots``: one
    slot list for every rank (default: each rank's local position, a core); ``topology``: plan the ring
    on it instead of reading the profile's. Raises UserError where the profile has no such shape, the
    shape has no measured ring layout (and no topology is given), its ranks do not divide evenly over
    its nodes, or ``hosts`` does not name one host per node; ConfigError where the topology has fewer
    ranks than the shape.
    """
    rule_set = _rule_set(profile, world_size, topology is not None)
    layout = rule_set.layout
    source = "recorded in the profile"
    if topology is not None and not rule_set.predicted:
        layout = planned_layout(topology, rule_set.world_size)
        source = "planned on the given topology"
    if rule_set.predicted or layout is None or not layout.rings:
        why = "predicted from the fitted models" if rule_set.predicted else "its ranks ran in rank order"
        raise UserError(
            f"the profile records no ring layout for {rule_set.shape_label} ({why}): there is no ring order for "
            "a rankfile to follow; give the topology the ranks ran on (--topology, from `collbench discover`)"
        )
    world, nodes = rule_set.world_size, rule_set.nodes
    if world % nodes:
        raise UserError(f"{world} ranks on {nodes} nodes are not the same number per node: no slot layout to follow")
    if slots is not None:
        _check_slots(slots)
    for host in hosts or ():
        _check_host(host)
    ring = layout.rings[0]
    places = places_along(ring, nodes)
    names = _host_names(rule_set, hosts)
    map_by = map_by_alternative(places, nodes, hosts)
    which = f" (the fastest of its {len(layout.rings)} rings)" if len(layout.rings) > 1 else ""
    host = printable(profile.host)  # someone else's profile: its host may hold terminal escapes
    out = [
        "# Open MPI rankfile made by collbench from a profile: ranks in the order of the layout's ring",
        f"# machine {profile.fingerprint} ({host}), backend {profile.backend}; {rule_set.shape_label}",
        f"# layout {layout.name} ({source}): ring {'-'.join(map(str, ring))}{which}, in the tuned job's ranks",
        "# Open MPI's ring algorithms send from rank j to rank j+1: here that is the ring's own hop",
        f"# use: mpirun -np {world} --rankfile <this file> ...",
    ]
    if any(name.startswith("+n") for name in names):
        out.append(
            "# +nX is the X-th host of a resource manager's allocation (Slurm, PBS); for plain mpirun, export with "
            "--hosts naming the tuned job's hosts"
        )
    if map_by is not None:
        out.append(f"# alternative without a file: mpirun {map_by}")
    elif hosts is None:
        out.append(
            "# no --map-by policy gives this order without host names (--hosts gives the -H form where one does)"
        )
    else:
        out.append("# no --map-by policy gives this order: the rankfile is needed")
    out += rankfile_entries(places, names, slots)
    notes: list[str] = []
    if topology is not None and len(topology.rank_devices) > world:
        notes.append(
            f"the topology describes {len(topology.rank_devices)} ranks: the ring is planned on its first {world}"
        )
    if all(p.rank == p.tuned_rank for p in places):
        notes.append(f"the layout's ring at {rule_set.shape_label} is rank order already: the rankfile changes nothing")
    return OmpiRankfile(wrap_comments("\n".join(out) + "\n", trailing=True), tuple(notes), places=places, map_by=map_by)
