"""`export ompi-rules` fed to the real consumer: Open MPI's coll/tuned, observed choosing algorithms.

A small MPI program (ompi_collectives.c, built with mpicc here) runs every collective the rules file
covers at each rule boundary (N-1, N, N+1 bytes; for allgather and reduce_scatter_block, whose sizes
are multiples of the communicator size, the nearest multiples either side), on communicators of 2 to 6
ranks split off one mpirun. A preloaded shim (ompi_observe_shim.c) interposes the ompi_coll_base_*
functions coll/tuned calls through its PLT and tells the program which one ran. The same program runs
once without the rules, which is Open MPI's own choice: sizes the profile does not have, and rules
with no Open MPI equivalent, must get exactly that.

The observer is tests/mpi/ompi_observer.py's. The expected function per collbench algorithm is
written out here, from Open MPI v4.1.4's
``ompi_coll_tuned_<coll>_intra_do_this`` (coll_tuned_<coll>_decision.c), independently of
collbench.exporters.ompi_table.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
from ompi_observer import B, build_observer, need_open_mpi, observe
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule

pytestmark = pytest.mark.mpi

WORLD = 6
COMM_SIZES = (2, 3, 4, 5, 6)
BOUNDARIES = (100, 1500, 30000)
BIG = 60000
SEG = {"segment_bytes": 8192, "layout": "rank-order"}
TREE_SEG = {"segment_bytes": 4096, "layout": "rank-order"}
NONE: dict[str, object] = {"segment_bytes": None, "layout": "rank-order"}

# What coll/tuned must run for a collbench algorithm, per MPI collective; None: no equivalent, so
# Open MPI's own choice. Keys (collective, algorithm, has a segment size).
EXPECTED: dict[tuple[str, str, bool], str | None] = {
    ("allreduce", "native", False): None,
    ("allreduce", "recursive-doubling", False): B + "allreduce_intra_recursivedoubling",
    ("allreduce", "rabenseifner", False): B + "allreduce_intra_redscat_allgather",
    ("allreduce", "ring", True): B + "allreduce_intra_ring_segmented",
    ("allreduce", "ring", False): B + "allreduce_intra_ring",
    ("allreduce", "direct", False): B + "allreduce_intra_basic_linear",
    ("allgather", "direct", False): B + "allgather_intra_basic_linear",
    ("allgather", "recursive-doubling", False): B + "allgather_intra_recursivedoubling",
    ("allgather", "ring", False): B + "allgather_intra_ring",
    ("bcast", "two-tree", False): None,
    ("bcast", "direct", False): B + "bcast_intra_basic_linear",
    ("bcast", "one-shot", False): B + "bcast_intra_basic_linear",
    ("bcast", "tree", True): B + "bcast_intra_bintree",
    ("bcast", "tree", False): B + "bcast_intra_bintree",
    ("bcast", "ring", True): B + "bcast_intra_pipeline",
    ("reduce", "direct", False): B + "reduce_intra_basic_linear",
    ("reduce", "tree", True): B + "reduce_intra_binary",
    ("reduce", "ring", True): B + "reduce_intra_pipeline",
    ("reduce", "ring", False): B + "reduce_intra_pipeline",
    ("reduce", "rabenseifner", False): B + "reduce_intra_redscat_gather",
    ("reduce_scatter", "direct", False): B + "reduce_scatter_intra_nonoverlapping",
    ("reduce_scatter", "rabenseifner", False): B + "reduce_scatter_intra_basic_recursivehalving",
    ("reduce_scatter", "ring", False): B + "reduce_scatter_intra_ring",
    ("reduce_scatter_block", "direct", False): B + "reduce_scatter_block_basic_linear",
    ("reduce_scatter_block", "rabenseifner", False): B + "reduce_scatter_block_intra_recursivehalving",
    ("reduce_scatter_block", "ring", False): None,
}
OPS = {
    "allreduce": "all-reduce",
    "allgather": "all-gather",
    "bcast": "broadcast",
    "reduce": "reduce",
    "reduce_scatter": "reduce-scatter",
    "reduce_scatter_block": "reduce-scatter",
}


def _rules(op: str, *parts: tuple[int, str, dict[str, object]]) -> list[Rule]:
    out = []
    for i, (start, algo, params) in enumerate(parts):
        end = parts[i + 1][0] - 1 if i + 1 < len(parts) else None
        out.append(Rule(op, start, end, algo, dict(params)))
    return out


def make_profile() -> Profile:
    """Measured at 3 ranks, predicted at 5: every mapped algorithm, two without an equivalent, and native."""
    three = RuleSet(
        3,
        1,
        tuple(
            _rules(
                "all-reduce",
                (0, "native", NONE),
                (100, "recursive-doubling", NONE),
                (1500, "rabenseifner", NONE),
                (30000, "ring", SEG),
            )
            + _rules("all-gather", (0, "direct", NONE), (1500, "recursive-doubling", NONE), (30000, "ring", NONE))
            + _rules(
                "broadcast",
                (0, "two-tree", NONE),
                (100, "direct", NONE),
                (1500, "tree", TREE_SEG),
                (30000, "ring", SEG),
            )
            + _rules("reduce", (0, "direct", NONE), (1500, "tree", TREE_SEG), (30000, "ring", SEG))
            + _rules("reduce-scatter", (0, "direct", NONE), (1500, "rabenseifner", NONE), (30000, "ring", NONE))
        ),
    )
    five = RuleSet(
        5,
        2,
        tuple(
            _rules("all-reduce", (0, "direct", NONE), (1500, "ring", NONE))
            + _rules("all-gather", (0, "ring", NONE))
            + _rules("broadcast", (0, "one-shot", NONE), (1500, "tree", NONE))
            + _rules("reduce", (0, "rabenseifner", NONE), (1500, "ring", NONE))
            + _rules("reduce-scatter", (0, "ring", NONE))
        ),
        predicted=True,
    )
    return Profile(fingerprint="test", host="test", backend="gloo", rule_sets=(three, five))


def sizes_for(coll: str, k: int) -> list[int]:
    """Every rule boundary's neighbours, as sizes this collective can have on k ranks."""
    if coll in ("allgather", "reduce_scatter_block"):
        out = {k, k * (BIG // k)}
        for n in BOUNDARIES:
            out |= {k * ((n - 1) // k), k * -(-n // k)}
        return sorted(out)
    return sorted({1, BIG, *(n + d for n in BOUNDARIES for d in (-1, 0, 1))})


def expected_at(profile: Profile, baseline: dict[tuple[int, str, int], str], key: tuple[int, str, int]) -> str:
    k, coll, nbytes = key
    if k not in (3, 5):
        return baseline[key]  # a size the profile does not have: Open MPI's own choice
    rule = profile.select(OPS[coll], nbytes, world_size=k)
    function = EXPECTED[(coll, rule.algo, bool(rule.params.get("segment_bytes")))]
    return baseline[key] if function is None else function


def _sizes_where(observed: dict[tuple[int, str, int], str], baseline: dict[tuple[int, str, int], str]) -> Iterable[int]:
    return sorted({k for k in COMM_SIZES for key in observed if key[0] == k and observed[key] != baseline[key]})


def test_open_mpi_runs_what_the_exported_rules_say(tmp_path: Path) -> None:
    need_open_mpi()
    built = build_observer(tmp_path)
    profile = make_profile()
    profile_path = profile.save(tmp_path / "profile.yaml")
    rules = tmp_path / "rules.txt"
    args = ["export", "ompi-rules", str(profile_path), "-O", str(rules), "--from-other-backend"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    # The CLI named, on the terminal, the rules Open MPI cannot follow.
    assert "two-tree has no equivalent" in result.stderr and "reduce_scatter_block" in result.stderr

    calls = [f"{coll}:{n}" for coll in OPS for n in sorted({s for k in COMM_SIZES for s in sizes_for(coll, k)})]
    baseline = observe(built, tmp_path / "own", WORLD, COMM_SIZES, calls, None)
    observed = observe(built, tmp_path / "ruled", WORLD, COMM_SIZES, calls, rules)
    assert set(observed) == set(baseline)
    assert all(f.startswith(B) for f in observed.values()), "every call reached one ompi_coll_base algorithm"
    wrong = {
        key: (observed[key], expected_at(profile, baseline, key))
        for key in sorted(observed)
        if observed[key] != expected_at(profile, baseline, key)
    }
    assert wrong == {}
    # The rules changed Open MPI's choice at the profile's sizes, and only there.
    assert list(_sizes_where(observed, baseline)) == [3, 5]
    for coll in OPS:
        assert any(observed[key] != baseline[key] for key in observed if key[1] == coll and key[0] == 3), coll
