"""NCCL tuner plugin config (the example plugin in NCCL's ``plugins/tuner/example/``).

One rule a line: ``collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks``.
The plugin skips a line only when its *first character* is ``#`` (or it is empty), so comments here
always start a line; a comment after a rule would be read as part of its last field. The byte range is
inclusive and the first matching line wins. ``-1`` means "any" for nNodes/nRanks and "keep NCCL's
choice" for channels; for ``max_bytes`` the plugin reads ``-1`` with ``strtoull``, which gives the
largest size_t: no upper bound.

Mapping: collbench's ``ring`` is NCCL's ring and ``tree``/``two-tree`` are NCCL's tree (NCCL's tree is
a double binary tree over nodes). ``native`` needs no line: NCCL's own choice is what it already does.
Algorithms NCCL does not have (recursive doubling, Rabenseifner, direct, one-shot) are left out with
a comment, so NCCL keeps its own choice in their ranges.

The protocol field must name a protocol (the plugin turns anything else into ``simple``): it is the
rule's ``params.protocol`` when the profile measured one (native NCCL variants), otherwise ``simple``,
the protocol of bulk transfers that collbench's schedules resemble.
"""

from __future__ import annotations

from collbench.schedules.ops import Op
from collbench.tuning.profile import Profile
from collbench.tuning.selection import Rule

NCCL_ALGORITHMS: dict[str, str] = {"ring": "ring", "tree": "tree", "two-tree": "tree"}
NCCL_PROTOCOLS = ("ll", "ll128", "simple")
NCCL_FORCED: dict[str, str] = {
    "ring": "ring",
    "tree": "tree",
    "collnetdirect": "collnet_direct",
    "collnetchain": "collnet_chain",
    "nvls": "nvls",
    "nvlstree": "nvls_tree",
    "pat": "pat",
}
"""NCCL_ALGO's names (case-insensitive, without underscores) to the tuner config's."""
UNBOUNDED = -1


def nccl_line(rule: Rule, *, nodes: int, ranks: int) -> str | None:
    """The config line for one rule, or None when NCCL has no such algorithm (or it is plain native)."""
    mapped = nccl_algorithm(rule.algo)
    if mapped is None:
        return None
    algorithm, forced_proto = mapped
    protocol = str(forced_proto or rule.params.get("protocol") or "simple").lower()
    if protocol not in NCCL_PROTOCOLS:
        protocol = "simple"
    channels = rule.params.get("channels")
    fields = [
        Op.parse(rule.op).spec.nccl_name,
        str(rule.min_bytes),
        str(UNBOUNDED if rule.max_bytes is None else rule.max_bytes),
        algorithm,
        protocol,
        str(int(channels) if channels else -1),
        str(nodes),
        str(ranks),
    ]
    return ",".join(fields)


def nccl_algorithm(algo: str) -> tuple[str, str | None] | None:
    """NCCL's tuner name (and forced protocol) for a collbench algorithm, None where NCCL has none.

    ``native:ALGO[/PROTO]`` is NCCL itself with its algorithm forced (``native:tree/ll128``), measured
    on GPUs; plain ``native`` is NCCL's own choice, which needs no line.
    """
    if algo.startswith("native:"):
        name, _, proto = algo.split(":", 1)[1].partition("/")
        key = name.strip().lower().replace("_", "")
        tuner = NCCL_FORCED.get(key)
        return None if tuner is None else (tuner, proto.strip().lower() or None)
    found = NCCL_ALGORITHMS.get(algo)
    return None if found is None else (found, None)


def export_nccl_tuner(profile: Profile) -> str:
    """The tuner config text for ``profile``: header comments, then one line per mappable rule."""
    out = [
        "# NCCL tuner plugin config made by collbench from a profile",
        f"# machine {profile.fingerprint} ({profile.host}), backend {profile.backend}, "
        f"{profile.world_size} ranks on {profile.nodes} node(s)",
        "# use: NCCL_TUNER_PLUGIN=<example plugin .so> NCCL_TUNER_CONFIG_FILE=<this file>",
        "# format: collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks",
        "# max_bytes -1: no upper bound; channels -1: keep NCCL's choice",
    ]
    if profile.backend != "nccl":
        out.append(f"# note: measured with {profile.backend}, not NCCL: the ranges say which algorithm family won here")
    for rule in profile.rules:
        line = nccl_line(rule, nodes=profile.nodes, ranks=profile.world_size)
        span = _span(rule)
        if line is not None:
            out.append(f"# {rule.op} {span}: {rule.algo}{_gain(rule)}")
            out.append(line)
        elif rule.algo == "native" or rule.algo.startswith("native:"):
            out.append(f"# {rule.op} {span}: native wins; no line, so NCCL keeps its own choice")
        else:
            out.append(
                f"# {rule.op} {span}: {rule.algo} left out: NCCL has no {rule.algo} algorithm "
                "(it has ring and tree); NCCL keeps its own choice here"
            )
    return "\n".join(out) + "\n"


def _span(rule: Rule) -> str:
    top = "unbounded" if rule.max_bytes is None else str(rule.max_bytes)
    return f"[{rule.min_bytes}, {top}] bytes"


def _gain(rule: Rule) -> str:
    return "" if rule.gain_vs_native is None else f" ({rule.gain_vs_native:.2f}x native)"
