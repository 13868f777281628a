"""NCCL tuner plugin config: collbench's plugin (``export nccl-plugin``) and NCCL's example plugin read it.

One rule a line: ``collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks``
(``plugins/tuner/example/plugin.c``). The example plugin skips a line only when its *first character*
is ``#`` (or it is empty) and reads at most 255 characters a line, so comments here start a line and
stay short. The byte range is inclusive and the first matching line wins. ``-1`` means "any" for
nNodes/nRanks and "keep NCCL's choice" for channels (collbench's plugin; the example plugin then runs
one channel); ``max_bytes`` ``-1`` is read by ``strtoull`` as the largest size_t: no upper bound.

Every rule set of the profile (one per communicator shape) gets its lines, with its nNodes and nRanks,
so one file serves every communicator of a job; shapes the profile has no rules for keep NCCL's choice.
No line names something NCCL cannot run for its collective and shape (:mod:`.nccl_rules`); a rule with
no NCCL equivalent is a comment saying what NCCL does instead. The protocol field must name a protocol
(the example plugin reads anything else as ``simple``): the rule's measured or forced protocol, else
``simple``, the protocol of bulk transfers that collbench's own schedules resemble. A channel count is
1 to :data:`collbench.nccl.channels.MAX_CHANNELS` (a profile asking for more is refused); one above what
NCCL before 2.25 holds gets a comment and a note, as collbench's plugin skips that line there.

A rule set measured over NCCL gives its lines from the selection among NCCL's own variants
(:func:`.nccl_rules.nccl_selection`): a won channel count becomes the line's channels, and where
collbench's own algorithm won overall, a comment points at collbench's Python API. A profile measured
over another backend is refused unless ``from_other_backend`` (:func:`.serving.check_serves`).
"""

from __future__ import annotations

from collbench.backends.base import NCCL_EXPORTS
from collbench.exporters.exported import Exported, comment_lines, wrap_comments
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
from collbench.nccl.algorithms import PROTOCOLS
from collbench.nccl.channels import MAX_CHANNELS_OLDEST, since_text
from collbench.profile.document import Profile, RuleSet
from collbench.schedules.ops import Op
from collbench.text import printable

UNBOUNDED = -1
KEEP = -1
NO_LINES = (
    "no line for NCCL: at every size and shape the profile leaves NCCL its own choice (native, or no NCCL "
    "equivalent); a job needs neither the tuner plugin nor this file"
)


def tuner_line(choice: NcclChoice, shape: RuleSet) -> str | None:
    """The config line for one mapped rule (None where NCCL has no equivalent)."""
    if choice.algo is None:
        return None
    rule = choice.rule
    proto = PROTOCOLS[2 if choice.proto is None else choice.proto].lower()
    fields = [
        _coll(rule.op),
        str(rule.min_bytes),
        str(UNBOUNDED if rule.max_bytes is None else rule.max_bytes),
        choice.algo.tuner,
        proto,
        str(KEEP if choice.channels is None else choice.channels),
        str(shape.nodes),
        str(shape.world_size),
    ]
    return ",".join(fields)


def _coll(op: str) -> str:
    return Op.parse(op).spec.nccl_name


def build_nccl_tuner(profile: Profile, *, from_other_backend: bool = False) -> Exported:
    """The config text for every rule set of ``profile``, and the terminal notes for rules left out.

    Raises UserError (one line) for a rule NCCL cannot have run or an unknown algorithm, and for a
    profile measured over a backend other than NCCL unless ``from_other_backend``.
    """
    check_serves(NCCL_EXPORTS, profile.backend, from_other_backend)
    out = [
        "# NCCL tuner plugin config made by collbench from a profile",
        f"# machine {profile.fingerprint} ({printable(profile.host)}), backend {profile.backend}",
        "# use: NCCL_TUNER_PLUGIN=<libnccl-tuner-collbench.so> NCCL_TUNER_CONFIG_FILE=<this file>",
        # The field list is one word to wrap_comments: broken here, after a comma, so that it fits 80 columns.
        "# format: collective_type,min_bytes,max_bytes,algorithm,protocol,channels,",
        "#   nNodes,nRanks",
        "# max_bytes -1: no upper bound; channels -1: keep NCCL's channel count",
        "# a line lowers only its algorithm/protocol cost; where NCCL cannot run that pair, NCCL keeps its choice",
    ]
    if not measured_over_nccl(profile):
        out.append(f"# measured with {profile.backend}, not NCCL: the lines say which algorithm family won there")
    out.extend(f"# {line}" for line in untuned_lines(profile))
    notes: list[str] = []
    for shape in shapes(profile):
        out.append(f"# --- {shape_label(shape)}")
        if shape.predicted:
            out.append("# these rules are predicted from the fitted models, not measured at this shape")
        if measured_over_nccl(profile):
            out.extend(comment_lines(selection_label(shape, profile)))
        for rule in nccl_selection(shape, profile):
            choice = nccl_choice(rule, shape)
            line = tuner_line(choice, shape)
            head = f"{_coll(rule.op)} {span(rule)}"
            if line is None:
                out.extend(comment_lines(f"{head}: {choice.why}; no line"))
                if not choice.native:
                    notes.append(f"{head} ({shape_label(shape)}): {choice.why}")
                continue
            gain = "" if rule.gain_vs_native is None else f" ({rule.gain_vs_native:.2f}x native)"
            out.extend(comment_lines(f"{head}: {choice.why}{gain}"))
            if choice.channels is not None and choice.channels > MAX_CHANNELS_OLDEST:
                older = f"channels {choice.channels} applies from NCCL {since_text(choice.channels)}"
                out.extend(comment_lines(f"{older}; before it, collbench's plugin skips this line"))
                notes.append(f"{head} ({shape_label(shape)}): {older}")
            if choice.condition:
                out.extend(comment_lines(f"only where NCCL enables it: {choice.condition}"))
                notes.append(
                    f"{head} ({shape_label(shape)}): {choice.algo.tuner if choice.algo else ''} {choice.condition}"
                )
            if choice.channels is not None and shape.nccl_rules is not None:
                count = choice.channels
                out.extend(
                    comment_lines(
                        f"{count} channels: measured on a communicator of {count} channels (ncclConfig_t minCTAs = "
                        f"maxCTAs); NCCL_MIN_NCHANNELS=NCCL_MAX_NCHANNELS={count} gives a job's communicators as many"
                    )
                )
            out.append(line)
        for won in collbench_wins(shape):
            out.extend(comment_lines(won))
            notes.append(f"{won} ({shape_label(shape)})")
    if not any(line and not line.startswith("#") for line in out):
        # A job given this file and the plugin runs as NCCL alone would: say so here, not as a warning
        # every rank's NCCL prints at each communicator's creation.
        out.extend(comment_lines(NO_LINES))
        notes.append(NO_LINES)
    return Exported(wrap_comments("\n".join(out) + "\n"), tuple(notes))


def export_nccl_tuner(profile: Profile, *, from_other_backend: bool = False) -> str:
    """The tuner config text for ``profile`` (see :func:`build_nccl_tuner`)."""
    return build_nccl_tuner(profile, from_other_backend=from_other_backend).text
