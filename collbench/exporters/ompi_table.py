"""What Open MPI 4.1's coll/tuned can run, per collective, and which collbench algorithm each one matches.

Read from Open MPI v4.1.4 (the version Debian 12 ships as openmpi-bin 4.1.4): the algorithm ids are
the ``case`` labels of ``ompi_coll_tuned_<coll>_intra_do_this`` in
``ompi/mca/coll/tuned/coll_tuned_<coll>_decision.c``, with the function each one calls, and they
agree with the names ``ompi_info --param coll tuned --level 9`` prints for 4.1. The collective ids are
the ``COLLTYPE_T`` enum of ``ompi/mca/coll/base/coll_base_functions.h`` (the rules file's first number
of each section). The message size each collective's rules compare with is from
``coll_tuned_decision_dynamic.c``: bytes of one rank's buffer for allreduce, bcast and reduce, the
whole gathered buffer (comm size x count) for allgather, the whole input (the sum of the receive
counts) for reduce_scatter and reduce_scatter_block, comm size x the send count for alltoall (one
rank's whole send buffer), gather and scatter (the whole gathered or scattered buffer): nccl-tests'
``size`` in every case, collbench's ``size_bytes``. Barrier's rules are looked up at size 0 always
(``ompi_coll_tuned_barrier_intra_dec_dynamic``), so only its first rule, at 0, is ever applied.

exscan (8) and scan (14) were read from v4.1.4's ``coll_tuned_{exscan,scan}_decision.c`` (1 linear, 2
recursive_doubling; no segment size) and the same enum; their rules are looked up at dtype size x count,
one rank's buffer. alltoall (collective id 3), barrier (6), gather (9) and scatter (15) were read from the same v4.1.4
files (``coll_tuned_{alltoall,barrier,gather,scatter}_decision.c``, the ``COLLTYPE_T`` enum and
``coll_tuned_decision_dynamic.c``); Open MPI v5.0.0 and v5.0.9 have the same ids, names, functions and
enum values for them.

An algorithm id that ``do_this`` does not know makes the collective itself fail in the job, so the
exporter writes only ids from this table. Algorithm 0 leaves the choice to coll/tuned's fixed
decision rules (``coll_tuned_decision_fixed.c``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collbench.ompi.algorithms import OPEN_MPI_4_1, REDUCE_SCATTER_BLOCK_4_1, OmpiAlgorithm
from collbench.schedules.ops import Op

OMPI_VERSION = "4.1"
OMPI_SOURCE = "Open MPI v4.1.4, ompi/mca/coll/tuned/coll_tuned_*_decision.c"
BUILT_IN = 0
OWN_CHOICE = "Open MPI's own choice (its fixed decision rules)"
MAX_SEGSIZE = (1 << 31) - 1
"""Open MPI reads every number of the rules file with strtol into a long, then keeps the segment size in an int."""


@dataclass(frozen=True, slots=True)
class OmpiRule:
    """One message-size rule of the rules file: from ``msg_size_bytes`` up to the next rule's size."""

    msg_size_bytes: int
    algorithm: int
    faninout: int
    segsize_bytes: int
    comment: str
    equivalent: bool = True
    """False when the profile's algorithm has no Open MPI counterpart and 0 stands in for it."""


@dataclass(frozen=True, slots=True)
class MatchRule:
    """A collbench algorithm's counterpart: the Open MPI algorithm, and whether the segment size carries.

    ``segmented_id`` is used instead of ``algorithm_id`` when the collbench rule has a segment size and
    Open MPI has a separate segmented variant (allreduce: ring 4, segmented ring 5).
    """

    algorithm_id: int
    why: str
    carries_segment: bool = False
    segmented_id: int | None = None


@dataclass(frozen=True, slots=True)
class OmpiCollective:
    """One collective of coll/tuned: its id, the algorithms it has, and collbench's matches."""

    name: str
    coll_id: int
    op: Op
    mpi_call: str
    algorithms: tuple[OmpiAlgorithm, ...]
    matches: dict[str, MatchRule] = field(default_factory=dict)
    no_match: dict[str, str] = field(default_factory=dict)
    """Why a collbench algorithm has no counterpart here (what Open MPI has that looks close, and why not)."""

    def algorithm(self, algorithm_id: int) -> OmpiAlgorithm:
        """The algorithm with this id; KeyError for an id coll/tuned does not have."""
        for algo in self.algorithms:
            if algo.algorithm_id == algorithm_id:
                return algo
        raise KeyError(f"Open MPI {OMPI_VERSION} {self.name} has no algorithm {algorithm_id}")

    def named(self, name: str) -> OmpiAlgorithm | None:
        """The algorithm ``ompi_info`` calls ``name`` (any case, dashes or underscores); None if none."""
        key = name.strip().lower().replace("-", "_")
        return next((a for a in self.algorithms if a.name.lower().replace("-", "_") == key), None)


SIZE_ZERO_ONLY = frozenset({"barrier"})
"""Collectives whose rules Open MPI looks up at message size 0 whatever the call (no payload)."""


_NO_NODE_AWARE = "coll/tuned has no node-aware algorithm (Open MPI's coll/han is one, outside these rules)"


def _prefix_scan(name: str, coll_id: int, op: Op, mpi_call: str) -> OmpiCollective:
    # scan and exscan have the same two algorithms in 4.1 (linear, recursive_doubling), and collbench's
    # scan algorithms meet them the same way: one home for both, so the two cannot drift apart.
    return OmpiCollective(
        name,
        coll_id,
        op,
        mpi_call,
        OPEN_MPI_4_1[name],
        matches={
            "linear": MatchRule(1, "linear: the chain, rank r takes rank r-1's prefix and passes its own on"),
        },
        no_match={
            "recursive-doubling": "Open MPI's recursive_doubling is a butterfly (partners r ^ 2^k exchange "
            "partial results both ways); collbench's is Hillis-Steele (to r + 2^k only)",
            "blelloch": "Open MPI has no up-sweep/down-sweep scan",
        },
    )


COLLECTIVES: tuple[OmpiCollective, ...] = (
    OmpiCollective(
        "allgather",
        0,
        Op.ALL_GATHER,
        "MPI_Allgather",
        OPEN_MPI_4_1["allgather"],
        matches={
            "direct": MatchRule(1, "linear: gather at rank 0, then broadcast from it"),
            "recursive-doubling": MatchRule(3, "recursive doubling"),
            "ring": MatchRule(4, "ring"),
        },
        no_match={
            "hierarchical": _NO_NODE_AWARE,
            "one-shot": "Open MPI's allgather has no one-step all-to-all exchange (bruck and neighbor exchange "
            "take log2(n) and n/2 steps)",
        },
    ),
    OmpiCollective(
        "allreduce",
        2,
        Op.ALL_REDUCE,
        "MPI_Allreduce",
        OPEN_MPI_4_1["allreduce"],
        matches={
            "direct": MatchRule(1, "basic linear: linear reduce at rank 0, linear broadcast from it"),
            "recursive-doubling": MatchRule(3, "recursive doubling"),
            "ring": MatchRule(4, "ring", carries_segment=True, segmented_id=5),
            "rabenseifner": MatchRule(6, "rabenseifner (recursive halving reduce-scatter + doubling allgather)"),
        },
        no_match={
            "hierarchical": _NO_NODE_AWARE,
            "tree": "Open MPI's allreduce has no tree (nonoverlapping is reduce then bcast, each with coll/tuned's "
            "own choice)",
            "two-tree": "Open MPI's allreduce has no double binary tree",
            "one-shot": "Open MPI's allreduce has no one-step exchange",
        },
    ),
    OmpiCollective(
        "alltoall",
        3,
        Op.ALL_TO_ALL,
        "MPI_Alltoall",
        OPEN_MPI_4_1["alltoall"],
        matches={
            "linear": MatchRule(1, "basic linear: every pair's send and receive posted at once"),
            "pairwise": MatchRule(2, "pairwise exchange: n-1 steps, step s to rank+s and from rank-s"),
            "bruck": MatchRule(3, "modified Bruck: log2(n) steps of combined blocks"),
        },
        no_match={
            "topo-pairwise": "Open MPI's pairwise exchange goes in rank order (step s: to rank+s, from rank-s); it "
            "takes no order from the layout",
        },
    ),
    OmpiCollective(
        "barrier",
        6,
        Op.BARRIER,
        "MPI_Barrier",
        OPEN_MPI_4_1["barrier"],
        matches={
            "dissemination": MatchRule(4, "bruck: the dissemination barrier (step k: to rank+2^k, from rank-2^k)"),
            "tree": MatchRule(6, "tree: up a binomial tree to rank 0 and back down"),
        },
    ),
    OmpiCollective(
        "bcast",
        7,
        Op.BROADCAST,
        "MPI_Bcast",
        OPEN_MPI_4_1["bcast"],
        matches={
            "direct": MatchRule(1, "basic linear: the root sends the buffer to every rank"),
            "one-shot": MatchRule(1, "basic linear: the root sends the buffer to every rank in one step"),
            "ring": MatchRule(3, "pipeline: one chain through every rank, in segments", carries_segment=True),
            "tree": MatchRule(5, "binary tree, in segments", carries_segment=True),
        },
        no_match={
            "two-tree": "Open MPI's split binary tree sends each half down one subtree and then swaps halves "
            "between them: not the double binary tree",
        },
    ),
    _prefix_scan("exscan", 8, Op.EXSCAN, "MPI_Exscan"),
    OmpiCollective(
        "gather",
        9,
        Op.GATHER,
        "MPI_Gather",
        OPEN_MPI_4_1["gather"],
        matches={
            "linear": MatchRule(1, "basic linear: every rank sends its block to the root"),
            "binomial": MatchRule(2, "binomial tree to the root"),
        },
    ),
    OmpiCollective(
        "reduce",
        11,
        Op.REDUCE,
        "MPI_Reduce",
        OPEN_MPI_4_1["reduce"],
        matches={
            "direct": MatchRule(1, "linear: every rank sends to the root, which reduces"),
            "one-shot": MatchRule(1, "linear: every rank sends to the root in one step"),
            "ring": MatchRule(3, "pipeline: one chain through every rank, in segments", carries_segment=True),
            "tree": MatchRule(4, "binary tree, in segments", carries_segment=True),
            "rabenseifner": MatchRule(7, "rabenseifner (recursive halving reduce-scatter + binomial gather)"),
        },
        no_match={
            "two-tree": "Open MPI's reduce has no double binary tree",
        },
    ),
    OmpiCollective(
        "reduce_scatter",
        12,
        Op.REDUCE_SCATTER,
        "MPI_Reduce_scatter",
        OPEN_MPI_4_1["reduce_scatter"],
        matches={
            "direct": MatchRule(1, "non-overlapping: reduce at rank 0, then scatter from it"),
            "rabenseifner": MatchRule(2, "recursive halving (Rabenseifner's reduce-scatter half)"),
            "ring": MatchRule(3, "ring"),
        },
        no_match={
            "hierarchical": _NO_NODE_AWARE,
            "one-shot": "Open MPI's reduce_scatter has no one-step exchange (butterfly takes log2(n) steps)",
        },
    ),
    OmpiCollective(
        "reduce_scatter_block",
        13,
        Op.REDUCE_SCATTER,
        "MPI_Reduce_scatter_block",
        REDUCE_SCATTER_BLOCK_4_1,
        matches={
            "direct": MatchRule(1, "basic linear: reduce at rank 0, then scatter from it"),
            "rabenseifner": MatchRule(3, "recursive halving (Rabenseifner's reduce-scatter half)"),
        },
        no_match={
            "hierarchical": _NO_NODE_AWARE,
            "ring": "Open MPI 4.1's reduce_scatter_block has no ring",
            "one-shot": "Open MPI's reduce_scatter_block has no one-step exchange",
        },
    ),
    _prefix_scan("scan", 14, Op.SCAN, "MPI_Scan"),
    OmpiCollective(
        "scatter",
        15,
        Op.SCATTER,
        "MPI_Scatter",
        OPEN_MPI_4_1["scatter"],
        matches={
            "linear": MatchRule(1, "basic linear: the root sends each rank its block"),
            "binomial": MatchRule(2, "binomial tree from the root"),
        },
    ),
)


def collectives_for(op: Op) -> list[OmpiCollective]:
    """The coll/tuned collectives a collbench op's rules drive (reduce-scatter drives two)."""
    return [c for c in COLLECTIVES if c.op is op]
