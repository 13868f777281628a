"""Predictions built from each algorithm's structure: monotone in size, scaling as the algorithm does,
and reproducing the published logs at their own shape."""

from __future__ import annotations

import functools
import itertools
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.errors import NotApplicableError
from collbench.importers.nccl_tests import read_nccl_tests
from collbench.models.costs import cost_terms
from collbench.models.fit import fit_results
from collbench.models.fitted import Fit, Segment
from collbench.models.predict import Shapes, predict, price_fits
from collbench.models.scaled import ScaledFit
from collbench.profile.document import Profile
from collbench.results.noise import decision_time_us
from collbench.schedules.ops import Op
from collbench.schedules.registry import algorithm_names, get_algorithm
from collbench.tuning.predicted_shapes import with_predictions
from collbench.tuning.shape_args import Shape

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "real"
REPO = Path(__file__).resolve().parents[2]


def line_fit(algo: str, world: int, alpha_us: float, beta_us_per_byte: float, op: str = "all-reduce") -> Fit:
    return Fit(op, algo, "gloo", world, alpha_us, beta_us_per_byte, None, 1.0, 1.0, 2.0, 8, 1 << 30)


@st.composite
def piecewise_fits(draw: st.DrawFn) -> Fit:
    """A fit of any registered algorithm (the new ops' ones as they land) with 1-4 segments of any
    latency, bandwidth and offset (continuous or not)."""
    # hierarchical has no one-class fit (fit skips it: its cost needs the nodes), so none to predict from.
    algo = draw(st.sampled_from([a for a in algorithm_names() if not get_algorithm(a).needs_nodes]))
    op = draw(st.sampled_from([o.value for o in Op]))
    world = draw(st.integers(2, 64))
    count = draw(st.integers(1, 4))
    edges = sorted(draw(st.lists(st.integers(3, 33), min_size=count * 2, max_size=count * 2, unique=True)))
    segments = []
    for i in range(count):
        segments.append(
            Segment(
                2 ** edges[2 * i],
                2 ** edges[2 * i + 1],
                draw(st.floats(0.0, 500.0)),
                draw(st.floats(0.0, 1e-2)),
                1.0,
                draw(st.floats(0.0, 5000.0)),
            )
        )
    gamma = draw(st.none() | st.floats(0.0, 1e-3))
    first = segments[0]
    return Fit(
        op, algo, "gloo", world, first.alpha_us, first.beta_us_per_byte, gamma, 1.0, 1.0, 2.0,
        segments[0].min_bytes, segments[-1].max_bytes, tuple(segments) if count > 1 else (),
    )  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(fit=piecewise_fits(), world=st.integers(2, 4096), sizes=st.lists(st.integers(1, 1 << 36), min_size=2))
def test_every_prediction_is_non_decreasing_in_size(fit: Fit, world: int, sizes: list[int]) -> None:
    if not get_algorithm(fit.algo).costs.has(Op.parse(fit.op)):
        # An algorithm that does not do the op has no formula for it: refused in one line, never priced.
        with pytest.raises(NotApplicableError, match=f"no cost formula for {fit.op}"):
            ScaledFit.of(fit)
        return
    scaled = ScaledFit.of(fit)
    times = [scaled.time_us(s, world) for s in sorted(sizes)]
    for a, b in itertools.pairwise(times):
        assert b >= a * (1 - 1e-12)


@settings(max_examples=30, deadline=None)
@given(
    alpha=st.floats(0.1, 1.0),
    bandwidth_gbps=st.floats(1.0, 10.0),
    measured=st.sampled_from([2, 4, 8, 16]),
)
def test_ring_all_reduce_busbw_holds_from_8_to_4096_ranks(alpha: float, bandwidth_gbps: float, measured: int) -> None:
    fit = line_fit("ring", measured, alpha, 1e-3 / bandwidth_gbps)
    gib = 1 << 30
    busbw = []
    for world in (8, 64, 512, 4096):
        report = predict([fit], world, [gib], simulate_max_ranks=0)
        (p,) = report.predictions
        assert p.busbw_gbps is not None  # all-reduce moves data: it has a bandwidth
        busbw.append(p.busbw_gbps)
        # The latency part is 2(p-1) steps of the per-step latency: linear in the world size.
        assert p.latency_us == pytest.approx(2 * (world - 1) * alpha)
    # The bandwidth-optimal property: 2(n-1)/n x S / B, whatever n.
    assert max(busbw) / min(busbw) <= 1.05
    assert max(busbw) <= bandwidth_gbps * (1 + 1e-9)


@pytest.mark.parametrize("algo", ["tree", "recursive-doubling"])
def test_tree_and_recursive_doubling_latency_grows_with_log_n(algo: str) -> None:
    fit = line_fit(algo, 4, 5.0, 1e-4)
    latency = {w: price_fits([fit], w, 1)[0][0].latency_us(1024.0) for w in (16, 256, 4096)}
    steps = {w: cost_terms("all-reduce", algo, w, 1.0).alpha for w in latency}
    for w in latency:
        assert latency[w] == pytest.approx(steps[w] * 5.0)
    # log2: 4, 8, 12 for recursive doubling; tree 2*depth: the same ratio.
    assert latency[256] - latency[16] == pytest.approx(latency[4096] - latency[256])
    assert latency[4096] < 4 * latency[16]


def test_a_star_pays_a_latency_per_message_at_scale() -> None:
    """One-shot posts p-1 messages on each port in its one step: measured at 2 ranks (one message), its
    latency at 64 ranks is 63 of them, not one."""
    fit = line_fit("one-shot", 2, 150.0, 1e-4)
    (entry,), _, _ = price_fits([fit], 64, 8)
    assert entry.latency_us(100.0) == pytest.approx(63 * 150.0)


def test_piecewise_latency_follows_the_steps_at_every_size() -> None:
    """An upper segment fitted with no latency of its own keeps the per-step latency at scale: the
    issue's 1 MiB at 1,024 ranks was priced below what 16 ranks measured."""
    segs = (Segment(8, 32768, 4.0, 1e-3 / 2.0, 1.0), Segment(65536, 1 << 30, 0.0, 1e-3 / 300.0, 1.0, 160.0))
    fit = Fit("all-reduce", "ring", "nccl", 16, 4.0, 1e-3 / 2.0, None, 1.0, 1.0, 2.0, 8, 1 << 30, segs)
    scaled = ScaledFit.of(fit)
    for size in (32768, 65536, 1 << 20):
        assert scaled.parts(size, 1024).latency_us == pytest.approx(2 * 1023 * 4.0)
        assert scaled.time_us(size, 1024) > scaled.time_us(size, 16)


def _log_rows(name: str):  # type: ignore[no-untyped-def]
    return [r for r in read_nccl_tests(REAL / name) if r.wrong == 0]


MEASURED_LOGS = [
    "all_reduce_perf-h100-2node-mpirun-gcp.log",
    "all_reduce_perf-dgx-a100-2node-k8s-legacy.log",
    "all_reduce_perf-p5-2node-srun-label-readme-excerpt.log",
    "all_reduce_perf-gb200-72rank-one-rank-line.log",
    "all_reduce_perf-2080ti-x2-autodl.log",
]


@pytest.mark.parametrize("name", MEASURED_LOGS)
def test_predicting_a_logs_own_shape_reproduces_it(name: str) -> None:
    rows = _log_rows(name)
    (fit,) = fit_results(rows).fits
    if fit.distrust():
        pytest.skip(f"{name}: its fit is not usable ({fit.distrust()})")
    world = rows[0].world_size
    best: dict[int, float] = {}
    for r in rows:
        best[r.size_bytes] = min(best.get(r.size_bytes, math.inf), decision_time_us(r))
    sizes = sorted(best)
    report = predict([fit], world, sizes, nodes=1, measured_nodes={world: 1}, nccl_arch="hopper")
    for p in report.predictions:
        error = 100 * abs(p.time_us - best[p.size_bytes]) / best[p.size_bytes]
        assert error <= fit.max_abs_pct_error + 1e-6, (p.size_bytes, error, fit.max_abs_pct_error)
        assert p.error_pct is not None and p.scale == 1


def test_the_issues_h100_example_rises_with_size_and_stays_above_the_measurement() -> None:
    rows = _log_rows("all_reduce_perf-h100-2node-mpirun-gcp.log")
    (fit,) = fit_results(rows).fits
    report = predict([fit], 1024, [32 << 10, 64 << 10, 1 << 20], nodes=128, measured_nodes={16: 2})
    times = [p.time_us for p in report.predictions]
    assert times == sorted(times)
    measured_1m = min(decision_time_us(r) for r in rows if r.size_bytes == 1 << 20)
    assert times[-1] > measured_1m
    assert all(p.scale == 64 and p.error_pct is None and "NCCL's model" in p.basis for p in report.predictions)
    assert "x64 the measured world size" in report.predictions[0].certainty


def test_native_is_refused_where_its_algorithm_is_unknown() -> None:
    native = line_fit("native", 2, 80.0, 1e-3)
    ring = line_fit("ring", 2, 100.0, 1e-3)
    report = predict([native, ring], 64, [1024], measured_nodes={2: 1})
    assert [p.algo for p in report.predictions] == ["ring"]
    assert len(report.refused) == 1 and "native: gloo picks its own algorithm" in report.refused[0]
    at_home = predict([native, ring], 2, [1024], measured_nodes={2: 1})
    assert {p.algo for p in at_home.predictions} == {"native", "ring"}


def test_crossing_node_counts_says_what_it_assumes() -> None:
    ring = line_fit("ring", 8, 5.0, 1e-4)
    one_node = predict([ring], 64, [1024], nodes=8, measured_nodes={8: 1})
    assert any("no inter-node parameters" in n for n in one_node.notes)
    same = predict([ring], 64, [1024], nodes=1, measured_nodes={8: 1})
    assert same.notes == []
    from_several = predict([line_fit("ring", 16, 5.0, 1e-4)], 64, [1024], nodes=8, measured_nodes={16: 2})
    assert any("inter-node parameters from its measurement on 2 nodes" in n for n in from_several.notes)


def test_profile_predict_no_longer_picks_one_shot_against_a_ring_priced_native() -> None:
    """The example 2-rank gloo profile predicted at 64 ranks on 8 nodes: native (gloo's own choice) is
    not priced as a ring of 126 steps any more, and one-shot pays its 63 messages."""
    profile = Profile.load(REPO / "profiles" / "cpu-2core-gloo-2ranks.yaml")
    usable = [f for f in profile.fits if not f.distrust()]
    if not any(f.algo == "one-shot" for f in usable):
        pytest.skip("the example profile's one-shot fit is not usable")
    added = with_predictions(profile, [Shape(64, 8)])
    predicted = added.rule_sets[-1]
    assert predicted.predicted and predicted.shape == (64, 8)
    assert all(rule.gain_vs_native is None for rule in predicted.rules)
    assert "one-shot" not in {rule.algo for rule in predicted.rules}


def test_shapes_guess_nodes_only_where_not_told() -> None:
    fit = line_fit("ring", 16, 1.0, 1e-4)
    assert Shapes().assumed_nodes(fit) == 2
    assert Shapes({16: 1}).assumed_nodes(fit) == 1


@settings(max_examples=8, deadline=None)
@given(
    per_node=st.sampled_from([1, 2, 4, 8]),
    nodes=st.integers(1, 512),
    sizes=st.lists(st.integers(1, 1 << 36), min_size=2, max_size=12),
)
def test_nccl_native_predictions_never_fall_with_size(per_node: int, nodes: int, sizes: list[int]) -> None:
    """native from the H100 2-node log, at any shape up to 4,096 ranks: NCCL's structure (or, at the
    measured shape, the fit joined to it) is non-decreasing in size."""
    world = per_node * nodes
    if world < 2:
        return
    priced, refused, _ = price_fits([_h100_fit()], world, nodes, shapes=Shapes({16: 2}))
    if nodes == 1:
        # A fit measured across 2 nodes, of a GPU not named, says nothing of one node's links: refused,
        # saying why (hypothesis drew 2 ranks on 1 node: the test unpacked an empty list).
        assert not priced and "the links within one node were not measured" in refused[0]
        return
    (entry,) = priced
    times = [entry.time_us(float(s)) for s in sorted(sizes)]
    assert all(b >= a for a, b in itertools.pairwise(times))


@functools.cache
def _h100_fit() -> Fit:
    return fit_results(_log_rows("all_reduce_perf-h100-2node-mpirun-gcp.log")).fits[0]


def test_one_message_a_port_is_said_in_the_singular() -> None:
    # One-shot at 2 ranks posts one message a port: the basis said "1 step, 1 messages a port".
    from collbench.models.priced import structure_text
    from collbench.models.scaled import ScaledFit

    one_shot = Fit("all-reduce", "one-shot", "gloo", 2, 100.0, 1e-3, None, 0.99, 1.0, 2.0, 1024, 1 << 20, points=6)
    assert "1 step, 1 message a port at x2" in structure_text(one_shot, ScaledFit.of(one_shot), 2)
    assert "7 messages a port at x8" in structure_text(one_shot, ScaledFit.of(one_shot), 8)
