"""Rules of a profile measured over Open MPI itself, as coll/tuned rules with their evidence.

``tune --backend mpi`` measures Open MPI's fixed decision (plain ``native``: nothing forced) and each
coll/tuned algorithm forced in turn (``native:<algorithm>``, the name ``ompi_info`` prints for it), and
its selection keeps the fixed decision wherever no forced algorithm beats it beyond the noise (ties go
to ``native``). So a rule here is either:

* ``native:<algorithm>``: written as that algorithm's id, with the segment size (``segment_bytes``)
  and fan-in/out (``faninout``) it ran with, and a comment of the evidence: the time measured for it
  and for the fixed decision at the same size, their ratio, and the noise the difference had to beat;
* ``native``: no rule needed. Algorithm 0 leaves the choice to Open MPI, and the comment says that
  the fixed decision was fastest within the noise there (and which forced algorithms it tied with).

The collective a row measured is its op's MPI call (``OpSpec.mpi_name``): for
reduce-scatter MPI_Reduce_scatter, so its rules go to that collective only, and MPI_Reduce_scatter_block
keeps Open MPI's own choice, since it was not measured.
"""

from __future__ import annotations

from collbench.backends import feeds
from collbench.backends.base import OMPI_EXPORTS
from collbench.errors import UserError
from collbench.exporters.ompi_table import BUILT_IN, MAX_SEGSIZE, OMPI_VERSION, OmpiCollective, OmpiRule
from collbench.profile.document import Profile
from collbench.profile.rules import Rule

NO_RULE = "no rule needed"


def measured_over_mpi(profile: Profile) -> bool:
    """Whether ``profile``'s rules were chosen among Open MPI's own algorithms."""
    return feeds(profile.backend, OMPI_EXPORTS)


def measured_here(coll: OmpiCollective) -> bool:
    """Whether an Open MPI profile's rules of ``coll.op`` were measured on ``coll`` (see the module doc)."""
    return coll.op.spec.mpi_name == coll.name


def ompi_algorithm_name(algo: str) -> str | None:
    """``ring`` of ``native:ring`` (anything after ``@`` or ``/`` dropped); None for plain ``native``."""
    head, sep, rest = algo.strip().partition(":")
    if head.strip().lower() != "native":
        raise UserError(f"{algo!r} is not one of Open MPI's own algorithms (native or native:<algorithm>)")
    name = rest.split("@", 1)[0].split("/", 1)[0].strip()
    return name or None if sep else None


def _us(value: float) -> str:
    return f"{value:.4g} us"


def _noise(rule: Rule) -> str:
    return "" if rule.noise is None else f", noise {rule.noise * 100:.1f}%"


def _at(rule: Rule) -> str:
    return "" if rule.at_bytes is None else f" at {rule.at_bytes} B"


def evidence(rule: Rule) -> str:
    """What was measured for a forced rule: its time and the fixed decision's, their ratio, the noise."""
    kind = "measured" if rule.measured_us is not None else "predicted"
    mine = rule.measured_us if rule.measured_us is not None else rule.predicted_us
    if mine is None or rule.gain_vs_native is None:
        return f"{kind}{_at(rule)}: no time of Open MPI's fixed decision to compare with"
    fixed = mine * rule.gain_vs_native
    return (
        f"{kind}{_at(rule)}: {_us(mine)} against Open MPI's fixed decision {_us(fixed)}, "
        f"{rule.gain_vs_native:.2f}x{_noise(rule)}"
    )


def no_rule_evidence(rule: Rule) -> str:
    """Why no rule is needed at a ``native`` rule: the fixed decision was fastest, or tied within the noise."""
    time = "" if rule.measured_us is None else f" ({_us(rule.measured_us)})"
    if rule.tie_with:
        why = f"tied within the noise with {', '.join(rule.tie_with)}"
    elif rule.separation is not None:
        why = f"the fastest forced algorithm {rule.separation * 100:.1f}% slower"
    else:
        why = "fastest"
    return f"{NO_RULE}: Open MPI's fixed decision{time}{_at(rule)}: {why}{_noise(rule)}"


def measured_rule(coll: OmpiCollective, rule: Rule) -> OmpiRule:
    """The coll/tuned rule for one rule of an Open MPI profile (algorithm 0 where no rule is needed).

    Raises UserError for an algorithm this Open MPI's ``coll`` does not have, or a segment size or
    fan-in/out the file cannot hold.
    """
    name = ompi_algorithm_name(rule.algo)
    if name is None:
        return OmpiRule(rule.min_bytes, BUILT_IN, 0, 0, no_rule_evidence(rule))
    algo = coll.named(name)
    if algo is None:
        known = ", ".join(a.name for a in coll.algorithms)
        raise UserError(
            f"{rule.op} rule at {rule.min_bytes} bytes: Open MPI {OMPI_VERSION}'s {coll.name} has no algorithm "
            f"{name!r} (it has {known}); was the profile measured with another Open MPI?"
        )
    seg = int(rule.params.get("segment_bytes") or 0)
    fan = int(rule.params.get("faninout") or 0)
    for what, value in (("segment size", seg), ("fan-in/out", fan)):
        if not 0 <= value <= MAX_SEGSIZE:
            raise UserError(
                f"{rule.op} rule at {rule.min_bytes} bytes: a {what} of {value} is outside what Open MPI's rules "
                f"file can hold (0 to {MAX_SEGSIZE})"
            )
    extra = (f", {seg}-byte segments" if seg else "") + (f", fan-in/out {fan}" if fan else "")
    comment = f"{rule.algo} -> {algo.name}{extra}: {evidence(rule)}"
    return OmpiRule(rule.min_bytes, algo.algorithm_id, fan, seg, comment)


def selection_header(profile: Profile) -> list[str]:
    """The file's opening comment on where its rules come from (a mapped profile's header says it already)."""
    if measured_over_mpi(profile):
        return [
            "# rules chosen among Open MPI's own algorithms, each forced in turn and measured (tune --backend mpi);",
            f"# an algorithm is forced only where it beat the fixed decision beyond the noise, elsewhere: {NO_RULE}",
        ]
    return []
