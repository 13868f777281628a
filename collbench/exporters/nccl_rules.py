"""A profile's rules as NCCL choices: what NCCL can run for each rule, and why not where it cannot.

Both NCCL exporters (the tuner config and ``NCCL_ALGO``) start here, so they agree on what a rule means
for NCCL. The facts are :mod:`collbench.nccl`'s, as :mod:`collbench.tuning.consumers.nccl` asks them.

* ``native``: NCCL's own choice; nothing to write.
* ``native:ALGO[/PROTO]``: NCCL itself forced, as measured on GPUs. It must be something NCCL can run
  for that collective and shape (a profile claiming ``native:tree`` for broadcast, or ``nvls_tree`` on
  one node, was not measured by NCCL): such a profile is refused with one line.
* collbench's ``ring`` is NCCL's ring and ``tree``/``two-tree`` NCCL's tree (a double binary tree over
  nodes), for the collectives NCCL runs them for (tree: all-reduce only). Other algorithms have no
  NCCL equivalent; NCCL keeps its own choice in their ranges.

Which rules: a rule set measured over NCCL keeps a selection among NCCL's own variants
(``RuleSet.nccl_rules``), and the exports are built from it alone (:func:`nccl_selection`); where
collbench's own algorithm won overall, they say so in a comment (:func:`collbench_wins`). A rule set
without one (another backend, predicted, or a profile written before collbench kept it) is mapped
as above. A profile measured over another backend is refused (:func:`.serving.check_serves`) unless the user
asks for it: its rules say what won over that backend, not what NCCL runs best.

All-to-all, scatter, gather, send/recv and barrier get no NCCL rules: NCCL runs them as grouped
``ncclSend``/``ncclRecv`` (nccl-tests' ``alltoall.cu``, ``scatter.cu``, ``gather.cu``, ``sendrecv.cu``),
never through ``ncclTopoTuneModel``, so there is no algorithm or protocol to set. :func:`nccl_selection`
leaves their rules out and each export says so in one comment line (:func:`untuned_lines`).
"""

from __future__ import annotations

from dataclasses import dataclass

from collbench.backends import feeds
from collbench.backends.base import NCCL_EXPORTS
from collbench.errors import UserError
from collbench.nccl.algorithms import NcclAlgorithm, algorithm, protocol_number
from collbench.nccl.channels import MAX_CHANNELS, MAX_CHANNELS_OLDEST, since_text
from collbench.nccl.variants import parse_native_variant
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import AlgoRef, Rule
from collbench.schedules.ops import NCCL_TUNED_OPS, SCAN_OPS, Op
from collbench.schedules.registry import get_algorithm
from collbench.tuning.consumers.nccl import condition, why_not
from collbench.units import ranks_on_nodes

COLLBENCH_TO_NCCL: dict[str, str] = {"ring": "ring", "tree": "tree", "two-tree": "tree"}


def measured_over_nccl(profile: Profile) -> bool:
    """Whether ``profile``'s rules were chosen among NCCL's own variants (its backend feeds NCCL's exports)."""
    return feeds(profile.backend, NCCL_EXPORTS)


def _keeps_nccl_selections(profile: Profile) -> bool:
    return any(s.nccl_rules is not None for s in profile.rule_sets)


def nccl_selection(shape: RuleSet, profile: Profile) -> tuple[Rule, ...]:
    """The rules an NCCL export follows for ``shape`` of ``profile``.

    Its selection among NCCL's own variants where it has one. Where it has none but the profile's other
    shapes have (a shape predicted from the fits, or joined from an older profile), NCCL's own choice
    for each of its ops: none of NCCL's variants was measured there, and a mapping of collbench's
    algorithms onto NCCL's is what the NCCL selection replaces. A profile with no NCCL selection at all
    (another backend, or made before collbench kept one) is mapped as it always was: its only selection.
    """
    if shape.nccl_rules is not None:
        return _tuned_only(shape.nccl_rules, shape)
    if not _keeps_nccl_selections(profile):
        return _tuned_only(shape.rules, shape)
    own = {"segment_bytes": None, "layout": "rank-order"}
    return tuple(
        Rule(Op.parse(op), 0, None, AlgoRef("native"), dict(own)) for op in shape.ops if Op.parse(op) in NCCL_TUNED_OPS
    )


def _tuned_only(rules: tuple[Rule, ...], shape: RuleSet) -> tuple[Rule, ...]:
    """``rules`` of the ops NCCL tunes. A rule of another op that forces an NCCL algorithm or protocol
    (``native:ring`` for all-to-all) was never measured by NCCL: UserError (one line), as for any rule
    NCCL cannot run."""
    kept = []
    for rule in rules:
        if Op.parse(rule.op) in NCCL_TUNED_OPS:
            kept.append(rule)
        elif rule.algo.native and parse_native_variant(rule.algo).forced:
            nccl_choice(rule, shape)  # raises, saying that NCCL runs it as point-to-point
    return tuple(kept)


def point_to_point_ops(profile: Profile) -> list[Op]:
    """The ops of ``profile``'s rules that NCCL runs as grouped point-to-point (no NCCL rules), in Op order."""
    named = {Op.parse(r.op) for s in shapes(profile) for r in (*s.rules, *(s.nccl_rules or ()))}
    return [op for op in Op if op in named and op not in NCCL_TUNED_OPS]


def untuned_lines(profile: Profile) -> list[str]:
    """The comment lines (without ``#``) of an NCCL export of ``profile`` that has rules for ops NCCL
    does not tune: one for those it runs as grouped point-to-point, one for scan and exscan, which NCCL
    does not have at all; none when it has neither."""
    ops = point_to_point_ops(profile)
    p2p = [op for op in ops if op not in SCAN_OPS]
    scans = [op for op in ops if op in SCAN_OPS]
    lines = []
    if p2p:
        names = ", ".join(op.spec.nccl_name for op in p2p)
        lines.append(
            f"{names}: no rules: NCCL runs all-to-all, scatter, gather, send/recv and barrier as grouped "
            "point-to-point (ncclSend/ncclRecv): no algorithm or protocol to choose"
        )
    if scans:
        names = ", ".join(op.spec.nccl_name for op in scans)
        lines.append(
            f"{names}: no rules: NCCL has no scan (nor has torch.distributed); the profile's scan rules run "
            "through collbench.torch.scan"
        )
    return lines


def selection_label(shape: RuleSet, profile: Profile) -> str:
    """Which rules an NCCL export follows for ``shape`` (:func:`nccl_selection`), for the file's comments."""
    if shape.nccl_rules is not None:
        return "rules chosen among NCCL's own variants (algorithm, protocol, channels), as measured"
    if _keeps_nccl_selections(profile):
        kind = "predicted from the fitted models" if shape.predicted else "from a profile made before collbench kept it"
        return f"no selection among NCCL's own variants at this shape ({kind}): NCCL keeps its own choice"
    if shape.predicted:
        return "rules predicted from the fitted models; no selection among NCCL's own variants"
    return (
        "no selection among NCCL's own variants (a profile of another backend, or made before collbench "
        "kept one): the overall rules, mapped to NCCL's nearest algorithm"
    )


def collbench_wins(shape: RuleSet) -> list[str]:
    """One line per range where collbench's own algorithm won ``shape``'s overall selection while the
    NCCL export follows NCCL's own variants: NCCL cannot run it; collbench's Python API can."""
    if shape.nccl_rules is None:
        return []
    lines = []
    for rule in shape.rules:
        if rule.algo.native:
            continue
        coll = Op.parse(rule.op).spec.nccl_name
        gain = "" if rule.gain_vs_native is None else f" ({rule.gain_vs_native:.2f}x NCCL's own choice)"
        lines.append(
            f"{coll} {span(rule)}: collbench's {rule.algo} wins overall{gain}; NCCL cannot run it: run it with "
            f"collbench's Python API ({python_api(Op.parse(rule.op))})"
        )
    return lines


_API_CALLS: dict[Op, str] = {
    Op.ALL_REDUCE: "collbench.torch.all_reduce and ddp_comm_hook",
    Op.ALL_TO_ALL: "collbench.torch.all_to_all_single",
    Op.SCATTER: "collbench.torch.scatter",
    Op.GATHER: "collbench.torch.gather",
    Op.SENDRECV: "collbench.torch.ring_shift",
    Op.BARRIER: "collbench.torch.barrier",
}


def python_api(op: Op) -> str:
    """Where collbench's Python API runs a profile's choice for ``op``."""
    call = _API_CALLS.get(op)
    return f"{call}; Profile.select" if call else "Profile.select with the executor"


def shapes(profile: Profile) -> tuple[RuleSet, ...]:
    """Every rule set of ``profile`` (one per world size and node count): every export covers each."""
    return profile.rule_sets


def shape_label(shape: RuleSet) -> str:
    kind = "predicted" if shape.predicted else "measured"
    return f"{ranks_on_nodes(shape.world_size, shape.nodes)}, {kind}"


@dataclass(frozen=True, slots=True)
class NcclChoice:
    """What NCCL should run for one rule: an algorithm (and protocol), or nothing with the reason."""

    rule: Rule
    algo: NcclAlgorithm | None
    """None: no line; NCCL keeps its own choice in this range."""
    proto: int | None
    """``NCCL_PROTO_*`` the rule forces or measured; None where it says nothing about the protocol."""
    channels: int | None
    why: str
    """For the file's comments and the terminal: what the rule becomes, or why it has no equivalent."""
    native: bool = False
    """Plain ``native``: NCCL's own choice is the rule itself (nothing is lost)."""
    condition: str | None = None
    """A hardware or setting condition NCCL still needs to run ``algo`` (None: always)."""


def span(rule: Rule) -> str:
    top = "unbounded" if rule.max_bytes is None else str(rule.max_bytes)
    return f"[{rule.min_bytes}, {top}] bytes"


def nccl_choice(rule: Rule, shape: RuleSet) -> NcclChoice:
    """Map one rule; raise UserError for an unknown algorithm or a native variant NCCL cannot run here."""
    op = Op.parse(rule.op)
    where = f"{op.value} {span(rule)} at {ranks_on_nodes(shape.world_size, shape.nodes)}"
    proto = _protocol(rule, where)
    count = _channels(rule, where)
    if rule.algo.native:
        variant = parse_native_variant(rule.algo)
        if not variant.forced:
            return NcclChoice(rule, None, None, None, "native wins: NCCL's own choice", native=True)
        if variant.proto is not None:
            proto = protocol_number(variant.proto)
        if variant.channels is not None:
            count = variant.channels
        if variant.algo is None:
            forced = [f"protocol {variant.proto}"] if variant.proto is not None else []
            forced += [f"{variant.channels} channels"] if variant.channels is not None else []
            why = (
                f"{rule.algo} forces {' and '.join(forced)} and no algorithm; a tuner line must name an algorithm, "
                "so the tuner config forces nothing here"
            )
            return NcclChoice(rule, None, proto, None, why)
        algo = algorithm(variant.algo)
        assert algo is not None  # parse_native_variant accepts NCCL's names only
    else:
        get_algorithm(rule.algo)  # an algorithm collbench does not know is one line, exit 2
        mapped = COLLBENCH_TO_NCCL.get(rule.algo)
        if mapped is None:
            why = f"{rule.algo} has no NCCL equivalent (NCCL has ring and tree); NCCL keeps its own choice"
            return NcclChoice(rule, None, None, None, why)
        algo = algorithm(mapped)
        assert algo is not None
        reason = why_not(op, algo, None, nodes=shape.nodes, ranks=shape.world_size)
        if reason is not None:
            why = f"{rule.algo} has no NCCL equivalent for {op.spec.nccl_name}: {reason}; NCCL keeps its own choice"
            return NcclChoice(rule, None, None, None, why)
        return NcclChoice(rule, algo, proto, count, f"{rule.algo} is NCCL's {algo.tuner}")
    reason = why_not(op, algo, proto, nodes=shape.nodes, ranks=shape.world_size)
    if reason is not None:
        raise UserError(f"profile rule {where} says {rule.algo}, which NCCL cannot run: {reason}")
    return NcclChoice(rule, algo, proto, count, f"{rule.algo} is NCCL's {algo.tuner}", condition=condition(algo))


def _channels(rule: Rule, where: str) -> int | None:
    """The rule's channel count, None for NCCL's own; UserError for one no NCCL can hold (it would wrap)."""
    channels = rule.params.get("channels")
    if not channels:
        return None
    count = int(channels)
    if not 1 <= count <= MAX_CHANNELS:
        raise UserError(
            f"profile rule {where} asks for {count} channels; NCCL holds 1 to {MAX_CHANNELS} "
            f"({MAX_CHANNELS_OLDEST} before {since_text(MAX_CHANNELS)})"
        )
    return count


def _protocol(rule: Rule, where: str) -> int | None:
    named = rule.params.get("protocol")
    if not named:
        return None
    number = protocol_number(str(named))
    if number is None:
        raise UserError(f"profile rule {where} names protocol {named!r}; NCCL has LL, LL128 and Simple")
    return number
