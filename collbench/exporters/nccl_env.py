"""``NCCL_ALGO`` and ``NCCL_PROTO`` from a profile, where process-wide variables can say what it says.

The variables have no size ranges and no communicator shapes: NCCL reads them for every communicator
of the process (``ncclTopoTuneModel``, src/graph/tuning.cc). So a collective gets a setting only when
one NCCL algorithm (and, for ``NCCL_PROTO``, one protocol) is the profile's answer at every size of
every rule set; otherwise the output says why not and points to the tuner plugin, which has ranges.

Spellings are NCCL's (``ring, tree, collnetdirect, collnetchain, nvls, nvlstree, pat``) in the
per-collective form of NCCL 2.24+ (``allreduce:tree``). A setting must never leave a collective with
no algorithm it can run, on any communicator of the job: an algorithm that needs hardware or a shape
(NVLS, NVLSTree, CollNet, PAT) is written with ``ring`` beside it, so NCCL falls back to ring where it
cannot run it (and picks between the two by its cost model where it can). The value is checked with
:func:`collbench.tuning.consumers.nccl_list.check_env` before it is written.

As the tuner config, the lines come from a rule set's selection among NCCL's own variants where it has
one (:func:`.nccl_rules.nccl_selection`), and a profile measured over another backend is refused
unless ``from_other_backend``. A won channel count is not written: ``NCCL_MIN_NCHANNELS`` and
``NCCL_MAX_NCHANNELS`` have no collectives or ranges either; the tuner plugin carries it.
"""

from __future__ import annotations

from collbench.backends.base import NCCL_EXPORTS
from collbench.exporters.exported import Exported, wrap_comments
from collbench.exporters.nccl_rules import (
    NcclChoice,
    collbench_wins,
    measured_over_nccl,
    nccl_choice,
    nccl_selection,
    selection_label,
    shape_label,
    shapes,
    span,
    untuned_lines,
)
from collbench.exporters.serving import check_serves
from collbench.nccl.algorithms import PROTOCOLS, NcclAlgorithm
from collbench.profile.document import Profile
from collbench.schedules.ops import Op
from collbench.tuning.consumers.nccl import PER_COLLECTIVE_SYNTAX
from collbench.tuning.consumers.nccl_list import check_env


def _ops(profile: Profile) -> list[Op]:
    seen: dict[Op, None] = {}
    for shape in shapes(profile):
        for rule in nccl_selection(shape, profile):
            seen.setdefault(Op.parse(rule.op), None)
    return list(seen)


def _choices(profile: Profile, op: Op) -> list[NcclChoice]:
    return [nccl_choice(r, s) for s in shapes(profile) for r in nccl_selection(s, profile) if Op.parse(r.op) is op]


def nccl_env_values(profile: Profile) -> tuple[str | None, str | None, list[str]]:
    """``NCCL_ALGO`` and ``NCCL_PROTO`` values (None where nothing is set) and one reason line per op.

    Raises UserError (one line) for a rule NCCL cannot have run or an unknown algorithm.
    """
    algo_entries: list[str] = []
    proto_entries: list[str] = []
    reasons: list[str] = []
    for op in _ops(profile):
        coll = op.spec.nccl_name
        choices = _choices(profile, op)
        algos: set[NcclAlgorithm | None] = {c.algo for c in choices}
        if all(c.native for c in choices):
            reasons.append(f"{coll}: native wins at every size; nothing to set (NCCL's own choice)")
            continue
        if any(c.channels is not None and c.rule.algo.native for c in choices):
            reasons.append(f"{coll}: a channel count won in some range; it is in the tuner plugin's config only")
        protos = {c.proto for c in choices}
        if len(protos) == 1 and None not in protos:
            (proto,) = protos
            assert proto is not None
            proto_entries.append(f"{coll}:{PROTOCOLS[proto].lower()}")
        elif len(protos) > 1:
            reasons.append(f"{coll}: the protocol changes with size or shape; NCCL_PROTO has no ranges: NCCL chooses")
        if algos == {None}:
            whys = dict.fromkeys(c.why for c in choices if not c.native)
            reasons.append(f"{coll}: {'; '.join(whys)}")
            continue
        if len(algos) > 1:
            ranges = ", ".join(f"{c.rule.algo} {span(c.rule)}" for c in choices)
            reasons.append(
                f"{coll}: the answer changes with size or shape ({ranges}); NCCL_ALGO has no ranges: "
                "use `collbench export nccl-plugin`"
            )
            continue
        (algo,) = algos
        assert algo is not None
        names = [algo.env.lower()]
        if algo.condition:
            names.append("ring")
            reasons.append(
                f"{coll}: {algo.env.lower()} with ring beside it: {algo.condition}; NCCL runs ring where it cannot "
                f"run {algo.env.lower()} and chooses between the two by its cost model where it can"
            )
        algo_entries.append(f"{coll}:{','.join(names)}")
    algo_value = ";".join(algo_entries) or None
    proto_value = ";".join(proto_entries) or None
    problems = check_env(algo_value, proto_value)
    assert not problems, problems  # every entry names an algorithm NCCL runs for its collective
    return algo_value, proto_value, reasons


def build_nccl_env(profile: Profile, *, from_other_backend: bool = False) -> Exported:
    """Shell lines: ``export NCCL_ALGO=...``/``NCCL_PROTO=...`` where possible, a ``#`` line per op.

    Raises UserError (one line) as :func:`nccl_env_values`, and for a profile measured over a backend
    other than NCCL unless ``from_other_backend``.
    """
    check_serves(NCCL_EXPORTS, profile.backend, from_other_backend)
    algo, proto, reasons = nccl_env_values(profile)
    out = [f"# NCCL_ALGO / NCCL_PROTO made by collbench from a profile ({profile.fingerprint}, {profile.backend})"]
    labels = "; ".join(shape_label(s) for s in shapes(profile))
    out.append(f"# rule sets: {labels}; these variables apply to every communicator of the process")
    if not measured_over_nccl(profile):
        out.append(f"# measured with {profile.backend}, not NCCL")
    else:
        out.extend(f"# {shape_label(s)}: {selection_label(s, profile)}" for s in shapes(profile))
    out.extend(f"# {line}" for line in untuned_lines(profile))
    # Where collbench's own algorithm won overall: NCCL cannot run it, the Python API can.
    reasons += [f"{won} ({shape_label(s)})" for s in shapes(profile) for won in collbench_wins(s)]
    out.extend(f"# {reason}" for reason in reasons)
    if algo is None and proto is None:
        out.append("# no NCCL_ALGO or NCCL_PROTO setting expresses this profile")
        return Exported(wrap_comments("\n".join(out) + "\n"), tuple(reasons))
    major, minor = PER_COLLECTIVE_SYNTAX
    out.append(
        f"# needs NCCL {major}.{minor} or later: older NCCL reads 'allreduce:tree' as an unknown name and then "
        "enables no algorithm at all"
    )
    if algo is not None:
        out.append(f'export NCCL_ALGO="{algo}"')
    if proto is not None:
        out.append(f'export NCCL_PROTO="{proto}"')
    notes = [r for r in reasons if "nothing to set" not in r]
    return Exported(wrap_comments("\n".join(out) + "\n"), tuple(notes))


def export_nccl_env(profile: Profile, *, from_other_backend: bool = False) -> str:
    """The shell lines for ``profile`` (see :func:`build_nccl_env`)."""
    return build_nccl_env(profile, from_other_backend=from_other_backend).text
