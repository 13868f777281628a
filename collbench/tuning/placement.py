"""Where a tune's ranks run: the topology (given, or this machine's) and the layout planned on it.

Both are made once per tune and handed to every sweep as objects: each round measures on the same
layout, and the profile records that layout, the one the ranks ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from collbench.backends import backend_named
from collbench.errors import CollbenchError, ConfigError, UserError
from collbench.layouts.model import Layout
from collbench.results.row import ResultRow
from collbench.topology.model import Topology
from collbench.tuning.config import TuneConfig

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    """The topology a tune measures on and the layout planned on it (None: rank order)."""

    topology: Topology | None = None
    layout: Layout | None = None

    @property
    def ranks_topology(self) -> Topology | None:
        """The topology the ranks are given: only with a planned layout. Without one they run in rank
        order and their rows carry the fingerprint of the machine they find."""
        return self.topology if self.layout is not None else None

    @property
    def nodes(self) -> int:
        """How many nodes the layout places the ranks on, as a sweep counts them (one without a layout)."""
        return len(self.layout.nodes) if self.layout is not None else 1


def plan_placement(config: TuneConfig, notes: list[str]) -> Placement:
    """The topology (``config.topology_path``, else discovered) and its planned layout.

    Under a launcher (``config.ranks`` None) the layout is planned for its job's world on a topology
    given with ``--topology`` (one ``discover --probe`` measured across the job's hosts); a topology
    discovered here describes this host alone, so the ranks then run in rank order. The layout is None,
    with a note saying why, when it cannot be planned. Raises InputFileError for a topology file that
    cannot be read.

    Under a launcher with ``--topology`` rank 0 alone reads it and plans (:func:`_shared`): at 512
    ranks a probe's topology is 13.6 MiB and 19 s to load, and its plan 1.4 s, which every rank paid.
    Every rank of the job must call this at the same point (it is a decision of the job's).
    """
    from collbench.runtime.launch.ranks import joined_job

    job = joined_job()
    if job is not None and job.world_size > 1 and config.topology_path is not None:
        return _shared(config, notes, job.rank, job.world_size)
    return _planned(config, notes, job.world_size if job is not None else None)


def _planned(config: TuneConfig, notes: list[str], job_world: int | None) -> Placement:
    if config.topology_path is not None:
        from collbench.topology.io import load_topology

        topology = load_topology(config.topology_path)
    else:
        topology = topology_for_ranks(config, notes)
    world = config.ranks
    if world is None and config.topology_path is not None:
        world = job_world
    if world is None:
        return Placement(topology=topology)
    from collbench.layouts.plan import plan_layout

    try:
        layout = plan_layout(topology, world)
    except CollbenchError as exc:
        notes.append(f"layout not planned ({exc}); rank order used")
        return Placement(topology=topology)
    return Placement(topology=topology, layout=layout)


SHARED = "the layout rank 0 planned on --topology"
"""The decision that hands rank 0's layout (or its refusal of the topology) to the other ranks."""


def _shared(config: TuneConfig, notes: list[str], rank: int, world: int) -> Placement:
    """Rank 0 plans; each other rank gets the layout's rings, trees and nodes (O(ranks) each) in one
    decision, and its own all-to-all partners (O(ranks)) by one scatter, never the O(ranks^2) exchange
    table: it builds its own steps alone. A topology rank 0 cannot read stops every rank with its line."""
    from collbench.runtime.launch.session import agree

    placement = Placement()
    if rank == 0:
        try:
            placement = _planned(config, notes, world)
        except UserError as exc:
            refusal = str(exc)
            agree(SHARED, lambda: {"refused": refusal}, timeout_s=config.timeout_s)
            raise
    shape = agree(SHARED, lambda: _shape(placement.layout), timeout_s=config.timeout_s)
    if "refused" in shape:
        raise ConfigError(f"rank 0: {shape['refused']}")
    rounds = int(shape.get("exchange_round_count", 0))
    partners: list[int] = []
    if rounds and not shape["derived"]:
        from collbench.runtime.launch.handout import hand_out

        def table() -> torch.Tensor:
            import torch

            assert placement.layout is not None  # rank 0 planned it: it decided the shape above
            return torch.tensor(placement.layout.exchange_rounds, dtype=torch.int32).t().contiguous()

        partners = hand_out("its all-to-all partners", table, rounds, timeout_s=config.timeout_s)
    if rank == 0 or "rings" not in shape:
        return placement
    by_nodes = bool(shape.get("exchange_by_nodes", False))
    layout = Layout(
        rings=tuple(tuple(int(r) for r in ring) for ring in shape["rings"]),
        trees=tuple(tuple(int(r) for r in tree) for tree in shape["trees"]),
        name=str(shape["name"]),
        ring_bandwidths_gbps=tuple(float(b) for b in shape["ring_bandwidths_gbps"]),
        nodes=tuple(tuple(int(r) for r in node) for node in shape["nodes"]),
        exchange_spread=int(shape["exchange_spread"]),
        exchange_by_nodes=by_nodes,
    )
    if rounds and shape["derived"]:  # the round-robin rounds, or the rule by nodes: derived here
        partners = list(layout.derived_partners(rank))
    return Placement(layout=layout.with_partners(rank, tuple(partners)))


def _shape(layout: Layout | None) -> dict[str, object]:
    """What every rank receives of rank 0's layout (empty: none planned, rank order)."""
    if layout is None:
        return {}
    return {
        "name": layout.name,
        "rings": layout.rings,
        "trees": layout.trees,
        "ring_bandwidths_gbps": layout.ring_bandwidths_gbps,
        "nodes": layout.nodes,
        "exchange_spread": layout.exchange_spread,
        "exchange_round_count": layout.exchange_round_count,
        "exchange_by_nodes": layout.exchange_by_nodes,
        "derived": layout.exchange_is_derived(),
    }


def topology_for_ranks(config: TuneConfig, notes: list[str]) -> Topology:
    """This machine as the tune's ranks use it: its GPUs under NCCL, the host's CPUs under gloo.

    Local ranks that run over gloo (``--backend gloo``, or ``auto`` with fewer GPUs than ranks: NCCL
    runs one rank per GPU) run on CPUs, so a GPU topology would name devices they never use and hold
    fewer ranks than they are (one GPU, four ranks). Their topology is the host's, as their rows'
    fingerprints are; where GPUs were there, ``notes`` gets one line saying why they were not used.
    """
    from collbench.topology.sources import discover_topology

    if config.ranks is None:  # under a launcher: the ranks are its job's
        return discover_topology()
    from collbench.tuning.config import tune_backend

    asked = backend_named(config.backend)  # None: auto
    # Open MPI's ranks (mpi) run on this host's CPUs, as gloo's do.
    if (asked is not None and asked.on_gpu) or (asked is None and tune_backend(config).on_gpu):
        return discover_topology(ranks=config.ranks)
    import torch

    from collbench.topology.host import host_topology

    cuda_gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not cuda_gpus:
        # No GPU for torch: NVML says why there is none (no driver, no library), or, where it sees
        # GPUs that torch does not (a CPU-only build of torch), the ranks leave them unused.
        found = discover_topology()
        if not found.gpus:
            return host_topology(config.ranks, found.note)
        why = (
            f"NVML shows {_gpus(len(found.gpus))} but torch {torch.__version__} sees none (a CPU-only build?): "
            f"{config.ranks} CPU ranks over gloo, on this host's CPUs"
        )
    elif asked is not None:
        return host_topology(config.ranks, f"--backend {asked.name}: the ranks run on this host's CPUs")
    else:
        why = (
            f"{_gpus(cuda_gpus)} for {config.ranks} ranks and NCCL runs one rank per GPU: "
            f"{config.ranks} CPU ranks over gloo, on this host's CPUs"
        )
    notes.append(why)
    return host_topology(config.ranks, why)


def _gpus(count: int) -> str:
    return f"{count} GPU" if count == 1 else f"{count} GPUs"


def layout_ran(rows: Sequence[ResultRow], layout: Layout | None) -> Layout | None:
    """``layout`` if the ranks measured with it (some row names it), else None (rank order)."""
    if layout is None or not any(row.layout == layout.name for row in rows):
        return None
    return layout
