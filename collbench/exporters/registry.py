"""The one list of exports: ``collbench export`` makes one command of each entry, in this order.

Every export has one signature, :data:`ExportFunction`: a loaded profile and the :class:`ExportRequest`
(what the command line asked) in, an :class:`~collbench.exporters.exported.Exported` out. Which
backends' profiles an export serves is the backends' answer (``Backend.feeds`` names the consumer
family), never a list kept here, and every exporter refuses another backend's profile through the same
check (:func:`.serving.check_serves`). The functions import their modules when called, so that listing the
exports (``collbench export --help``) loads none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench.backends.base import NCCL_EXPORTS, OMPI_EXPORTS
from collbench.backends.mpich import MPICH_EXPORTS
from collbench.exporters.exported import Exported
from collbench.exporters.serving import served_by
from collbench.mpich.algorithms import SELECTION_FILE_CVAR

if TYPE_CHECKING:
    from collbench.profile.document import Profile
    from collbench.topology.model import Topology


@dataclass(frozen=True, slots=True)
class ExportRequest:
    """What the command line asked of an export; each reads the fields it has options for."""

    from_other_backend: bool = False
    ranks: int | None = None
    """ompi-rankfile: the communicator size whose layout to follow (None: the one measured with a ring)."""
    hosts: tuple[str, ...] | None = None
    """ompi-rankfile: the job's hosts, one per node, in the order its ranks filled them."""
    slots: str | None = None
    """ompi-rankfile: one Open MPI slot list for every rank."""
    topology: Topology | None = None
    """ompi-rankfile: plan the ring on this topology instead of the profile's recorded layout."""
    base: dict[str, Any] = field(default_factory=dict)
    """mpich-json: MPICH's own selection tree, parsed, that the profile's choices go into."""
    base_source: str = ""
    """mpich-json: where :attr:`base` was read (a file, or the installed MPICH's library)."""
    directory: Path | None = None
    """nccl-plugin: the directory the plugin and its config are built into."""
    overwrite: bool = False
    """nccl-plugin: replace a plugin or config already in :attr:`directory` (else refused)."""


ExportFunction = Callable[["Profile", ExportRequest], Exported]


@dataclass(frozen=True, slots=True)
class Export:
    """One export: the command's name, its one-line help, the consumer family it feeds, its function,
    what it is called when written, and the line that shows how a job uses the written file."""

    name: str
    help: str
    family: str
    function: ExportFunction
    what: str
    use: str | None = None
    """How a job reads the file written with ``-O``, ``{output}`` standing for its path."""

    @property
    def serves(self) -> tuple[str, ...]:
        """The backends whose profiles this export takes without ``--from-other-backend``."""
        return served_by(self.family)


def _nccl_tuner(profile: Profile, request: ExportRequest) -> Exported:
    from collbench.exporters.nccl_tuner import build_nccl_tuner

    return build_nccl_tuner(profile, from_other_backend=request.from_other_backend)


def _ompi_rules(profile: Profile, request: ExportRequest) -> Exported:
    from collbench.exporters.ompi_rules import build_ompi_rules

    built = build_ompi_rules(profile, from_other_backend=request.from_other_backend)
    # The lines Open MPI cannot follow are said after the file is written, each labelled, then the
    # ranges where its fixed decision was already fastest (each opens with "no rule needed: ...").
    after = tuple(("no equivalent", note) for note in built.notes) + tuple(("", line) for line in built.unneeded)
    return Exported(built.text, after=after)


def _ompi_rankfile(profile: Profile, request: ExportRequest) -> Exported:
    from collbench.exporters.ompi_rankfile import build_ompi_rankfile

    hosts = None if request.hosts is None else list(request.hosts)
    return build_ompi_rankfile(
        profile, world_size=request.ranks, hosts=hosts, slots=request.slots, topology=request.topology
    )


def _nccl_env(profile: Profile, request: ExportRequest) -> Exported:
    from collbench.exporters.nccl_env import build_nccl_env

    return build_nccl_env(profile, from_other_backend=request.from_other_backend)


def _nccl_plugin(profile: Profile, request: ExportRequest) -> Exported:
    from collbench.errors import UserError
    from collbench.exporters.nccl_plugin import build_plugin

    if request.directory is None:
        raise UserError("name the directory for the plugin and its config with --output DIR (or use --show)")
    built = build_plugin(
        profile, request.directory, from_other_backend=request.from_other_backend, overwrite=request.overwrite
    )
    return Exported(
        "".join(f"{line}\n" for line in built.env_lines), built.exported.notes, files=(built.plugin, built.config)
    )


def _mpich_json(profile: Profile, request: ExportRequest) -> Exported:
    from collbench.exporters.mpich_json import build_mpich_json

    return build_mpich_json(profile, request.base, request.base_source)


def _mpich_env(profile: Profile, request: ExportRequest) -> Exported:
    from collbench.exporters.mpich_env import build_mpich_env

    return build_mpich_env(profile)


EXPORTS: tuple[Export, ...] = (
    Export(
        "nccl-tuner",
        "NCCL tuner plugin config lines (NCCL_TUNER_CONFIG_FILE for collbench's or NCCL's example plugin).",
        NCCL_EXPORTS,
        _nccl_tuner,
        "NCCL tuner config",
    ),
    Export(
        "ompi-rules",
        "Open MPI 4.1 coll/tuned dynamic rules (classic format), one entry per communicator size of the profile.",
        OMPI_EXPORTS,
        _ompi_rules,
        "Open MPI rules",
        "mpirun --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename {output} ...",
    ),
    Export(
        "ompi-rankfile",
        "Open MPI rankfile (mpirun --rankfile): ranks in the order of the profile's ring; the --map-by alternative.",
        OMPI_EXPORTS,
        _ompi_rankfile,
        "Open MPI rankfile",
        "mpirun --rankfile {output} ...",
    ),
    Export(
        "env",
        "NCCL_ALGO/NCCL_PROTO per collective, where one algorithm wins at every size and shape (else why not).",
        NCCL_EXPORTS,
        _nccl_env,
        "NCCL_ALGO/NCCL_PROTO setting",
    ),
    Export(
        "nccl-plugin",
        "Build collbench's NCCL tuner plugin and config into DIR; print NCCL_TUNER_PLUGIN/NCCL_TUNER_CONFIG_FILE.",
        NCCL_EXPORTS,
        _nccl_plugin,
        "NCCL tuner plugin",
    ),
    Export(
        "mpich-json",
        "MPICH selection file (MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE): MPICH's own, the profile's choices first.",
        MPICH_EXPORTS,
        _mpich_json,
        "MPICH selection",
        f"{SELECTION_FILE_CVAR}={{output}} mpiexec ...",
    ),
    Export(
        "mpich-env",
        "MPIR_CVAR_<COLL>_INTRA_ALGORITHM per collective, where one algorithm wins at every size and shape.",
        MPICH_EXPORTS,
        _mpich_env,
        "MPICH algorithm variables",
    ),
)


def export_named(name: str) -> Export:
    """The entry of :data:`EXPORTS` called ``name`` (KeyError for another: names come from the registry)."""
    found = next((e for e in EXPORTS if e.name == name), None)
    if found is None:
        raise KeyError(name)
    return found
