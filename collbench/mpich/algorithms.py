"""MPICH's own collective algorithms, as ``collbench sweep --backend mpich`` names them (the facts the
MPICH backend, its exports and the result records share).

A row of MPICH's own collective is ``native`` (MPICH's own selection: ``auto``) or ``native:<name>`` with
the value ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM`` takes to force it. :data:`MPICH_4_0` is read from MPICH
4.0.2 itself: the descriptions its MPI_T interface gives for each of those variables
(``MPI_T_cvar_get_info``; the same text as ``src/mpi/coll/cvars.txt`` of the v4.0.2 tag), and the names
of the same algorithms in a CSEL selection file (``src/mpi/coll/src/csel_container.c``, v4.0.2:
``MPIR_<Coll>_intra_<name>``, and ``MPIR_<Coll>_allcomm_nb`` for ``nb``).
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.schedules.ops import Op

NATIVE = "native"
NATIVE_PREFIX = "native:"
MPICH_VERSION = "4.0.2"
"""The MPICH whose algorithms :data:`MPICH_4_0` lists (Debian 12's ``mpich`` package)."""
TOOLS = ("mpicc.mpich", "mpiexec.mpich")
"""MPICH's compiler wrapper and launcher under Debian's names (``mpicc``/``mpirun`` stay Open MPI's)."""
SELECTION_FILE_CVAR = "MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE"
"""MPICH's CSEL file (``src/mpi/coll/src/coll_impl.c``, v4.0.2: read once, in MPI_Init, replacing the
built-in tree of every collective)."""
FALLBACK_CVAR = "MPIR_CVAR_COLLECTIVE_FALLBACK"
"""What MPICH does when a forced algorithm cannot run the call: ``error`` makes it say so, where the
default (``silent``) would run its own choice under the forced algorithm's name."""


MPICH_4_0: dict[str, tuple[str, ...]] = {
    "allreduce": ("nb", "smp", "recursive_doubling", "reduce_scatter_allgather"),
    "bcast": ("binomial", "nb", "smp", "scatter_recursive_doubling_allgather", "scatter_ring_allgather"),
    "reduce": ("binomial", "nb", "smp", "reduce_scatter_gather"),
    "allgather": ("brucks", "nb", "recursive_doubling", "ring"),
    "reduce_scatter": ("nb", "noncommutative", "pairwise", "recursive_doubling", "recursive_halving"),
    "alltoall": ("brucks", "nb", "pairwise", "pairwise_sendrecv_replace", "scattered"),
    "gather": ("binomial", "nb"),
    "scatter": ("binomial", "nb"),
    "barrier": ("nb", "smp", "dissemination"),
    "scan": ("nb", "smp", "recursive_doubling"),
    "exscan": ("nb", "recursive_doubling"),
}
"""MPICH 4.0.2's values of ``MPIR_CVAR_<COLL>_INTRA_ALGORITHM`` per collective, ``auto`` (its own
selection: ``native``) left out. ``nb`` runs the nonblocking collective and waits; ``smp`` is the
node-aware form (on one node MPICH cannot run it and says so, :data:`FALLBACK_CVAR`)."""


@dataclass(frozen=True, slots=True)
class MpichAlgorithm:
    """One forcible algorithm of one MPICH collective."""

    collective: str
    name: str

    @property
    def algo(self) -> str:
        """The name collbench's rows give it (``native:<name>``)."""
        return NATIVE_PREFIX + self.name

    @property
    def cvar(self) -> str:
        """The variable that forces it (``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM``)."""
        return algorithm_cvar(self.collective)

    @property
    def csel_name(self) -> str:
        """Its name in a CSEL file (``MPIR_Allreduce_intra_recursive_doubling``, ``MPIR_Bcast_allcomm_nb``)."""
        kind = "allcomm" if self.name == "nb" else "intra"
        return f"MPIR_{self.collective.capitalize()}_{kind}_{self.name}"


def algorithm_cvar(collective: str) -> str:
    """The CVAR forcing ``collective``'s algorithm on an intracommunicator."""
    return f"MPIR_CVAR_{collective.upper()}_INTRA_ALGORITHM"


def algorithms(collective: str) -> tuple[MpichAlgorithm, ...]:
    """What MPICH 4.0.2 can be forced to run for ``collective`` (none for ``sendrecv``)."""
    return tuple(MpichAlgorithm(collective, name) for name in MPICH_4_0.get(collective, ()))


def find_algorithm(op: str, algo: str) -> MpichAlgorithm | None:
    """The forced algorithm a row ``algo`` (``native:<name>``) of ``op`` (``Op.value``) names; None for
    ``native``, or a name MPICH's collective for ``op`` does not have."""
    coll = Op(op).spec.mpi_name
    name = algo.strip().lower().removeprefix(NATIVE_PREFIX)
    return next((a for a in algorithms(coll) if a.name == name), None)


def known_algos() -> frozenset[str]:
    """Every ``native:<name>`` MPICH 4.0.2 can be forced to run, for any collective."""
    return frozenset(NATIVE_PREFIX + name for names in MPICH_4_0.values() for name in names)


IN_PLACE_ONLY = frozenset({("alltoall", "pairwise_sendrecv_replace")})
"""Algorithms MPICH runs only for an ``MPI_IN_PLACE`` call, and (below) only for one that is not:
``restrictions: inplace`` / ``noinplace`` in ``src/mpi/coll/coll_algorithms.txt`` (v4.0.2, blocking
intracommunicator algorithms). Forced by their variable MPICH refuses the other mode; chosen by a
selection file it would run them anyway, so ``export mpich-json`` keeps the other mode on MPICH's own."""
NOT_IN_PLACE = frozenset({("alltoall", "brucks"), ("alltoall", "pairwise"), ("alltoall", "scattered")})
