"""`export ompi-rules` read back by a parser of Open MPI 4.1's grammar (coll_tuned_dynamic_file.c), and
the table of what coll/tuned can run. tests/mpi runs the real Open MPI on the same files."""

from __future__ import annotations

from pathlib import Path

import pytest
from export_text import unwrapped
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import UserError
from collbench.exporters.ompi_rules import build_ompi_rules, export_ompi_rules
from collbench.exporters.ompi_table import COLLECTIVES, collectives_for
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.schedules.ops import Op
from collbench.schedules.registry import algorithms_for

P = {"segment_bytes": None, "layout": "rank-order"}
Entries = dict[int, dict[int, list[tuple[int, int, int, int]]]]


def parse(text: str) -> Entries:
    """Whitespace-separated non-negative integers, '#' to end of line a comment; nested counts.

    Open MPI rejects the whole file (silently, in Debian's build) when a communicator size's first
    message rule is not at 0, a collective id is 22 or more, or a number is missing or negative.
    """
    tokens = [int(tok) for line in text.splitlines() for tok in line.split("#", 1)[0].split()]
    assert all(t >= 0 for t in tokens)
    it = iter(tokens)
    out: Entries = {}
    for _ in range(next(it)):
        coll_id, ncom = next(it), next(it)
        assert coll_id < 22 and coll_id not in out
        out[coll_id] = {}
        for _ in range(ncom):
            comsize, nmsg = next(it), next(it)
            msgs = [(next(it), next(it), next(it), next(it)) for _ in range(nmsg)]
            assert msgs and msgs[0][0] == 0, "the first message rule must be for size 0"
            assert [m[0] for m in msgs] == sorted({m[0] for m in msgs}), "sizes ascend"
            out[coll_id][comsize] = msgs
        assert list(out[coll_id]) == sorted(out[coll_id]), "communicator sizes ascend"
    assert next(it, None) is None, "trailing tokens"
    return out


def applied(entries: dict[int, list[tuple[int, int, int, int]]], comm_size: int, nbytes: int) -> tuple[int, ...]:
    """What Open MPI 4.1 applies (ompi_coll_tuned_get_com_rule_ptr, then the message rule at or below)."""
    sizes = sorted(entries)
    chosen = max([s for s in sizes if s <= comm_size], default=sizes[0])  # the first entry below all
    return [m for m in entries[chosen] if m[0] <= nbytes][-1]


def profile(*sets: RuleSet) -> Profile:
    return Profile(fingerprint="fp", host="h", backend="gloo", rule_sets=sets)


def mapped_rules(gloo_profile: Profile) -> str:
    """The file for a profile of collbench's algorithms over gloo, exported as a user must ask for it."""
    return export_ompi_rules(gloo_profile, from_other_backend=True)


FOUR = RuleSet(
    4,
    1,
    (
        Rule("all-reduce", 0, 4095, "recursive-doubling", P),
        Rule("all-reduce", 4096, 65535, "two-tree", P),
        Rule("all-reduce", 65536, 1048575, "native", P),
        Rule("all-reduce", 1048576, None, "ring", {**P, "segment_bytes": 131072}),
        Rule("broadcast", 0, 999, "direct", P),
        Rule("broadcast", 1000, None, "ring", {**P, "segment_bytes": 65536}),
        Rule("reduce", 0, None, "ring", P),
        Rule("reduce-scatter", 0, 8191, "rabenseifner", P),
        Rule("reduce-scatter", 8192, None, "ring", P),
    ),
)
EIGHT = RuleSet(8, 2, (Rule("all-reduce", 0, None, "rabenseifner", P),), predicted=True)


def test_every_size_gets_its_entry_bracketed_by_open_mpis_own_choice() -> None:
    entries = parse(mapped_rules(profile(FOUR, EIGHT)))
    assert set(entries) == {2, 7, 11, 12, 13}  # allreduce, bcast, reduce, reduce_scatter(_block)
    own = [(0, 0, 0, 0)]
    allreduce = entries[2]
    assert allreduce == {
        1: own,
        4: [(0, 3, 0, 0), (4096, 0, 0, 0), (1048576, 5, 0, 131072)],  # two-tree and native merged: both 0
        5: own,
        8: [(0, 6, 0, 0)],
        9: own,
    }
    for comm_size, nbytes, algorithm in [(2, 0, 0), (3, 1 << 30, 0), (4, 4095, 3), (4, 4096, 0), (4, 1 << 20, 5)]:
        assert applied(allreduce, comm_size, nbytes)[1] == algorithm
    for comm_size in (5, 6, 7, 9, 64, 1024):
        assert applied(allreduce, comm_size, 1 << 20)[1] == 0, "a larger communicator gets Open MPI's own choice"
    assert applied(allreduce, 8, 0)[1] == 6
    # broadcast at 8 ranks: the predicted set has no broadcast rules, so Open MPI's own choice there.
    assert entries[7] == {1: own, 4: [(0, 1, 0, 0), (1000, 3, 0, 65536)], 5: own, 8: own, 9: own}
    assert entries[11][4] == [(0, 3, 0, 0)]  # reduce: ring -> pipeline
    assert entries[12][4] == [(0, 2, 0, 0), (8192, 3, 0, 0)]  # reduce_scatter: recursive halving, ring
    assert entries[13][4] == [(0, 3, 0, 0), (8192, 0, 0, 0)]  # reduce_scatter_block has no ring


def test_adjacent_sizes_need_no_bracket_between_them() -> None:
    five = RuleSet(5, 1, (Rule("all-reduce", 0, None, "ring", P),))
    one = RuleSet(1, 1, (Rule("all-reduce", 0, None, "direct", P),))
    assert sorted(parse(mapped_rules(profile(FOUR, five, one)))[2]) == [1, 2, 4, 5, 6]


def test_comments_and_notes_say_what_has_no_equivalent_and_what_is_predicted() -> None:
    built = build_ompi_rules(profile(FOUR, EIGHT), from_other_backend=True)
    assert len(built.notes) == 2
    assert "allreduce at 4 ranks on 1 node, from 4096 B: two-tree has no equivalent" in built.notes[0]
    assert "reduce_scatter_block" in built.notes[1] and "has no ring" in built.notes[1]
    assert "Open MPI's own choice (its fixed decision rules) runs instead" in built.notes[0]
    text = unwrapped(built.text)
    assert "# for Open MPI 4.1 (algorithm ids from Open MPI v4.1.4" in text
    assert "8 (2 nodes, predicted)" in text
    assert "  8 1  # 8 ranks on 2 nodes, predicted from the fitted models, not measured" in text
    assert "ring -> segmented_ring: ring, 131072-byte segments" in text
    assert "native: Open MPI's own choice" in text


def test_shapes_open_mpi_cannot_tell_apart_are_an_error() -> None:
    other = RuleSet(4, 2, (Rule("all-reduce", 0, None, "ring", P),))
    with pytest.raises(UserError, match="two shapes of 4 ranks"):
        mapped_rules(profile(FOUR, other))
    huge = RuleSet(4, 1, (Rule("broadcast", 0, None, "tree", {**P, "segment_bytes": 1 << 31}),))
    with pytest.raises(UserError, match="more than Open MPI's rules file can hold"):
        mapped_rules(profile(huge))


def test_cli_bad_shape_is_one_line_exit_2(tmp_path: Path) -> None:
    path = profile(FOUR, RuleSet(4, 2, (Rule("all-reduce", 0, None, "ring", P),))).save(tmp_path / "p.yaml")
    result = CliRunner().invoke(app, ["export", "ompi-rules", str(path), "--from-other-backend"])
    assert result.exit_code == 2
    assert "two shapes of 4 ranks" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_table_is_open_mpi_41s() -> None:
    ids = {c.name: c.coll_id for c in COLLECTIVES}
    # COLLTYPE_T of coll_base_functions.h (v4.1.4; the same in v5.0.x)
    assert ids == {
        "allgather": 0,
        "allreduce": 2,
        "alltoall": 3,
        "barrier": 6,
        "bcast": 7,
        "exscan": 8,
        "gather": 9,
        "reduce": 11,
        "reduce_scatter": 12,
        "reduce_scatter_block": 13,
        "scan": 14,
        "scatter": 15,
    }
    counts = {c.name: len(c.algorithms) for c in COLLECTIVES}
    assert counts == {
        "allgather": 6,
        "allreduce": 6,
        "alltoall": 5,
        "barrier": 6,
        "bcast": 9,
        "exscan": 2,
        "gather": 3,
        "reduce": 7,
        "reduce_scatter": 4,
        "reduce_scatter_block": 4,
        "scan": 2,
        "scatter": 3,
    }
    assert [c.coll_id for c in COLLECTIVES] == sorted(ids.values()), "sections in Open MPI's order"
    for coll in COLLECTIVES:
        assert [a.algorithm_id for a in coll.algorithms] == list(range(1, len(coll.algorithms) + 1))
        for match in coll.matches.values():
            coll.algorithm(match.algorithm_id)  # every id written exists in 4.1
            if match.segmented_id is not None:
                coll.algorithm(match.segmented_id)
        # Every collbench algorithm for the op is either mapped or says why not: nothing silently dropped.
        known = {s.name for s in algorithms_for(coll.op)} - {"native"}
        if coll.op.spec.nccl_tuned:
            assert known == set(coll.matches) | set(coll.no_match), coll.name
        else:
            # The new ops' builders land separately (issue 21): whatever of them exists is accounted for.
            assert known <= set(coll.matches) | set(coll.no_match), coll.name
    assert [c.name for c in collectives_for(Op.REDUCE_SCATTER)] == ["reduce_scatter", "reduce_scatter_block"]


def measured(op: str, lo: int, hi: int | None, algo: str, **evidence: object) -> Rule:
    params = {"segment_bytes": evidence.pop("segment_bytes", None), "layout": "rank-order"}
    return Rule(op, lo, hi, algo, params, **evidence)  # type: ignore[arg-type]


OPEN_MPI = RuleSet(
    2,
    1,
    (
        measured(
            "all-reduce", 0, 65535, "native", at_bytes=4096, measured_us=20.0, gain_vs_native=1.0,
            tie_with=("native:ring",), separation=0.01, noise=0.05,
        ),
        measured(
            "all-reduce", 65536, 1048575, "native:segmented_ring", segment_bytes=65536, at_bytes=262144,
            measured_us=300.0, gain_vs_native=1.5, separation=0.2, noise=0.04,
        ),
        measured(
            "all-reduce", 1048576, None, "native:ring", at_bytes=4194304, measured_us=900.0, gain_vs_native=2.0,
            separation=0.3, noise=0.03,
        ),
        measured(
            "reduce-scatter", 0, None, "native:ring", at_bytes=65536, measured_us=50.0, gain_vs_native=1.25,
            noise=0.02,
        ),
        measured("broadcast", 0, None, "native", at_bytes=65536, measured_us=30.0, separation=0.1, noise=0.02),
    ),
)  # fmt: skip


def open_mpi_profile(*sets: RuleSet) -> Profile:
    return Profile(fingerprint="fp", host="h", backend="mpi", rule_sets=sets)


def test_open_mpis_own_winners_are_written_with_their_evidence() -> None:
    built = build_ompi_rules(open_mpi_profile(OPEN_MPI))
    entries = parse(built.text)
    # allreduce: the fixed decision below 64 KiB (no rule), segmented ring with its segment, then ring.
    assert entries[2][2] == [(0, 0, 0, 0), (65536, 5, 0, 65536), (1048576, 4, 0, 0)]
    assert entries[12][2] == [(0, 3, 0, 0)]  # MPI_Reduce_scatter: ring, as measured
    assert entries[13][2] == [(0, 0, 0, 0)]  # MPI_Reduce_scatter_block was not measured: Open MPI's own
    assert entries[7][2] == [(0, 0, 0, 0)]  # bcast: the fixed decision was fastest
    text = unwrapped(built.text)
    assert (
        "native:segmented_ring -> segmented_ring, 65536-byte segments: measured at 262144 B: 300 us against "
        "Open MPI's fixed decision 450 us, 1.50x, noise 4.0%" in text
    )
    assert "native:ring -> ring: measured at 4194304 B: 900 us against Open MPI's fixed decision 1800 us, 2.00x" in text
    assert "no rule needed: Open MPI's fixed decision (20 us) at 4096 B: tied within the noise with native:ring" in text
    assert "MPI_Reduce_scatter_block was not measured" in text
    assert "rules chosen among Open MPI's own algorithms" in text
    assert built.notes == ()  # everything measured is something Open MPI runs
    assert len(built.unneeded) == 2
    assert built.unneeded[0].startswith("allreduce at 2 ranks on 1 node, from 0 B: no rule needed")
    assert "bcast" in built.unneeded[1] and "the fastest forced algorithm 10.0% slower" in built.unneeded[1]


def test_an_algorithm_this_open_mpi_lacks_for_the_collective_is_one_error() -> None:
    wrong = RuleSet(2, 1, (measured("all-reduce", 0, None, "native:bruck"),))
    with pytest.raises(UserError, match="allreduce has no algorithm 'bruck'"):
        build_ompi_rules(open_mpi_profile(wrong))


def test_cli_of_an_open_mpi_profile_needs_no_flag_and_lists_unneeded_ranges(tmp_path: Path) -> None:
    path = open_mpi_profile(OPEN_MPI).save(tmp_path / "p.yaml")
    result = CliRunner().invoke(app, ["export", "ompi-rules", str(path)])
    assert result.exit_code == 0, result.output
    assert parse(result.stdout)[2][2][1] == (65536, 5, 0, 65536)
    assert result.stderr.count("no rule needed") == 2
    # At 80 columns a range's line is continued indented, as a note's is (it ran on at the margin).
    wrapped = CliRunner().invoke(app, ["export", "ompi-rules", str(path)], env={"COLUMNS": "80"})
    lines = wrapped.stderr.splitlines()
    opens = [i for i, line in enumerate(lines) if line.startswith("allreduce at 2 ranks on 1 node, from 0 B")]
    assert len(opens) == 1 and lines[opens[0] + 1].startswith("  ") and lines[opens[0] + 1][2] != " ", wrapped.stderr
    assert max(len(line) for line in lines) <= 80, wrapped.stderr


NEW = RuleSet(
    3,
    1,
    (
        measured("all-to-all", 0, 4095, "native:modified_bruck", at_bytes=1020, measured_us=5.0, gain_vs_native=1.3),
        measured("all-to-all", 4096, None, "native", at_bytes=65535, measured_us=40.0, separation=0.1),
        measured("gather", 0, None, "native:linear_sync", segment_bytes=1024, measured_us=9.0, gain_vs_native=1.1),
        measured("scatter", 0, 999, "native:binomial", measured_us=4.0, gain_vs_native=1.2),
        measured("scatter", 1000, None, "native:linear_nb", measured_us=20.0, gain_vs_native=1.4),
        measured("barrier", 0, None, "native:tree", at_bytes=0, measured_us=3.0, gain_vs_native=1.2),
        measured("sendrecv", 0, None, "native", measured_us=5.0),
    ),
)


def test_open_mpis_alltoall_gather_scatter_and_barrier_winners_are_their_ids() -> None:
    built = build_ompi_rules(open_mpi_profile(NEW))
    entries = parse(built.text)
    assert sorted(entries) == [3, 6, 9, 15]  # alltoall, barrier, gather, scatter; no sendrecv section
    assert entries[3][3] == [(0, 3, 0, 0), (4096, 0, 0, 0)]  # modified Bruck, then the fixed decision
    assert entries[9][3] == [(0, 3, 0, 1024)]  # linear_sync with its first segment
    assert entries[15][3] == [(0, 2, 0, 0), (1000, 3, 0, 0)]  # binomial, then linear_nb
    assert entries[6][3] == [(0, 6, 0, 0)]  # tree
    for coll_id in (3, 6, 9, 15):  # other communicator sizes keep Open MPI's own choice
        assert entries[coll_id][1] == entries[coll_id][4] == [(0, 0, 0, 0)]
    assert applied(entries[15], 3, 999) == (0, 2, 0, 0) and applied(entries[15], 3, 1000) == (1000, 3, 0, 0)
    assert "# sendrecv: MPI_Sendrecv is point-to-point; coll/tuned has no algorithm or rules for it" in unwrapped(
        built.text
    )
    assert built.notes == ()


def test_only_the_barrier_rule_at_size_0_is_written_and_the_others_are_named() -> None:
    # Open MPI looks barrier's rules up at message size 0 (ompi_coll_tuned_barrier_intra_dec_dynamic).
    split = RuleSet(
        3,
        1,
        (
            measured("barrier", 0, 1023, "native:bruck", measured_us=3.0, gain_vs_native=1.2),
            measured("barrier", 1024, None, "native:linear", measured_us=3.0, gain_vs_native=1.2),
        ),
    )
    built = build_ompi_rules(open_mpi_profile(split))
    assert parse(built.text)[6][3] == [(0, 4, 0, 0)]
    assert len(built.notes) == 1 and "from 1024 B: native:linear is never applied" in built.notes[0]


def test_a_new_collectives_algorithm_of_another_collective_is_one_error() -> None:
    wrong = RuleSet(2, 1, (measured("gather", 0, None, "native:pairwise"),))
    with pytest.raises(UserError, match="gather has no algorithm 'pairwise'"):
        build_ompi_rules(open_mpi_profile(wrong))


def test_open_mpis_scan_and_exscan_winners_are_their_ids() -> None:
    # coll_tuned_{scan,exscan}_decision.c (v4.1.4): 1 linear, 2 recursive_doubling; sections 14 and 8.
    scans = RuleSet(
        3,
        1,
        (
            measured("scan", 0, 4095, "native:linear", measured_us=9.0, gain_vs_native=1.1),
            measured("scan", 4096, None, "native:recursive_doubling", measured_us=90.0, gain_vs_native=1.3),
            measured("exscan", 0, None, "native:recursive_doubling", measured_us=9.0, gain_vs_native=1.2),
        ),
    )
    entries = parse(build_ompi_rules(open_mpi_profile(scans)).text)
    assert sorted(entries) == [8, 14]
    assert entries[14][3] == [(0, 1, 0, 0), (4096, 2, 0, 0)]
    assert entries[8][3] == [(0, 2, 0, 0)]


def test_collbench_scan_algorithms_map_the_same_way_in_scan_and_exscan() -> None:
    # coll_tuned_{scan,exscan}_decision.c (v4.1.4): both have 1 linear (the chain) and 2 recursive_doubling
    # (a butterfly, r ^ 2^k both ways), so collbench's linear maps to 1 in both sections and its
    # Hillis-Steele recursive-doubling to neither: 0, Open MPI's own choice, with the reason in a note.
    scans = RuleSet(
        4,
        1,
        (
            Rule("scan", 0, 4095, "linear", P),
            Rule("scan", 4096, None, "recursive-doubling", P),
            Rule("exscan", 0, 4095, "linear", P),
            Rule("exscan", 4096, None, "recursive-doubling", P),
        ),
    )
    built = build_ompi_rules(profile(scans), from_other_backend=True)
    entries = parse(built.text)
    assert entries[14][4] == entries[8][4] == [(0, 1, 0, 0), (4096, 0, 0, 0)]
    for name in ("scan", "exscan"):
        (note,) = [n for n in built.notes if n.startswith(f"{name} at 4 ranks")]
        assert "recursive-doubling has no equivalent" in note and "Hillis-Steele" in note
