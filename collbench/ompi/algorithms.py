"""Open MPI's own collective algorithms (coll/tuned), as ``collbench sweep --backend mpi`` names them.

A row of Open MPI's own collective is ``native`` (coll/tuned's fixed decision, algorithm 0) or
``native:<name>`` with the name ``ompi_info --param coll tuned --level 9`` prints for the forced
algorithm (``native:segmented_ring``). What an installed Open MPI has is read from its ``ompi_info``
at run time (:func:`parse_ompi_info`), so another version's list is measured as it is; the table here
is Open MPI 4.1's (v4.1.4, ``ompi_coll_tuned_<coll>_intra_do_this`` in
``ompi/mca/coll/tuned/coll_tuned_<coll>_decision.c``), which names the rows results files may hold and
says which algorithms take a segment size (``coll_tuned_<coll>_algorithm_segmentsize``; the others
ignore it).

Only the collectives collbench has an op for are here: Open MPI's reduce_scatter (MPI_Reduce_scatter)
stands for collbench's reduce-scatter (reduce_scatter_block has no op of its own). alltoall, gather,
scatter and barrier are read from the same v4.1.4 files (``coll_tuned_{alltoall,gather,scatter,
barrier}_decision.c``: the ``*_algorithms[]`` enumerators and the ``case`` labels of ``*_intra_do_this``);
Open MPI v5.0.0 and v5.0.9 list the same ids, names and functions for these four. Of them only gather's
``linear_sync`` reads a segment size (its first segment, ``ompi_coll_base_gather_intra_linear_sync``);
barrier has no ``_algorithm_segmentsize`` parameter at all. scan and exscan (``MPI_Scan``,
``MPI_Exscan``; ``coll_tuned_{scan,exscan}_decision.c``) have linear and recursive_doubling, with no
segment size either; without a rule coll/tuned runs the linear chain.

collbench's sendrecv (a ring shift) is ``MPI_Sendrecv``, a point-to-point call: coll/tuned has nothing
to choose for it, so it is measured as ``native`` only (:data:`UNTUNED`) and has no rules.
"""

from __future__ import annotations

from dataclasses import dataclass

NATIVE = "native"
NATIVE_PREFIX = "native:"


@dataclass(frozen=True, slots=True)
class OmpiAlgorithm:
    """One forcible algorithm of one coll/tuned collective."""

    algorithm_id: int
    """The value of ``coll_tuned_<coll>_algorithm`` that forces it (0 is Open MPI's own choice)."""
    name: str
    """The name ``ompi_info`` prints for it."""
    takes_segment: bool
    """Whether it reads ``coll_tuned_<coll>_algorithm_segmentsize`` (0 there: one segment)."""

    @property
    def algo(self) -> str:
        """The name collbench's rows give it (``native:<name>``)."""
        return NATIVE_PREFIX + self.name


COLLECTIVE_FOR_OP: dict[str, str] = {
    "all-reduce": "allreduce",
    "broadcast": "bcast",
    "reduce": "reduce",
    "all-gather": "allgather",
    "reduce-scatter": "reduce_scatter",
    "all-to-all": "alltoall",
    "gather": "gather",
    "scatter": "scatter",
    "barrier": "barrier",
    "sendrecv": "sendrecv",
    "scan": "scan",
    "exscan": "exscan",
}
"""collbench op (``Op.value``) -> the coll/tuned collective measured for it (``sendrecv``: the harness's
``MPI_Sendrecv``, which coll/tuned does not handle; see :data:`UNTUNED`)."""

UNTUNED = frozenset({"sendrecv"})
"""Names in :data:`COLLECTIVE_FOR_OP` that are not coll/tuned collectives: no algorithm to force, no
``coll_tuned_<coll>_*`` parameters, no rules; only ``native`` is measured."""


def _algos(*entries: tuple[str, bool]) -> tuple[OmpiAlgorithm, ...]:
    return tuple(OmpiAlgorithm(i, name, seg) for i, (name, seg) in enumerate(entries, 1))


OPEN_MPI_4_1: dict[str, tuple[OmpiAlgorithm, ...]] = {
    "allreduce": _algos(
        ("basic_linear", False),
        ("nonoverlapping", False),
        ("recursive_doubling", False),
        ("ring", False),
        ("segmented_ring", True),
        ("rabenseifner", False),
    ),
    "bcast": _algos(
        ("basic_linear", False),
        ("chain", True),
        ("pipeline", True),
        ("split_binary_tree", True),
        ("binary_tree", True),
        ("binomial", True),
        ("knomial", True),
        ("scatter_allgather", True),
        ("scatter_allgather_ring", True),
    ),
    "reduce": _algos(
        ("linear", False),
        ("chain", True),
        ("pipeline", True),
        ("binary", True),
        ("binomial", True),
        ("in-order_binary", True),
        ("rabenseifner", False),
    ),
    "allgather": _algos(
        ("linear", False),
        ("bruck", False),
        ("recursive_doubling", False),
        ("ring", False),
        ("neighbor", False),
        ("two_proc", False),
    ),
    "reduce_scatter": _algos(
        ("non-overlapping", False),
        ("recursive_halving", False),
        ("ring", False),
        ("butterfly", False),
    ),
    # coll_tuned_alltoall_decision.c: 4 (linear_sync) reads max_requests, not a segment size.
    "alltoall": _algos(
        ("linear", False),
        ("pairwise", False),
        ("modified_bruck", False),
        ("linear_sync", False),
        ("two_proc", False),
    ),
    # coll_tuned_gather_decision.c: 3 (linear_sync) passes segsize as its first segment's size.
    "gather": _algos(
        ("basic_linear", False),
        ("binomial", False),
        ("linear_sync", True),
    ),
    # coll_tuned_scatter_decision.c: 3 (linear_nb) reads the blocking-send ratio (max_requests).
    "scatter": _algos(
        ("basic_linear", False),
        ("binomial", False),
        ("linear_nb", False),
    ),
    "barrier": _algos(
        ("linear", False),
        ("double_ring", False),
        ("recursive_doubling", False),
        ("bruck", False),
        ("two_proc", False),
        ("tree", False),
    ),
    # coll_tuned_{scan,exscan}_decision.c: no segment size parameter. linear is a chain (rank r waits
    # for r-1's prefix), recursive_doubling a butterfly over partners r ^ 2^k (coll_base_scan.c,
    # coll_base_exscan.c).
    "scan": _algos(("linear", False), ("recursive_doubling", False)),
    "exscan": _algos(("linear", False), ("recursive_doubling", False)),
}


def known_algos() -> frozenset[str]:
    """Every ``native:<name>`` Open MPI 4.1 can be forced to run for a collbench op (results files name these)."""
    return frozenset(a.algo for algos in OPEN_MPI_4_1.values() for a in algos)


def takes_segment(collective: str, name: str) -> bool:
    """Whether Open MPI 4.1's algorithm reads a segment size (False for a name the table lacks)."""
    return any(a.name == name and a.takes_segment for a in OPEN_MPI_4_1.get(collective, ()))


def parse_ompi_info(text: str) -> dict[str, tuple[OmpiAlgorithm, ...]]:
    """The forcible algorithms per collective from ``ompi_info --param coll tuned --level 9 --parsable``.

    Lines read ``mca:coll:tuned:param:coll_tuned_<coll>_algorithm:enumerator:value:<id>:<name>``; id 0
    (``ignore``, Open MPI's own choice) is left out. Collectives collbench has no op for are left out.
    """
    found: dict[str, list[OmpiAlgorithm]] = {}
    wanted = set(COLLECTIVE_FOR_OP.values())
    for line in text.splitlines():
        parts = line.strip().split(":")
        if len(parts) != 9 or parts[:4] != ["mca", "coll", "tuned", "param"] or parts[5:7] != ["enumerator", "value"]:
            continue
        var = parts[4]
        if not (var.startswith("coll_tuned_") and var.endswith("_algorithm")):
            continue
        collective = var.removeprefix("coll_tuned_").removesuffix("_algorithm")
        if collective not in wanted or not parts[7].isdigit() or int(parts[7]) == 0:
            continue
        name = parts[8]
        found.setdefault(collective, []).append(OmpiAlgorithm(int(parts[7]), name, takes_segment(collective, name)))
    return {coll: tuple(sorted(algos, key=lambda a: a.algorithm_id)) for coll, algos in found.items()}


def parameter_value(text: str, name: str) -> str | None:
    """The current value of MCA parameter ``name`` in ``ompi_info --parsable`` output (None: not listed)."""
    for line in text.splitlines():
        parts = line.strip().split(":")
        if len(parts) == 7 and parts[4] == name and parts[5] == "value":
            return parts[6]
    return None


FANOUT_PARAMETERS: dict[str, tuple[str, str]] = {
    "chain": ("chain_fanout", "chain fan-out"),
    "knomial": ("knomial_radix", "radix"),
}
"""Algorithms that read a fan-out Open MPI's forced path takes from an MCA parameter rather than the
rules file (``coll_tuned_<coll>_algorithm_<parameter>``), and what it is called."""


REQUEST_PARAMETERS: dict[tuple[str, str], tuple[str, str]] = {
    ("alltoall", "linear_sync"): ("max_requests", "outstanding-request limit"),
    ("scatter", "linear_nb"): ("max_requests", "blocking-send interval"),
}
"""(collective, algorithm) pairs that read ``coll_tuned_<coll>_algorithm_max_requests``: alltoall's
linear_sync when forced (the 4.1 rules file has no column for it and gives 0), scatter's linear_nb
always (``ompi_coll_tuned_scatter_blocking_send_ratio``, coll_tuned_scatter_decision.c)."""


def fanout_notes(text: str, forced: set[tuple[str, str]]) -> list[str]:
    """One line per forced (collective, algorithm name) whose fan-out (or request limit) is Open MPI's
    setting, with its value.

    Rows name the algorithm only: the fan-out it ran with is the one ``ompi_info`` shows.
    """
    notes = []
    for collective, name in sorted(forced):
        if (collective, name) in REQUEST_PARAMETERS:
            parameter, what = REQUEST_PARAMETERS[(collective, name)]
        elif name in FANOUT_PARAMETERS:
            parameter, what = FANOUT_PARAMETERS[name]
        else:
            continue
        full = f"coll_tuned_{collective}_algorithm_{parameter}"
        value = parameter_value(text, full)
        if value is not None:
            zero = " (none)" if value == "0" and parameter == "max_requests" else ""
            notes.append(f"native:{name} {collective} runs with Open MPI's {what} {value}{zero} ({full})")
    return notes
