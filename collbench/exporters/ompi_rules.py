"""Open MPI coll/tuned dynamic rules, classic text format, for every communicator size a profile has.

Grammar (Open MPI's ``coll_tuned_dynamic_file.c``): whitespace-separated integers, ``#`` to the end of
a line is a comment::

    NCOLLECTIVES
      COLL_ID NCOMSIZES
        COMSIZE NMSGSIZES
          MSGSIZE ALGORITHM FANINOUT SEGSIZE

The first message rule of a communicator size must be at size 0 (Open MPI rejects the whole file
otherwise, silently); each covers ``[its size, the next one's)``, the last to infinity: exactly the
profile's contiguous inclusive ranges.

Scoping (``ompi_coll_tuned_get_com_rule_ptr`` in 4.1): a communicator takes the entry of the largest
listed size at or below its own, and a communicator smaller than every listed size takes the *first*
entry. So every size the profile has gets its entry, followed by an entry at size + 1 whose only rule
is ``0 0 0 0`` (Open MPI's own choice) unless the next size follows at once, and, when the smallest
size is above 1, a leading entry at size 1 with the same: other communicator sizes get Open MPI's own
decision, not rules measured at another size.

Which rules. A profile measured over Open MPI itself (``tune --backend mpi``) chose, per op, size and
communicator size, among Open MPI's own algorithms (``native:<algorithm>``, each forced in turn) and
its fixed decision (plain ``native``, nothing forced): each forced rule is written with its evidence
(the measured times, the ratio over the fixed decision, the noise it beat), and where the fixed
decision was fastest within the noise the file says "no rule needed" and leaves the choice to Open
MPI (algorithm 0). A profile measured over another backend (gloo, nccl) says which of collbench's
algorithms won there, not which of Open MPI's runs fastest: it is refused (:func:`.serving.check_serves`)
unless the user asks for it, and then each collbench algorithm is mapped by :mod:`.ompi_table` (Open
MPI 4.1's algorithms, with the source they were read from); a rule with no Open MPI counterpart is
written as algorithm 0 with a comment saying so and what Open MPI does there instead, and reported
in :attr:`OmpiRules.notes`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from collbench.backends.base import OMPI_EXPORTS
from collbench.errors import UserError
from collbench.exporters.exported import wrap_comments
from collbench.exporters.ompi_measured import (
    measured_here,
    measured_over_mpi,
    measured_rule,
    selection_header,
)
from collbench.exporters.ompi_table import (
    BUILT_IN,
    COLLECTIVES,
    MAX_SEGSIZE,
    OMPI_SOURCE,
    OMPI_VERSION,
    OWN_CHOICE,
    SIZE_ZERO_ONLY,
    OmpiCollective,
    OmpiRule,
)
from collbench.exporters.serving import check_serves
from collbench.ompi.algorithms import UNTUNED
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.schedules.ops import Op
from collbench.text import printable
from collbench.units import counted, ranks_on_nodes


@dataclass(frozen=True, slots=True)
class OmpiRules:
    """The rules file's text, one line per profile rule that Open MPI cannot follow, and one per range
    where Open MPI's fixed decision was already fastest (no rule needed)."""

    text: str
    notes: tuple[str, ...]
    unneeded: tuple[str, ...] = ()


def ompi_rule(coll: OmpiCollective, rule: Rule) -> OmpiRule:
    """The Open MPI rule for one collbench rule (algorithm 0, with the reason, where there is no match)."""
    if rule.algo.native:
        return OmpiRule(rule.min_bytes, BUILT_IN, 0, 0, f"{rule.algo}: {OWN_CHOICE}")
    match = coll.matches.get(rule.algo)
    if match is None:
        why = coll.no_match.get(rule.algo, f"Open MPI's {coll.name} has no algorithm matching collbench's {rule.algo}")
        return OmpiRule(
            rule.min_bytes, BUILT_IN, 0, 0, f"{rule.algo} has no equivalent: {why}; {OWN_CHOICE} runs instead", False
        )
    seg = int(rule.params.get("segment_bytes") or 0) if match.carries_segment else 0
    if seg > MAX_SEGSIZE:
        raise UserError(
            f"{rule.op} rule at {rule.min_bytes} bytes: a {seg}-byte segment is more than Open MPI's rules file "
            f"can hold ({MAX_SEGSIZE})"
        )
    number = match.segmented_id if seg and match.segmented_id is not None else match.algorithm_id
    name = coll.algorithm(number).name
    comment = f"{rule.algo} -> {name}: {match.why}" + (f", {seg}-byte segments" if seg else "")
    return OmpiRule(rule.min_bytes, number, 0, seg, comment)


def _merged(coll: OmpiCollective, rules: list[Rule], measured: bool) -> list[OmpiRule]:
    merged: list[OmpiRule] = []
    for rule in rules:
        entry = measured_rule(coll, rule) if measured else ompi_rule(coll, rule)
        last = merged[-1] if merged else None
        if last and (last.algorithm, last.faninout, last.segsize_bytes) == (
            entry.algorithm,
            entry.faninout,
            entry.segsize_bytes,
        ):
            # The same Open MPI choice continues: one rule covers both ranges, both reasons kept.
            merged[-1] = replace(
                last,
                comment=f"{last.comment}; from {entry.msg_size_bytes} B {entry.comment}",
                equivalent=last.equivalent and entry.equivalent,
            )
            continue
        merged.append(entry)
    return merged


def _applied(coll: OmpiCollective, rules: list[Rule], where: str, notes: list[str]) -> list[Rule]:
    """The rules Open MPI can apply: for barrier (looked up at size 0) only the one covering 0, each
    other named in ``notes``."""
    if coll.name not in SIZE_ZERO_ONLY or len(rules) <= 1:
        return rules
    kept = [next((r for r in rules if r.covers(0)), rules[0])]
    notes += [
        f"{coll.name} at {where}, from {r.min_bytes} B: {r.algo} is never applied (Open MPI looks up "
        f"{coll.mpi_call}'s rules at size 0; the rule at 0 stands for every call)"
        for r in rules
        if r is not kept[0]
    ]
    return [replace(kept[0], min_bytes=0, max_bytes=None)]


def _check_sizes(profile: Profile) -> list[RuleSet]:
    """The rule sets by communicator size; UserError where two shapes share a size (Open MPI keys on size)."""
    by_size: dict[int, RuleSet] = {}
    for rule_set in profile.rule_sets:
        other = by_size.get(rule_set.world_size)
        if other is not None:
            raise UserError(
                f"Open MPI's rules key on the communicator size alone, and the profile has two shapes of "
                f"{rule_set.world_size} ranks ({other.shape_label}; {rule_set.shape_label}): merge or tune "
                "profiles with one shape per size for Open MPI"
            )
        by_size[rule_set.world_size] = rule_set
    return [by_size[size] for size in sorted(by_size)]


def _entry(size: int, rules: list[OmpiRule], label: str) -> list[str]:
    lines = [f"  {size} {len(rules)}  # {label}"]
    lines += [f"    {r.msg_size_bytes} {r.algorithm} {r.faninout} {r.segsize_bytes}  # {r.comment}" for r in rules]
    return lines


def build_ompi_rules(profile: Profile, *, from_other_backend: bool = False) -> OmpiRules:
    """The rules file for every communicator size of ``profile``, the rules Open MPI cannot follow, and
    where no rule is needed (a profile measured over Open MPI, whose fixed decision was fastest there).

    Raises UserError when the profile was measured over a backend other than Open MPI and
    ``from_other_backend`` is not set, when two of the profile's shapes have the same world size (Open
    MPI's rules cannot tell them apart), or a rule does not fit the file or this Open MPI.
    """
    check_serves(OMPI_EXPORTS, profile.backend, from_other_backend)
    measured = measured_over_mpi(profile)
    sets = _check_sizes(profile)
    own = [OmpiRule(0, BUILT_IN, 0, 0, OWN_CHOICE)]
    ops = {Op.parse(name) for name in profile.ops}
    sections: list[list[str]] = []
    notes: list[str] = []
    unneeded: list[str] = []
    for coll in COLLECTIVES:
        if coll.op not in ops:
            continue
        entries: list[list[str]] = []
        if sets[0].world_size > 1:
            entries.append(_entry(1, own, f"fewer than {sets[0].world_size} ranks: {OWN_CHOICE}"))
        for i, rule_set in enumerate(sets):
            kind = "predicted from the fitted models, not measured" if rule_set.predicted else "measured"
            label = f"{ranks_on_nodes(rule_set.world_size, rule_set.nodes)}, {kind}"
            if measured and coll.op.value in rule_set.ops and not measured_here(coll):
                why = f"{label}; {coll.mpi_call} was not measured (collbench's {coll.op.value} measures another)"
                entries.append(_entry(rule_set.world_size, own, f"{why}: {OWN_CHOICE}"))
            elif coll.op.value in rule_set.ops:
                chosen = _applied(coll, list(rule_set.rules_for(coll.op)), rule_set.shape_label, notes)
                rules = _merged(coll, chosen, measured)
                entries.append(_entry(rule_set.world_size, rules, label))
                if measured:
                    unneeded += [
                        f"{coll.name} at {rule_set.shape_label}, from {r.msg_size_bytes} B: {r.comment}"
                        for r in rules
                        if r.algorithm == BUILT_IN
                    ]
                notes += [
                    f"{coll.name} at {rule_set.shape_label}, from {r.msg_size_bytes} B: {r.comment}"
                    for r in rules
                    if not r.equivalent
                ]
            else:
                entries.append(_entry(rule_set.world_size, own, f"{label}; no {coll.op.value} rules: {OWN_CHOICE}"))
            following = sets[i + 1].world_size if i + 1 < len(sets) else None
            if following != rule_set.world_size + 1:
                if following is None:
                    upto = "larger communicators"
                elif following == rule_set.world_size + 2:
                    upto = f"{rule_set.world_size + 1} ranks"
                else:
                    upto = f"{rule_set.world_size + 1} to {following - 1} ranks"
                entries.append(_entry(rule_set.world_size + 1, own, f"{upto}: {OWN_CHOICE}"))
        head = f"{coll.coll_id} {len(entries)}  # {coll.name} ({coll.mpi_call}, collbench's {coll.op.value})"
        sections.append([head] + [line for entry in entries for line in entry])
    shapes = ", ".join(
        f"{s.world_size} ({counted(s.nodes, 'node')}, {'predicted' if s.predicted else 'measured'})" for s in sets
    )
    host = printable(profile.host)  # someone else's profile: its host may hold terminal escapes
    out = [
        "# Open MPI coll/tuned dynamic rules made by collbench from a profile",
        f"# for Open MPI {OMPI_VERSION} (algorithm ids from {OMPI_SOURCE})",
        f"# machine {profile.fingerprint} ({host}), backend {profile.backend}; communicator sizes: {shapes}",
        "# a communicator takes the entry of the largest size at or below its own (the first entry if smaller than "
        "all): the 0 0 0 0 entries around each size leave every other size to Open MPI's own choice",
        "# use: mpirun --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename <this file>",
        "# MSGSIZE ALGORITHM FANINOUT SEGSIZE; algorithm 0 = Open MPI's own choice",
    ]
    out += selection_header(profile)
    for op in (op for op in Op if op in ops):
        collective = op.spec.mpi_name
        if collective in UNTUNED:
            out.append(
                f"# {op.value}: MPI_{collective.capitalize()} is point-to-point; coll/tuned has no algorithm or "
                "rules for it (none written)"
            )
    out += [f"# no equivalent: {note}" for note in notes]
    out.append(f"{len(sections)}  # number of collectives")
    for section in sections:
        out += section
    return OmpiRules(wrap_comments("\n".join(out) + "\n", trailing=True), tuple(notes), tuple(unneeded))


def export_ompi_rules(profile: Profile, *, from_other_backend: bool = False) -> str:
    """The rules file for ``profile`` (see :func:`build_ompi_rules`)."""
    return build_ompi_rules(profile, from_other_backend=from_other_backend).text
