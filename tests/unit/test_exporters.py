"""Each exporter's output, read back by a parser of the target's own grammar."""

from __future__ import annotations

from dataclasses import dataclass

from collbench.tuning.exporters import export_nccl_env, export_nccl_tuner
from collbench.tuning.profile import Profile, RuleSet
from collbench.tuning.selection import Rule

P = {"segment_bytes": None, "layout": "rank-order"}


def profile(rules: tuple[Rule, ...], backend: str = "nccl") -> Profile:
    return Profile(fingerprint="fp", host="h", backend=backend, rule_sets=(RuleSet(8, 2, rules),))


MIXED = profile(
    (
        Rule("all-reduce", 0, 4095, "recursive-doubling", P),
        Rule("all-reduce", 4096, 65535, "two-tree", P),
        Rule("all-reduce", 65536, 1048575, "native", P),
        Rule("all-reduce", 1048576, None, "ring", {**P, "channels": 4, "segment_bytes": 131072}),
        Rule("all-gather", 0, 999, "direct", P),
        Rule("all-gather", 1000, None, "ring", P),
        Rule("broadcast", 0, None, "tree", P),
    )
)


# --- NCCL's example tuner plugin grammar (plugins/tuner/example/plugin.c) -----------------------------

COLLS = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"}
ALGOS = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"}
PROTOS = {"ll", "ll128", "simple"}
SIZE_MAX = 2**64 - 1


@dataclass
class NcclRule:
    coll: str
    min_bytes: int
    max_bytes: int
    algo: str
    proto: str
    channels: int
    nodes: int
    ranks: int


def strtoull(text: str) -> int:
    value = int(text)
    return value % 2**64  # C's strtoull negates in unsigned arithmetic: "-1" is SIZE_MAX


def parse_nccl_tuner(text: str) -> list[NcclRule]:
    """Lines starting with '#' or empty are skipped; others: 8-10 comma fields, trimmed of spaces/tabs."""
    rules = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        assert len(line) < 256, "the plugin reads lines of at most 255 characters"
        fields = [f.strip(" \t") for f in line.split(",")]
        assert 8 <= len(fields) <= 10, line
        coll, lo, hi, algo, proto, ch, nn, nr = fields[:8]
        # The plugin maps unknown names to defaults silently; a correct file uses only known names.
        assert coll in COLLS and algo in ALGOS and proto in PROTOS, line
        rules.append(NcclRule(coll, strtoull(lo), strtoull(hi), algo, proto, int(ch), int(nn), int(nr)))
    return rules


def nccl_choice(rules: list[NcclRule], coll: str, nbytes: int, nodes: int, ranks: int) -> NcclRule | None:
    for r in rules:  # first match wins; the range is inclusive
        if (
            r.coll == coll
            and r.min_bytes <= nbytes <= r.max_bytes
            and r.nodes in (-1, nodes)
            and r.ranks in (-1, ranks)
        ):
            return r
    return None


def test_nccl_tuner_lines_parse_and_select_as_the_profile() -> None:
    text = export_nccl_tuner(MIXED)
    rules = parse_nccl_tuner(text)
    assert [(r.coll, r.algo) for r in rules] == [
        ("allreduce", "tree"),
        ("allreduce", "ring"),
        ("allgather", "ring"),
        ("broadcast", "tree"),
    ]
    assert all((r.nodes, r.ranks) == (2, 8) for r in rules)
    ring = rules[1]
    assert (ring.min_bytes, ring.max_bytes, ring.channels, ring.proto) == (1048576, SIZE_MAX, 4, "simple")
    assert rules[0].channels == -1  # no channel count measured: keep NCCL's
    # Every size of the profile: NCCL ends up with the profile's algorithm where NCCL has it, else its own.
    for nbytes in (0, 100, 4095, 4096, 65535, 65536, 1 << 20, 1 << 40):
        chosen = nccl_choice(rules, "allreduce", nbytes, 2, 8)
        rule = MIXED.select("all-reduce", nbytes)
        expect = {"two-tree": "tree", "ring": "ring"}.get(rule.algo)
        assert (chosen.algo if chosen else None) == expect, nbytes
    assert nccl_choice(rules, "allreduce", 1 << 30, 1, 8) is None  # another machine shape: untouched


def test_nccl_tuner_explains_what_it_leaves_out() -> None:
    text = export_nccl_tuner(MIXED)
    assert "recursive-doubling left out: NCCL has no recursive-doubling algorithm" in text
    assert "direct left out: NCCL has no direct algorithm" in text
    assert "native wins; no line, so NCCL keeps its own choice" in text
    gloo = export_nccl_tuner(profile(MIXED.rules, backend="gloo"))
    assert "measured with gloo, not NCCL" in gloo


# --- NCCL_ALGO ----------------------------------------------------------------------------------


def parse_nccl_algo(text: str) -> dict[str, str]:
    """`export NCCL_ALGO="coll:algo;coll:algo"` (NCCL 2.24+ per-collective syntax)."""
    values = [line for line in text.splitlines() if line.startswith("export NCCL_ALGO=")]
    if not values:
        return {}
    assert len(values) == 1
    value = values[0].split("=", 1)[1].strip('"')
    out = {}
    for part in value.split(";"):
        coll, algo = part.split(":")
        assert coll in COLLS and algo.lower() in ALGOS
        out[coll] = algo
    return out


def test_env_sets_ops_with_one_winner_and_says_why_not_for_others() -> None:
    text = export_nccl_env(MIXED)
    assert parse_nccl_algo(text) == {"broadcast": "tree"}
    reasons = [line for line in text.splitlines() if line.startswith("# allreduce")]
    assert len(reasons) == 1 and "changes with size" in reasons[0] and "nccl-tuner" in reasons[0]
    assert "allgather: the best algorithm changes with size" in text


def test_env_single_algorithm_everywhere() -> None:
    p = profile((Rule("all-reduce", 0, None, "two-tree", P), Rule("broadcast", 0, None, "ring", P)))
    assert parse_nccl_algo(export_nccl_env(p)) == {"allreduce": "tree", "broadcast": "ring"}
    only_rd = profile((Rule("all-reduce", 0, None, "recursive-doubling", P),))
    text = export_nccl_env(only_rd)
    assert parse_nccl_algo(text) == {}
    assert "NCCL has no recursive-doubling algorithm" in text
    assert "no NCCL_ALGO setting expresses this profile" in text


def test_forced_nccl_variants_map_with_their_protocol() -> None:
    p = profile(
        (
            Rule("all-reduce", 0, 65535, "native:tree/ll128", P),
            Rule("all-reduce", 65536, None, "native:Ring", P),
            Rule("broadcast", 0, None, "native:NVLSTree/simple", P),
        )
    )
    rules = parse_nccl_tuner(export_nccl_tuner(p))
    assert [(r.coll, r.algo, r.proto, r.min_bytes) for r in rules] == [
        ("allreduce", "tree", "ll128", 0),
        ("allreduce", "ring", "simple", 65536),
        ("broadcast", "nvls_tree", "simple", 0),
    ]
    only_ring = profile((Rule("all-reduce", 0, None, "native:ring", P),))
    assert parse_nccl_algo(export_nccl_env(only_ring)) == {"allreduce": "ring"}
