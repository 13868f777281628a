"""Selection: lowest measured time per size, switches only beyond noise, contiguous merged ranges."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from synthetic_rows import point_row

from collbench.errors import ConfigError
from collbench.profile.rules import Rule, check_coverage
from collbench.results.row import ResultRow
from collbench.tuning.selection import SelectionSettings, select_nccl_rules, select_rules

SIZES = [1 << k for k in range(10, 24, 2)]  # 1 KiB .. 4 MiB, x4 steps


def row(
    algo: str,
    size: int,
    t: float,
    *,
    spread: float = 0.01,
    wrong: int = 0,
    op: str = "all-reduce",
    iters: int = 10,
    **kw: object,
) -> ResultRow:
    """A 4-rank, out-of-place row at ``t`` (selection reads times, spread, iterations and wrong elements)."""
    return point_row(algo, size, t, spread=spread, wrong=wrong, op=op, iters=iters, world_size=4, in_place=False, **kw)


def alpha_beta(alpha: float, beta_us_per_byte: float):  # type: ignore[no-untyped-def]
    return lambda s: alpha + beta_us_per_byte * s


LAT = alpha_beta(20.0, 0.004)  # low latency, slow per byte (recursive doubling-like)
BW = alpha_beta(120.0, 0.001)  # high latency, fast per byte (ring-like); crossover at 33,333 bytes
NAT = alpha_beta(60.0, 0.002)


def rows_for(models: dict[str, object], sizes: list[int] = SIZES, spread: float = 0.01) -> list[ResultRow]:
    return [row(a, s, m(s), spread=spread) for a, m in models.items() for s in sizes]  # type: ignore[operator]


@dataclass
class LinearFit:
    op: str
    algo: str
    alpha_us: float
    us_per_byte: float

    def predict_us(self, size_bytes: int, world_size: int | None = None) -> float:
        return self.alpha_us + self.us_per_byte * size_bytes


def test_picks_lowest_measured_and_covers_everything() -> None:
    # NAT itself is only 3.01% above ring at 64 KiB: a tie within the 3% floor, which native would take.
    nat = alpha_beta(66.0, 0.002)
    rules = select_rules(rows_for({"recursive-doubling": LAT, "ring": BW, "native": nat}))
    check_coverage(rules)
    assert [r.algo for r in rules] == ["recursive-doubling", "ring"]
    assert rules[0].min_bytes == 0 and rules[-1].max_bytes is None
    # The boundary lies between the last size LAT wins (16 KiB) and the first BW wins (64 KiB).
    assert 16384 < rules[1].min_bytes <= 65536
    for r in rules:
        assert r.at_bytes is not None and r.covers(r.at_bytes)
        assert r.measured_us is not None and r.gain_vs_native is not None
        # gain = native's time / the rule's time at the same size
        assert r.gain_vs_native == pytest.approx(nat(r.at_bytes) / r.measured_us, rel=1e-3)


def test_boundary_follows_fits_between_measured_sizes() -> None:
    fits = [LinearFit("all-reduce", "recursive-doubling", 20.0, 0.004), LinearFit("all-reduce", "ring", 120.0, 0.001)]
    rules = select_rules(rows_for({"recursive-doubling": LAT, "ring": BW}), fits)
    assert [r.algo for r in rules] == ["recursive-doubling", "ring"]
    # Predicted crossover: 20 + 0.004 s = 120 + 0.001 s  ->  s = 33,333.3; the first size ring wins is 33,334.
    assert rules[1].min_bytes == 33334
    assert rules[0].max_bytes == 33333
    assert rules[1].predicted_us == pytest.approx(BW(rules[1].at_bytes), rel=1e-3)


def test_fits_that_miss_the_gaps_measured_ends_do_not_place_the_boundary() -> None:
    # Ring's fit is 15% slow at both ends of the gap (16 KiB, 64 KiB): its crossover with recursive
    # doubling (past 64 KiB) says nothing about the gap, whose geometric middle is used instead.
    fits = [LinearFit("all-reduce", "recursive-doubling", 20.0, 0.004), LinearFit("all-reduce", "ring", 138.0, 0.00115)]
    rules = select_rules(rows_for({"recursive-doubling": LAT, "ring": BW}), fits)
    assert [r.algo for r in rules] == ["recursive-doubling", "ring"]
    assert rules[1].min_bytes == round((16384 * 65536) ** 0.5)


def test_without_fits_boundary_is_geometric_middle() -> None:
    rules = select_rules(rows_for({"recursive-doubling": LAT, "ring": BW}))
    assert rules[1].min_bytes == round((16384 * 65536) ** 0.5)


def test_gain_within_noise_keeps_native() -> None:
    # ring is 2% faster everywhere, but the points jitter by 10%: no switch away from the default.
    models = {"native": NAT, "ring": lambda s: NAT(s) * 0.98}
    rules = select_rules(rows_for(models, spread=0.10))
    assert [r.algo for r in rules] == ["native"]
    assert rules[0].gain_vs_native == 1.0
    # The same 2% with exact points and a 1% minimum gain is a switch.
    exact = select_rules(rows_for(models, spread=0.0), settings=SelectionSettings(min_gain=0.01))
    assert [r.algo for r in exact] == ["ring"]


def test_more_iterations_lower_the_bar() -> None:
    # A 6% gain with 20% jitter: within the noise of 4-iteration medians (bar 14%), beyond that of
    # 400-iteration medians (bar: the 3% minimum).
    def data(iters: int) -> list[ResultRow]:
        return [row("native", s, NAT(s), spread=0.2, iters=iters) for s in SIZES] + [
            row("ring", s, NAT(s) * 0.94, spread=0.2, iters=iters) for s in SIZES
        ]

    assert [r.algo for r in select_rules(data(4))] == ["native"]
    assert [r.algo for r in select_rules(data(400))] == ["ring"]


def test_segment_sizes_above_the_message_are_one_variant() -> None:
    # tree measured with 1 MiB and 4 MiB segments: identical below 1 MiB, distinct above.
    data = [row("tree", s, BW(s), segment_bytes=seg) for s in SIZES for seg in (1 << 20, 4 << 20)]
    data += [row("tree", 8 << 20, BW(8 << 20) * f, segment_bytes=seg) for seg, f in ((1 << 20, 0.5), (4 << 20, 1.0))]
    rules = select_rules(data)
    assert [(r.algo, r.params["segment_bytes"]) for r in rules] == [("tree", 4 << 20), ("tree", 1 << 20)]
    assert rules[1].min_bytes > SIZES[-1]


def test_disagreeing_rounds_raise_the_bar() -> None:
    # Two rounds that disagree by +-20% about every point: a 10% gain is within that; one round is not.
    data = [row("native", s, NAT(s) * f, spread=0.0) for s in SIZES for f in (0.8, 1.2)]
    data += [row("ring", s, NAT(s) * 0.9 * f, spread=0.0) for s in SIZES for f in (0.8, 1.2)]
    assert [r.algo for r in select_rules(data)] == ["native"]
    one_round = [r for r in data if r.time_us in {NAT(r.size_bytes) * 0.8, NAT(r.size_bytes) * 0.9 * 0.8}]
    assert [r.algo for r in select_rules(one_round)] == ["ring"]
    # The rule's measured time is the smallest of the rounds' times.
    at = select_rules(data)[0].at_bytes
    assert select_rules(data)[0].measured_us == pytest.approx(NAT(at) * 0.8, rel=1e-3)


def test_noise_does_not_hide_a_large_gain() -> None:
    # 60% jitter is capped at the 25% threshold, so a 2x faster algorithm still wins.
    rules = select_rules(rows_for({"native": NAT, "ring": lambda s: NAT(s) / 2}, spread=0.6))
    assert [r.algo for r in rules] == ["ring"]
    assert rules[0].gain_vs_native == pytest.approx(2.0, rel=1e-3)


def test_single_size_blip_does_not_flap() -> None:
    # tree wins by 1% at one size only: within the 3% minimum gain, so one rule.
    data = rows_for({"ring": BW})
    data += [row("tree", s, BW(s) * (0.99 if s == SIZES[3] else 1.2)) for s in SIZES]
    rules = select_rules(data)
    assert [r.algo for r in rules] == ["ring"]


def test_wrong_rows_never_win_and_params_kept() -> None:
    data = rows_for({"ring": BW})
    data += [row("direct", s, 1.0, wrong=5) for s in SIZES]
    data += [row("tree", s, BW(s) / 3, segment_bytes=65536, layout="topology") for s in SIZES[3:]]
    rules = select_rules(data)
    assert "direct" not in {r.algo for r in rules}
    assert [r.algo for r in rules] == ["ring", "tree"]
    assert rules[1].params == {"segment_bytes": 65536, "layout": "topology"}
    assert rules[0].gain_vs_native is None  # no native measured, none fitted


def test_several_ops_each_cover_zero_to_unbounded() -> None:
    data = rows_for({"ring": BW, "native": NAT})
    data += [row("tree", s, LAT(s), op="broadcast") for s in SIZES]
    rules = select_rules(data)
    check_coverage(rules)
    assert {r.op for r in rules} == {"all-reduce", "broadcast"}


def test_mixed_world_sizes_rejected() -> None:
    data = rows_for({"ring": BW})
    data.append(row("ring", 1024, 5.0).__class__(**{**row("ring", 1024, 5.0).to_dict(), "world_size": 8}))
    with pytest.raises(ConfigError, match="world size"):
        select_rules(data)
    with pytest.raises(ConfigError, match="no usable"):
        select_rules([row("ring", 1024, 5.0, wrong=1)])


def test_check_coverage_finds_gaps() -> None:
    with pytest.raises(ValueError, match="expected 101"):
        check_coverage([Rule("all-reduce", 0, 100, "ring"), Rule("all-reduce", 102, None, "tree")])
    with pytest.raises(ValueError, match="unbounded"):
        check_coverage([Rule("all-reduce", 0, 100, "ring")])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["ring", "tree", "native", "recursive-doubling"]), st.integers(0, 8), st.floats(1, 1e5)
        ),
        min_size=1,
        max_size=40,
    )
)
def test_any_measurements_give_contiguous_merged_rules(points: list[tuple[str, int, float]]) -> None:
    data = [row(a, 1 << (8 + 2 * k), t) for a, k, t in points]
    rules = select_rules(data)
    check_coverage(rules)
    for a, b in itertools.pairwise(rules):
        assert a.op != b.op or a.variant != b.variant  # adjacent ranges with the same winner are merged


def test_a_tie_goes_to_native_and_is_written_in_the_rule() -> None:
    # Ring is 2% faster than native everywhere: within the 3% floor, so not separable: native stays.
    rows = rows_for({"ring": alpha_beta(98.0, 0.00098), "native": alpha_beta(100.0, 0.001)})
    rules = select_rules(rows)
    assert [r.algo for r in rules] == ["native"]
    assert rules[0].tie_with == ("ring",)
    assert rules[0].separation is not None and -0.03 < rules[0].separation < 0
    assert rules[0].noise == pytest.approx(0.03)
    again = Rule.from_dict(rules[0].to_dict())
    assert again == rules[0]


def test_a_tie_without_native_keeps_the_algorithm_in_use() -> None:
    # tree wins clearly at small sizes; at large sizes ring is only 1% faster: a tie, tree stays.
    rows = rows_for({"tree": alpha_beta(20.0, 0.00102), "ring": alpha_beta(60.0, 0.001), "native": NAT})
    rules = select_rules(rows)
    assert [r.algo for r in rules] == ["tree"]
    assert "ring" in rules[0].tie_with


def test_separated_winners_have_no_tie_and_positive_separation() -> None:
    rules = select_rules(rows_for({"ring": alpha_beta(50.0, 0.0005), "native": NAT}))
    assert [r.algo for r in rules] == ["ring"]
    assert rules[0].tie_with == ()
    assert rules[0].separation is not None and rules[0].separation > rules[0].noise  # type: ignore[operator]


def test_decisions_use_each_rows_first_quartile() -> None:
    # Stalls pushed ring's median to 3x its first quartile; the quartile decides.
    ring = [row("ring", s, 300.0, time_us_p25=100.0) for s in SIZES]
    native = [row("native", s, 150.0, time_us_p25=150.0) for s in SIZES]
    rules = select_rules(ring + native)
    assert [r.algo for r in rules] == ["ring"]
    assert rules[0].measured_us == pytest.approx(100.0)


def test_old_rule_dicts_without_evidence_still_load() -> None:
    old = {"op": "all-reduce", "min_bytes": 0, "max_bytes": None, "algo": "ring", "params": {}}
    rule = Rule.from_dict(old)
    assert (rule.tie_with, rule.separation, rule.noise) == ((), None, None)
    assert "tie_with" not in rule.to_dict()


def test_a_gain_inside_stall_noise_is_a_tie_however_large() -> None:
    # A 1.6x gain, but the points stalled: their noise is the whole spread (60% each), uncapped.
    def both(stall: float) -> list[ResultRow]:
        return [row("native", s, NAT(s), spread=0.6, stall_fraction=stall) for s in SIZES] + [
            row("ring", s, NAT(s) / 1.6, spread=0.6, stall_fraction=stall) for s in SIZES
        ]

    rules = select_rules(both(0.4))
    assert [r.algo for r in rules] == ["native"]
    assert rules[0].tie_with == ("ring",)
    # Steady (not stalled) points with the same spread keep the cap: ring wins, as above.
    assert [r.algo for r in select_rules(both(0.0))] == ["ring"]


def test_a_round_that_load_hit_does_not_widen_the_noise() -> None:
    # Three rounds: two agree within 1%, one stalled 10x. The point's time is the smallest round's and
    # its between-round noise the gap to the next smallest (1%), not a spread the stalled round inflates:
    # a 10% gain is found.
    def rounds(algo: str, t: float) -> list[ResultRow]:
        return [row(algo, s, t * f, spread=0.0) for s in SIZES for f in (1.0, 1.01, 10.0)]

    rules = select_rules(rounds("native", 100.0) + rounds("ring", 90.0))
    assert [r.algo for r in rules] == ["ring"]
    assert rules[0].noise == pytest.approx(max(0.03, 0.01 * 2**0.5), rel=1e-3)
    # Stalled in all rounds but one, the gap is wide (10x) and the two stay tied: rounds must go on.
    one_clean = [
        row(a, s, t * f, spread=0.0)
        for a, t in (("native", 100.0), ("ring", 90.0))
        for s in SIZES
        for f in (1.0, 10.0, 12.0)
    ]
    assert [r.algo for r in select_rules(one_clean)] == ["native"]


def test_a_stalled_point_measured_once_keeps_its_whole_spread_as_noise() -> None:
    from collbench.tuning.selection import measured_points

    (point,) = measured_points([row("ring", 1024, 100.0, spread=0.4, stall_fraction=0.3, iters=100)])[
        "all-reduce"
    ].values()
    assert point[1024].noise == pytest.approx(0.4)
    two = [row("ring", 1024, t, spread=0.4, stall_fraction=0.3, iters=100) for t in (100.0, 102.0)]
    (again,) = measured_points(two)["all-reduce"].values()
    # Measured twice, the rounds' gap (2%) and the spread over sqrt(all 200 iterations) say it instead.
    assert again[1024].noise == pytest.approx((0.02**2 + 0.4**2 / 200) ** 0.5, rel=1e-3)


def test_a_point_whose_rounds_agree_by_chance_takes_the_sizes_median_gap() -> None:
    from collbench.tuning.selection import measured_points

    gaps = {"native": 0.10, "ring": 0.12, "tree": 0.08, "direct": 0.001}
    data = [row(a, 4096, t, spread=0.0) for a, g in gaps.items() for t in (100.0, 100.0 * (1 + g))]
    points = {v.algo: pts[4096] for v, pts in measured_points(data)["all-reduce"].items()}
    # The median of the four gaps is 9%: direct's 0.1% is raised to it, the others keep their own.
    assert points["direct"].between == pytest.approx(0.09)
    assert points["ring"].between == pytest.approx(0.12) and points["native"].between == pytest.approx(0.10)
    assert points["tree"].between == pytest.approx(0.09)


def test_a_winner_must_beat_two_standard_errors_of_the_combined_noise() -> None:
    # Each point's rounds are 4% apart: its noise is 4%, the two points' combined noise 5.7%. A gain of
    # 6.4% is beyond one standard error but not two: a tie, kept by native. One of 17.6% is beyond both.
    def rounds(algo: str, t: float) -> list[ResultRow]:
        return [row(algo, s, t * f, spread=0.0) for s in SIZES for f in (1.0, 1.04)]

    tied = select_rules(rounds("native", 100.0) + rounds("ring", 94.0))
    assert [r.algo for r in tied] == ["native"]
    assert tied[0].noise == pytest.approx(2 * 0.04 * 2**0.5, rel=1e-3)
    assert [r.algo for r in select_rules(rounds("native", 100.0) + rounds("ring", 85.0))] == ["ring"]
    one_sigma = SelectionSettings(sigmas=1.0)
    assert [r.algo for r in select_rules(rounds("native", 100.0) + rounds("ring", 94.0), settings=one_sigma)] == [
        "ring"
    ]
    with pytest.raises(ConfigError, match="positive number of sigmas"):
        SelectionSettings(sigmas=0.0)


def test_rounds_that_disagree_beyond_the_cap_are_not_capped() -> None:
    # Ring's two rounds are 36% apart (the machine changed speed between them): its best round's 43%
    # lead over native is inside that noise, however far beyond the 25% cap on steady jitter.
    data = [row("native", s, t, spread=0.0) for s in SIZES for t in (100.0, 100.5)]
    data += [row("ring", s, t, spread=0.0) for s in SIZES for t in (70.0, 95.0)]
    assert [r.algo for r in select_rules(data)] == ["native"]
    steady = [row("native", s, t, spread=0.0) for s in SIZES for t in (100.0, 100.5)]
    steady += [row("ring", s, t, spread=0.0) for s in SIZES for t in (70.0, 72.0)]
    assert [r.algo for r in select_rules(steady)] == ["ring"]


def _rounds_of(times: dict[str, list[float]], size: int = 4096) -> list[ResultRow]:
    """One row per algorithm and round at ``size``: ``times[algo][r]`` is round r's time."""
    return [
        dataclasses.replace(row(algo, size, t, spread=0.0), tune_round=r)
        for algo, per_round in times.items()
        for r, t in enumerate(per_round)
    ]


def test_a_round_the_whole_machine_ran_slower_in_is_put_at_the_fastest_rounds_speed() -> None:
    from collbench.tuning.selection import measured_points, round_speeds

    # Rounds 1 and 2 ran 30% slower for every algorithm (the VM changed speed, no stall): their times
    # are put at round 0's speed, so the rounds agree and ring's 10% lead is beyond the noise.
    slow = 1.3
    times = {
        "native": [100.0, 100.0 * slow, 100.0 * slow],
        "ring": [90.0, 90.0 * slow * 1.01, 90.0 * slow * 1.005],
        "tree": [120.0, 120.0 * slow, 120.0 * slow],
    }
    rows = _rounds_of(times)
    assert round_speeds(rows) == pytest.approx({0: 1.0, 1: slow, 2: slow})
    points = {v.algo: pts[4096] for v, pts in measured_points(rows)["all-reduce"].items()}
    assert points["native"].between == pytest.approx(0.0, abs=1e-9)
    assert points["ring"].between == pytest.approx(0.005, rel=1e-3)
    assert [r.algo for r in select_rules(rows)] == ["ring"]
    # Unmarked, the same times put every point's two best rounds 30% apart: a tie, kept by native.
    unmarked = [dataclasses.replace(r, tune_round=None) for r in rows]
    assert [r.algo for r in select_rules(unmarked)] == ["native"]


def test_round_speeds_need_three_shared_variants_and_marked_rounds() -> None:
    from collbench.tuning.selection import round_speeds

    # With two variants, each one's own difference would be half the round's factor: no factor.
    assert round_speeds(_rounds_of({"native": [100.0, 130.0], "ring": [90.0, 117.0]})) == {0: 1.0, 1: 1.0}
    assert round_speeds([row("ring", 4096, 90.0), row("ring", 4096, 95.0)]) == {}
    # The fastest round is the reference: a faster later round puts the first one at its speed.
    faster_later = _rounds_of({a: [t * 1.25, t] for a, t in (("native", 100.0), ("ring", 90.0), ("tree", 120.0))})
    assert round_speeds(faster_later) == pytest.approx({0: 1.25, 1: 1.0})


def test_in_round_marks_rows_and_the_mark_survives_a_results_file(tmp_path: Path) -> None:
    from collbench.results.io import read_rows, write_rows
    from collbench.tuning.selection import in_round

    marked = in_round([row("ring", 4096, 90.0)], 3)
    assert marked[0].tune_round == 3
    for name in ("r.jsonl", "r.csv"):
        write_rows(tmp_path / name, marked)
        assert read_rows(tmp_path / name)[0].tune_round == 3


def test_a_lead_from_one_lucky_round_is_a_tie_and_two_rounds_are_not_enough() -> None:
    # One-shot's best round is 7% ahead of recursive doubling; round by round it was 7% ahead, 1%
    # behind, 10% ahead and 1% ahead (issue 10, pair 20): not beyond two standard errors.
    times = {
        "native": [110.0, 110.0, 110.0, 110.0],
        "one-shot": [46.5, 50.6, 49.3, 49.4],
        "recursive-doubling": [50.0, 49.9, 54.8, 50.0],
    }
    rules = select_rules(_rounds_of(times))
    assert [r.algo for r in rules] == ["one-shot"] and rules[0].tie_with
    # Ahead by 7-8% in each of four rounds: apart.
    steady = {
        "native": [110.0] * 4,
        "one-shot": [46.5, 46.6, 46.4, 46.5],
        "recursive-doubling": [50.0, 50.2, 50.1, 50.3],
    }
    assert not select_rules(_rounds_of(steady))[0].tie_with
    # The same lead in only two shared rounds: measured again rather than trusted.
    two = {k: v[:2] for k, v in steady.items()}
    assert select_rules(_rounds_of(two))[0].tie_with


def test_two_rounds_part_a_pair_only_where_each_round_is_behind_beyond_any_bar() -> None:
    from collbench.tuning.rounds import unsettled
    from collbench.tuning.selection import measured_points

    # As on the namespace cluster: recursive doubling 1.34-1.48x behind rabenseifner in both fixed
    # rounds, ring tied with rabenseifner. Two rounds settle recursive doubling: the tie round that
    # follows measures ring and rabenseifner alone.
    times = {
        "native": [200.0, 201.0],
        "rabenseifner": [43.5, 43.5],
        "ring": [43.7, 44.0],
        "recursive-doubling": [63.6, 58.1],
    }
    (todo,) = unsettled(measured_points(_rounds_of(times)))
    assert set(todo.algos) == {"rabenseifner", "ring"}
    # 30% behind in one round, 20% in the other: the cap (25%) is passed in one round only.
    times["recursive-doubling"] = [56.6, 52.2]
    (todo,) = unsettled(measured_points(_rounds_of(times)))
    assert "recursive-doubling" in todo.algos


def test_two_rounds_far_apart_must_also_be_beyond_the_pairs_own_noise() -> None:
    from collbench.tuning.selection import Point, SelectionSettings, apart_round_by_round

    def point(time_us: float, rounds: tuple[float, float], between: float) -> Point:
        by_round = tuple(enumerate(rounds))
        return Point(
            size_bytes=4096, time_us=time_us, time_us_min=time_us, time_us_max=time_us, iters=5,
            between=between, rounds=2, by_round=by_round,
        )  # fmt: skip

    faster = point(100.0, (100.0, 100.0), 0.0)
    settings = SelectionSettings()
    # 40% behind in both rounds, its rounds 5% apart: the bar is the cap, 25%.
    assert apart_round_by_round(point(140.0, (140.0, 141.0), 0.05), faster, settings)
    # As far behind, but its rounds 30% apart: 2 x that noise is a 60% bar, and the size is measured again.
    assert not apart_round_by_round(point(140.0, (140.0, 141.0), 0.30), faster, settings)
    # 20% behind in both, steady: within the cap, however steady (two rounds can agree by chance).
    assert not apart_round_by_round(point(120.0, (120.0, 120.0), 0.0), faster, settings)


def test_a_tie_round_leaves_out_a_size_whose_tie_is_shown_within_the_smallest_gain() -> None:
    from collbench.tuning.rounds import unsettled
    from collbench.tuning.selection import measured_points

    # As on the namespace cluster after three rounds: at 2 MiB ring and rabenseifner within 0.5-2.3% of
    # each other in every round. Three rounds do not show that within 3%: the mean, 1.3%, give or take
    # Student's t at 2 degrees of freedom (4.53 standard errors of 0.52%), reaches 3.6%. At 16 MiB
    # rabenseifner 3.0-3.8% behind in every round: neither apart (3.3% less 1.1%) nor shown within 3%.
    # Both sizes are measured again.
    at_2m = {"native": [650.0] * 3, "ring": [86.5, 87.9, 86.5], "rabenseifner": [88.5, 88.5, 87.2]}
    at_16m = {"native": [5260.0] * 3, "ring": [701.3, 706.0, 701.3], "rabenseifner": [728.3, 728.3, 722.8]}
    rows = _rounds_of(at_2m, size=2 << 20) + _rounds_of(at_16m, size=16 << 20)
    (todo,) = unsettled(measured_points(rows))
    assert todo.sizes == (2 << 20, 16 << 20) and set(todo.algos) == {"ring", "rabenseifner"}
    # A fourth round at 2 MiB, 1.3% apart again: 1.3% give or take 3.31 standard errors of 0.36% (3
    # degrees of freedom) is inside 3%. Whichever is faster, by less than the decision asks of a
    # switch: a tie round has nothing left to learn there.
    at_2m = {"native": [650.0] * 4, "ring": [86.5, 87.9, 86.5, 86.9], "rabenseifner": [88.5, 88.5, 87.2, 88.0]}
    rows = _rounds_of(at_2m, size=2 << 20) + _rounds_of(at_16m, size=16 << 20)
    (todo,) = unsettled(measured_points(rows))
    assert todo.sizes == (16 << 20,) and set(todo.algos) == {"ring", "rabenseifner"}
    # Still a tie for the profile: the tie goes to the simpler choice, as after the last tie round.
    rules = select_rules(rows)
    assert rules[0].tie_with


def test_equal_round_by_round_needs_three_rounds_within_the_smallest_gain() -> None:
    from collbench.tuning.selection import Point, SelectionSettings, equal_round_by_round

    def point(rounds: tuple[float, ...]) -> Point:
        return Point(
            size_bytes=4096, time_us=min(rounds), time_us_min=min(rounds), time_us_max=max(rounds), iters=5,
            rounds=len(rounds), by_round=tuple(enumerate(rounds)),
        )  # fmt: skip

    settings = SelectionSettings()
    base = point((100.0, 100.0, 100.0))
    assert equal_round_by_round(point((101.0, 99.5, 100.5)), base, settings)
    assert not equal_round_by_round(point((101.0, 99.5)), point((100.0, 100.0)), settings)  # two rounds: no error
    assert not equal_round_by_round(point((102.8, 103.2, 102.4)), base, settings)  # 2.8% +- 0.5%: may be 3%
    assert not equal_round_by_round(point((104.0, 96.0, 100.0)), base, settings)  # rounds too far apart


def test_a_rule_shows_the_time_measured_not_the_time_put_at_another_rounds_speed() -> None:
    from collbench.tuning.selection import measured_points

    # Round 0 ran 30% slower for all; ring's round-0 call was also 5% lucky: at round 1's speed it is
    # 85.5 us, faster than any time measured. Decisions compare that; the rule shows 90 us, measured.
    times = {
        "native": [130.0, 100.0, 100.0],
        "ring": [90.0 * 1.3 * 0.95, 90.0, 90.4],
        "tree": [156.0, 120.0, 120.0],
    }
    rows = _rounds_of(times)
    (ring,) = [pts[4096] for v, pts in measured_points(rows)["all-reduce"].items() if v.algo == "ring"]
    assert ring.time_us == pytest.approx(85.5) and ring.measured_us == pytest.approx(90.0)
    (rule,) = select_rules(rows)
    assert rule.algo == "ring" and rule.measured_us == pytest.approx(90.0)
    assert rule.gain_vs_native == pytest.approx(100.0 / 90.0, rel=1e-3)


def test_nccl_selection_is_made_among_nccl_variants_only() -> None:
    # Over NCCL, collbench's own recursive doubling wins the small sizes overall; the NCCL exports need
    # the best of what NCCL itself can run there, chosen the same way.
    models = {
        "recursive-doubling": alpha_beta(5.0, 0.004),
        "native": NAT,
        "native:ring/ll@4ch": alpha_beta(15.0, 0.004),
        "native:ring/simple@32ch": alpha_beta(150.0, 0.0005),
    }
    rows = [dataclasses.replace(r, backend="nccl") for r in rows_for(models)]
    overall = select_rules(rows)
    assert overall[0].algo == "recursive-doubling"
    nccl = select_nccl_rules(rows)
    assert nccl is not None
    check_coverage(nccl)
    assert [r.algo for r in nccl] == ["native:ring/ll@4ch", "native:ring/simple@32ch"]
    assert nccl[-1].algo == overall[-1].algo
    # Its gains are against NCCL's own choice, as the overall selection's are.
    assert nccl[0].gain_vs_native == pytest.approx(NAT(nccl[0].at_bytes) / nccl[0].measured_us, rel=1e-3)


def test_no_nccl_selection_for_another_backend() -> None:
    rows = rows_for({"recursive-doubling": LAT, "native": NAT})  # gloo rows
    assert select_nccl_rules(rows) is None
    only_own = [dataclasses.replace(r, backend="nccl") for r in rows_for({"ring": BW})]
    assert select_nccl_rules(only_own) is None
