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

from collbench.schedules.ops import OP_SPECS

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
    function: str = ""
    """The ``ompi_coll_base_*`` function coll/tuned calls for it (exported by libmpi; what the exports'
    tests observe running); empty for an algorithm an installed ``ompi_info`` lists that 4.1's table lacks."""

    @property
    def algo(self) -> str:
        """The name collbench's rows give it (``native:<name>``)."""
        return NATIVE_PREFIX + self.name


UNTUNED = frozenset({"sendrecv"})
"""MPI calls of an op (``OpSpec.mpi_name``) that are not coll/tuned collectives: no algorithm to force, no
``coll_tuned_<coll>_*`` parameters, no rules; only ``native`` is measured."""


def _algos(coll: str, *entries: tuple[str, bool, str]) -> tuple[OmpiAlgorithm, ...]:
    """Algorithms 1..n in order: (ompi_info name, takes a segment size, ompi_coll_base function suffix)."""
    return tuple(
        OmpiAlgorithm(i, name, seg, f"ompi_coll_base_{coll}_{suffix}")
        for i, (name, seg, suffix) in enumerate(entries, 1)
    )


OPEN_MPI_4_1: dict[str, tuple[OmpiAlgorithm, ...]] = {
    "allreduce": _algos(
        "allreduce",
        ("basic_linear", False, "intra_basic_linear"),
        ("nonoverlapping", False, "intra_nonoverlapping"),
        ("recursive_doubling", False, "intra_recursivedoubling"),
        ("ring", False, "intra_ring"),
        ("segmented_ring", True, "intra_ring_segmented"),
        ("rabenseifner", False, "intra_redscat_allgather"),
    ),
    "bcast": _algos(
        "bcast",
        ("basic_linear", False, "intra_basic_linear"),
        ("chain", True, "intra_chain"),
        ("pipeline", True, "intra_pipeline"),
        ("split_binary_tree", True, "intra_split_bintree"),
        ("binary_tree", True, "intra_bintree"),
        ("binomial", True, "intra_binomial"),
        ("knomial", True, "intra_knomial"),
        ("scatter_allgather", True, "intra_scatter_allgather"),
        ("scatter_allgather_ring", True, "intra_scatter_allgather_ring"),
    ),
    "reduce": _algos(
        "reduce",
        ("linear", False, "intra_basic_linear"),
        ("chain", True, "intra_chain"),
        ("pipeline", True, "intra_pipeline"),
        ("binary", True, "intra_binary"),
        ("binomial", True, "intra_binomial"),
        ("in-order_binary", True, "intra_in_order_binary"),
        ("rabenseifner", False, "intra_redscat_gather"),
    ),
    "allgather": _algos(
        "allgather",
        ("linear", False, "intra_basic_linear"),
        ("bruck", False, "intra_bruck"),
        ("recursive_doubling", False, "intra_recursivedoubling"),
        ("ring", False, "intra_ring"),
        ("neighbor", False, "intra_neighborexchange"),
        ("two_proc", False, "intra_two_procs"),
    ),
    "reduce_scatter": _algos(
        "reduce_scatter",
        ("non-overlapping", False, "intra_nonoverlapping"),
        ("recursive_halving", False, "intra_basic_recursivehalving"),
        ("ring", False, "intra_ring"),
        ("butterfly", False, "intra_butterfly"),
    ),
    # coll_tuned_alltoall_decision.c: 4 (linear_sync) reads max_requests, not a segment size.
    "alltoall": _algos(
        "alltoall",
        ("linear", False, "intra_basic_linear"),
        ("pairwise", False, "intra_pairwise"),
        ("modified_bruck", False, "intra_bruck"),
        ("linear_sync", False, "intra_linear_sync"),
        ("two_proc", False, "intra_two_procs"),
    ),
    # coll_tuned_gather_decision.c: 3 (linear_sync) passes segsize as its first segment's size.
    "gather": _algos(
        "gather",
        ("basic_linear", False, "intra_basic_linear"),
        ("binomial", False, "intra_binomial"),
        ("linear_sync", True, "intra_linear_sync"),
    ),
    # coll_tuned_scatter_decision.c: 3 (linear_nb) reads the blocking-send ratio (max_requests).
    "scatter": _algos(
        "scatter",
        ("basic_linear", False, "intra_basic_linear"),
        ("binomial", False, "intra_binomial"),
        ("linear_nb", False, "intra_linear_nb"),
    ),
    "barrier": _algos(
        "barrier",
        ("linear", False, "intra_basic_linear"),
        ("double_ring", False, "intra_doublering"),
        ("recursive_doubling", False, "intra_recursivedoubling"),
        ("bruck", False, "intra_bruck"),
        ("two_proc", False, "intra_two_procs"),
        ("tree", False, "intra_tree"),
    ),
    # coll_tuned_{scan,exscan}_decision.c: no segment size parameter. linear is a chain (rank r waits
    # for r-1's prefix), recursive_doubling a butterfly over partners r ^ 2^k (coll_base_scan.c,
    # coll_base_exscan.c).
    "scan": _algos("scan", ("linear", False, "intra_linear"), ("recursive_doubling", False, "intra_recursivedoubling")),
    "exscan": _algos(
        "exscan", ("linear", False, "intra_linear"), ("recursive_doubling", False, "intra_recursivedoubling")
    ),
}
REDUCE_SCATTER_BLOCK_4_1: tuple[OmpiAlgorithm, ...] = _algos(
    "reduce_scatter_block",
    ("basic_linear", False, "basic_linear"),
    ("recursive_doubling", False, "intra_recursivedoubling"),
    ("recursive_halving", False, "intra_recursivehalving"),
    ("butterfly", False, "intra_butterfly"),
)
"""MPI_Reduce_scatter_block's algorithms (coll_tuned_reduce_scatter_block_decision.c): no op of its own (it is
never measured), its rules are written from reduce-scatter's (``export ompi-rules``)."""


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
    wanted = {spec.mpi_name for spec in OP_SPECS.values()}
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
        known = next((a for a in OPEN_MPI_4_1.get(collective, ()) if a.name == name), None)
        function = known.function if known is not None else ""
        found.setdefault(collective, []).append(
            OmpiAlgorithm(int(parts[7]), name, takes_segment(collective, name), function)
        )
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
