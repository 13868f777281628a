"""Open MPI coll/tuned dynamic rules, classic text format.

Grammar (Open MPI's ``coll_tuned_dynamic_file.c``): whitespace-separated integers, ``#`` to the end of
a line is a comment::

    NCOLLECTIVES
      COLL_ID NCOMSIZES
        COMSIZE NMSGSIZES
          MSGSIZE ALGORITHM FANINOUT SEGSIZE

The first message rule of a communicator size must be at size 0 (Open MPI rejects the whole file
otherwise); each covers ``[its size, the next one's)``, the last to infinity: exactly the profile's
contiguous inclusive ranges. Algorithm 0 means "Open MPI's built-in decision". One communicator-size
entry, the profile's world size, is written: with a single entry both the older lookup (largest key at
or below the communicator's size) and the newer one (the last entry reaches to INT_MAX) apply it at
that size.

Message size: Open MPI counts dtype size x count for allreduce and reduce, and dtype size x comm size x
count for allgather: the same bytes as collbench's ``size_bytes`` (nccl-tests' convention).

Algorithm numbers (Open MPI main, ``coll_tuned_<op>_decision.c``):

* allreduce (id 2): ring 4 (5, segmented ring, when the rule carries a segment size), recursive
  doubling 3, rabenseifner 6, direct 1. collbench's ``direct`` sends every buffer to one root and the
  result back, which is Open MPI's *basic linear* (linear reduce to rank 0, linear bcast); algorithm 2
  (*nonoverlapping*) is reduce then bcast through the tuned, tree-shaped reduce and bcast: not direct.
* allgather (id 0): ring 4, recursive doubling 3, direct 1 (linear: gather to a root, then bcast).
* reduce (id 11): direct 1 (linear), tree 4 (segmented binary tree), rabenseifner 7.
* anything else (native, tree and two-tree for allreduce, one-shot, broadcast, reduce-scatter): 0 with
  a comment: Open MPI keeps its built-in choice there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from collbench.schedules.ops import Op
from collbench.tuning.profile import Profile
from collbench.tuning.selection import Rule

COLL_IDS: dict[Op, int] = {
    Op.ALL_GATHER: 0,
    Op.ALL_REDUCE: 2,
    Op.BROADCAST: 7,
    Op.REDUCE: 11,
    Op.REDUCE_SCATTER: 12,
}
OMPI_NAMES: dict[Op, str] = {
    Op.ALL_GATHER: "allgather",
    Op.ALL_REDUCE: "allreduce",
    Op.BROADCAST: "bcast",
    Op.REDUCE: "reduce",
    Op.REDUCE_SCATTER: "reduce_scatter",
}
ALGORITHMS: dict[Op, dict[str, int]] = {
    Op.ALL_REDUCE: {"direct": 1, "recursive-doubling": 3, "ring": 4, "rabenseifner": 6},
    Op.ALL_GATHER: {"direct": 1, "recursive-doubling": 3, "ring": 4},
    Op.REDUCE: {"direct": 1, "tree": 4, "rabenseifner": 7},
}
SEGMENTED_RING = 5
BUILT_IN = 0


@dataclass(frozen=True, slots=True)
class OmpiRule:
    """One message-size rule: from ``msg_size_bytes`` up to the next rule's size."""

    msg_size_bytes: int
    algorithm: int
    faninout: int
    segsize_bytes: int
    comment: str


def ompi_rule(op: Op, rule: Rule) -> OmpiRule:
    """The Open MPI rule for one collbench rule (algorithm 0 with a reason where there is no match)."""
    numbers = ALGORITHMS.get(op, {})
    seg = int(rule.params.get("segment_bytes") or 0)
    if rule.algo == "native" or rule.algo.startswith("native:"):
        return OmpiRule(rule.min_bytes, BUILT_IN, 0, 0, f"{rule.algo}: Open MPI's built-in choice")
    if rule.algo not in numbers:
        why = (
            f"Open MPI's {OMPI_NAMES[op]} has no algorithm matching collbench's {rule.algo}"
            if numbers
            else f"{op.value} algorithms are not mapped to Open MPI numbers"
        )
        return OmpiRule(rule.min_bytes, BUILT_IN, 0, 0, f"{rule.algo}: {why}; built-in choice")
    number = numbers[rule.algo]
    if op is Op.ALL_REDUCE and rule.algo == "ring" and seg > 0:
        return OmpiRule(rule.min_bytes, SEGMENTED_RING, 0, seg, f"ring in {seg}-byte segments: segmented ring")
    return OmpiRule(rule.min_bytes, number, 0, seg if number == 4 and op is Op.REDUCE else 0, rule.algo)


def export_ompi_rules(profile: Profile) -> str:
    """The rules file for ``profile``; ops Open MPI has no collective id for are left out."""
    sections: list[tuple[Op, list[OmpiRule]]] = []
    for name in profile.ops:
        op = Op.parse(name)
        if op not in COLL_IDS:
            continue
        merged: list[OmpiRule] = []
        for rule in profile.rules_for(op):
            entry = ompi_rule(op, rule)
            last = merged[-1] if merged else None
            if last and (last.algorithm, last.faninout, last.segsize_bytes) == (
                entry.algorithm,
                entry.faninout,
                entry.segsize_bytes,
            ):
                # The same Open MPI choice continues: one rule covers both ranges, both reasons kept.
                merged[-1] = replace(last, comment=f"{last.comment}; from {entry.msg_size_bytes} B {entry.comment}")
                continue
            merged.append(entry)
        sections.append((op, merged))
    out = [
        "# Open MPI coll/tuned dynamic rules made by collbench from a profile",
        f"# machine {profile.fingerprint} ({profile.host}), backend {profile.backend}, "
        f"{profile.world_size} ranks on {profile.nodes} node(s)",
        "# use: mpirun --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename <this file>",
        "# MSGSIZE ALGORITHM FANINOUT SEGSIZE; algorithm 0 = Open MPI's built-in choice",
        f"{len(sections)}  # number of collectives",
    ]
    for op, entries in sections:
        out.append(f"{COLL_IDS[op]} 1  # {OMPI_NAMES[op]} ({op.value}), one communicator size")
        out.append(f"  {profile.world_size} {len(entries)}  # communicator size, number of message sizes")
        for e in entries:
            out.append(f"    {e.msg_size_bytes} {e.algorithm} {e.faninout} {e.segsize_bytes}  # {e.comment}")
    return "\n".join(out) + "\n"
