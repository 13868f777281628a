"""Rule sets predicted from fitted models for shapes nobody measured, and the shape options' parsers."""

from __future__ import annotations

import pytest

from collbench.errors import ConfigError
from collbench.models.crossover import find_crossovers
from collbench.models.fitted import Fit
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.tuning.predicted_shapes import predicted_rule_set, with_predictions
from collbench.tuning.shape_args import Shape, parse_ranks, parse_shapes


def fit(algo: str, alpha_us: float, beta_us_per_byte: float, world: int = 4, r2: float = 1.0) -> Fit:
    return Fit("all-reduce", algo, "gloo", world, alpha_us, beta_us_per_byte, None, r2, 1.0, 2.0, 256, 1 << 24)


# Recursive doubling: few steps, lg(p) x the data; ring: 2(p-1) steps, 2(p-1)/p of the data; native
# a slower one (not predicted at other shapes: gloo's algorithm is not known). So recursive doubling
# wins small messages and ring large ones.
FITS = [fit("recursive-doubling", 10.0, 0.001), fit("ring", 10.0, 0.001), fit("native", 40.0, 0.002)]


def test_predicted_rules_follow_the_models_at_the_new_size() -> None:
    rule_set = predicted_rule_set(FITS, ["all-reduce"], 16, 2)
    assert rule_set.predicted and rule_set.shape == (16, 2)
    algos = [r.algo for r in rule_set.rules]
    assert algos == ["recursive-doubling", "ring"]
    (crossover,) = find_crossovers(FITS[:2], world_size=16, lo_bytes=1, hi_bytes=1 << 24)
    assert rule_set.rules[1].min_bytes == crossover.size_bytes
    for rule in rule_set.rules:
        assert rule.measured_us is None and rule.predicted_us is not None and rule.at_bytes is not None
        chosen = next(f for f in FITS if f.algo == rule.algo)
        assert rule.predicted_us == pytest.approx(chosen.predict_us(rule.at_bytes, 16))
        # gloo's native runs an algorithm its fit cannot know: no gain over it is claimed at 16 ranks.
        assert rule.gain_vs_native is None
    # At 16 ranks the crossover moves from where it is at the measured 4 ranks.
    (at_four,) = find_crossovers(FITS[:2], world_size=4, lo_bytes=1, hi_bytes=1 << 24)
    assert at_four.size_bytes != crossover.size_bytes


def test_predicted_rules_switch_and_are_priced_only_at_sizes_measured() -> None:
    # Measured from 256 B to 16 MiB. At 16 ranks these two fits cross at 131 B, below any size
    # measured: the set said 'recursive-doubling from 0 B to 130 B, at 11 B', then ring 'at 131 B'.
    # Below the smallest size measured the winner there holds, as a measured set's first rule does.
    below = [fit("recursive-doubling", 10.0, 0.5), fit("ring", 10.0, 0.001)]
    (crossing,) = find_crossovers(below, world_size=16, lo_bytes=1, hi_bytes=1 << 24)
    assert crossing.size_bytes < 256
    (rule,) = predicted_rule_set(below, ["all-reduce"], 16, 2).rules
    assert (rule.min_bytes, rule.max_bytes, rule.algo) == (0, None, "ring")
    # A set of one rule was priced 'at 1 B'; now at the middle of the sizes measured (log scale).
    assert rule.at_bytes == 1 << 16
    for rule in predicted_rule_set(FITS, ["all-reduce"], 16, 2).rules:
        assert 256 <= rule.at_bytes <= 1 << 24
        assert rule.min_bytes <= rule.at_bytes and (rule.max_bytes is None or rule.at_bytes <= rule.max_bytes)


def test_with_predictions_adds_sets_and_refuses_measured_shapes() -> None:
    measured = RuleSet(4, 1, (Rule("all-reduce", 0, None, "ring"),))
    profile = Profile("fp", "h", "gloo", (measured,), fits=tuple(FITS))
    more = with_predictions(profile, [Shape(8), Shape(64, 8)])
    # 8 ranks name no nodes: they keep the measured 4 ranks a node (2 nodes; before, the profile's 1).
    assert more.shapes == [(4, 1), (8, 2), (64, 8)]
    assert [s.predicted for s in more.rule_sets] == [False, True, True]
    assert more.select("all-reduce", 1 << 20, world_size=64).algo == "ring"
    with pytest.raises(ConfigError, match="measured already"):
        with_predictions(profile, [Shape(4)])
    with pytest.raises(ConfigError, match="no fitted models"):
        with_predictions(Profile("fp", "h", "gloo", (measured,)), [Shape(8)])


def test_parsers() -> None:
    assert parse_ranks("4") == (4,)
    assert parse_ranks("2, 4,8") == (2, 4, 8)
    assert parse_shapes("8,64:8") == (Shape(8), Shape(64, 8))
    for text, message in [("1", "at least 2"), ("2,x", "'x'"), ("2,2", "given twice"), ("", "at least 2")]:
        with pytest.raises(ConfigError, match=message):
            parse_ranks(text)
    for text, message in [
        ("8:9", "nodes must be 1..8"),
        ("8:0", "nodes must be"),
        ("8,8", "given twice"),
        # The nodes without their ranks: it was said as "--predict-ranks '': ...", the value given nowhere.
        (":8", r"each shape is RANKS or RANKS:NODES, got ':8'"),
        ("8,", r"each shape is RANKS or RANKS:NODES, got ''"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_shapes(text)
    # Nodes the ranks do not spread evenly over are a shape as the default node count's part-full last
    # node is (predict --nodes and the default agree): said by prediction_notes, not refused.
    assert parse_shapes("12:5") == (Shape(12, 5),)


def test_fits_that_do_not_explain_their_data_are_not_extrapolated() -> None:
    noisy_ring = fit("ring", 10.0, 0.001, r2=0.2)
    rule_set = predicted_rule_set([FITS[0], noisy_ring, FITS[2]], ["all-reduce"], 16, 1)
    assert "ring" not in {r.algo for r in rule_set.rules}
    with pytest.raises(ConfigError, match=r"no fitted model to predict 16 ranks from \(all-reduce ring: R\^2 0.20"):
        predicted_rule_set([noisy_ring], ["all-reduce"], 16, 1)


def test_a_world_size_without_nodes_picks_the_set_that_keeps_the_measured_ranks_a_node() -> None:
    """As `profile predict --ranks 8` makes 8 ranks on 2 nodes of a profile measured at 4 ranks on 1 node,
    `select(world_size=8)` (and the torch API, by its group's size) takes that set over 8 ranks on 1 node;
    the measured set of a size first, the fewest nodes where none keeps the ranks a node."""
    measured = RuleSet(4, 1, (Rule("all-reduce", 0, None, "ring"),))
    profile = Profile("fp", "h", "gloo", (measured,), fits=tuple(FITS))
    more = with_predictions(profile, [Shape(8, 1), Shape(8), Shape(16, 8), Shape(16, 16)])
    assert more.shapes == [(4, 1), (8, 1), (8, 2), (16, 8), (16, 16)]
    assert more.rule_set(8).shape == (8, 2)
    assert more.select("all-reduce", 1 << 20, world_size=8) in more.rule_set(8, 2).rules
    assert more.rule_set(16).shape == (16, 8)  # neither is 4 nodes: the fewest
    assert more.rule_set(4).shape == (4, 1)
    two = Profile("fp", "h", "gloo", (measured, RuleSet(8, 1, measured.rules)), fits=tuple(FITS))
    assert with_predictions(two, [Shape(8, 2)]).rule_set(8).shape == (8, 1)  # measured before predicted
