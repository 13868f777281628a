"""Predictions of the new ops: each algorithm priced from its own structure at the asked world size,
barrier as one time with no bandwidth, NCCL's native of an op it does not tune as grouped send/recv
(never as tuning.cc's ring or tree), and a fit without a formula refused in one line."""

from __future__ import annotations

import dataclasses
import math

import pytest
from new_op_rows import DATA_OPS, barrier_rows, data_op_rows, priced_pairs, unpriced_pair

from collbench.errors import ConfigError, NotApplicableError
from collbench.models.costs import cost_terms
from collbench.models.fit import fit_results
from collbench.models.fitted import Fit
from collbench.models.native_structure import NATIVE_STRUCTURES, NativeStructure, formula_disagreement
from collbench.models.nccl_calibrate import calibrate
from collbench.models.nccl_cost import nccl_choice
from collbench.models.nccl_machine import NcclMachine
from collbench.models.predict import predict
from collbench.schedules.ops import NCCL_TUNED_OPS, Op
from collbench.schedules.registry import algorithm_names

UNTUNED = [op for op in Op if op not in NCCL_TUNED_OPS]
A2A_ALGOS = priced_pairs(Op.ALL_TO_ALL)
BARRIER_ALGOS = priced_pairs(Op.BARRIER)


def line_fit(op: Op, algo: str, world: int, alpha_us: float, beta_us_per_byte: float, backend: str = "gloo") -> Fit:
    return Fit(op.value, algo, backend, world, alpha_us, beta_us_per_byte, None, 1.0, 1.0, 2.0, 1024, 1 << 28)


@pytest.mark.parametrize("op", UNTUNED)
def test_nccls_own_model_refuses_the_ops_nccl_does_not_tune(op: Op) -> None:
    machine = NcclMachine(bus_bw_gbps=100.0)
    runs = f"NCCL runs {op.value} as grouped send/recv" if op.spec.payload else "NCCL has no barrier"
    with pytest.raises(NotApplicableError, match=runs):
        nccl_choice(machine, op, 16, 2, 1 << 20)
    with pytest.raises(NotApplicableError, match="prices only the collectives it tunes"):
        calibrate(machine, op, 8, 1, [1024.0, 1 << 20], [20.0, 100.0])


def test_a_stored_fit_whose_algorithm_has_no_formula_for_its_op_is_refused_in_one_line() -> None:
    pair = unpriced_pair()
    if pair is None:
        pytest.skip("every algorithm has a formula for every op")
    op, algo = pair
    orphan = line_fit(op, algo, 4, 10.0, 1e-4)
    with pytest.raises(ConfigError, match=f"{op.value} {algo}: no cost formula for {op.value}"):
        predict([orphan], 64, [1 << 20])
    ring = line_fit(Op.ALL_REDUCE, "ring", 4, 10.0, 1e-4)
    report = predict([orphan, ring], 64, [1 << 20])
    assert [p.algo for p in report.predictions] == ["ring"]
    assert any(line.startswith(f"{op.value} {algo}: no cost formula") for line in report.refused)


@pytest.mark.parametrize("algo", BARRIER_ALGOS)
def test_barrier_is_one_time_per_algorithm_at_any_world_size_with_no_bandwidth(algo: str) -> None:
    (fit,) = fit_results(barrier_rows(algo, 4, 30.0)).fits
    per_round = 30.0 / cost_terms("barrier", algo, 4, 0.0).alpha
    at_shape = predict([fit], 4, [1024, 1 << 20], measured_nodes={4: 1})
    (here,) = at_shape.predictions
    assert (here.size_bytes, here.busbw_gbps, here.error_pct) == (0, None, None)
    assert here.time_us == pytest.approx(30.0)
    assert "one measured point" in here.basis
    assert here.to_dict()["busbw_gbps"] is None
    report = predict([fit], 64, [1024, 1 << 20])
    (there,) = report.predictions
    messages = cost_terms("barrier", algo, 64, 0.0).message_count
    assert there.time_us == pytest.approx(per_round * messages)
    assert there.latency_us == pytest.approx(there.time_us)
    assert there.busbw_gbps is None and there.error_pct is None
    assert report.choice == [
        {"op": "barrier", "backend": "gloo", "size_bytes": 0, "algo": algo, "time_us": there.time_us}
    ]
    assert report.crossovers == []


@pytest.mark.skipif("dissemination" not in algorithm_names(), reason="no dissemination barrier registered yet")
def test_a_dissemination_barrier_takes_ceil_log2_n_rounds_at_any_world_size() -> None:
    fit = Fit("barrier", "dissemination", "gloo", 4, 10.0, 0.0, None, 1.0, 0.0, 0.0, 0, 0, points=1)
    for world, rounds in ((5, 3), (64, 6), (1000, 10)):
        (p,) = predict([fit], world, [0]).predictions
        assert p.time_us == pytest.approx(10.0 * rounds)
        assert f"{rounds} rounds at x{world}" in p.basis


STRUCTURE = {
    # algorithm: (steps at 64 ranks, messages through the busiest port at 64 ranks)
    "pairwise": (63, 63),
    "bruck": (6, 6),
    "linear": (1, 63),
}


@pytest.mark.parametrize("algo", sorted(STRUCTURE))
def test_all_to_all_latency_at_64_ranks_follows_its_structure(algo: str) -> None:
    if algo not in A2A_ALGOS:
        pytest.skip(f"no {algo} all-to-all registered yet")
    steps, messages = STRUCTURE[algo]
    terms = cost_terms("all-to-all", algo, 64, 1.0)
    assert (terms.alpha, terms.message_count) == (steps, messages)
    # Measured at 2 ranks every one of them is one message of one step: 20 us.
    fit = line_fit(Op.ALL_TO_ALL, algo, 2, 20.0, 1e-3 / 5.0)
    (p,) = predict([fit], 64, [1024], simulate_max_ranks=0).predictions
    assert p.latency_us == pytest.approx(20.0 * messages)
    assert p.basis.startswith("its own structure: ")
    assert p.busbw_gbps is not None and p.busbw_gbps > 0


NCCL_GROUPED = [op for op in DATA_OPS if ("nccl", op) in NATIVE_STRUCTURES and "native" in priced_pairs(op)]


@pytest.mark.parametrize("op", NCCL_GROUPED)
def test_nccls_native_of_an_untuned_op_is_priced_as_grouped_send_recv_and_says_so(op: Op) -> None:
    fit = line_fit(op, "native", 8, 12.0, 1e-3 / 40.0, backend="nccl")
    report = predict([fit], 64, [1 << 10, 1 << 20], nodes=8, measured_nodes={8: 1})
    assert len(report.predictions) == 2, report.refused
    for p in report.predictions:
        assert "grouped" in p.basis and "does not price it" in p.basis and "tuning.cc" in p.basis
        assert "NCCL's model (" not in p.basis and "an assumption" in p.basis
        assert p.error_pct is None  # another world size: nothing measured near
        assert math.isfinite(p.time_us) and p.time_us > 0
    small, large = report.predictions
    assert large.time_us > small.time_us
    messages = NATIVE_STRUCTURES[("nccl", op)].messages(64)
    assert small.latency_us == pytest.approx(12.0 * messages / NATIVE_STRUCTURES[("nccl", op)].messages(8))


@pytest.mark.parametrize(("backend", "op"), sorted(NATIVE_STRUCTURES, key=str))
def test_natives_formulas_have_the_structure_the_backends_source_gives(backend: str, op: Op) -> None:
    """gloo's all-to-all and barrier, NCCL's grouped send/recv: native's formula must count the
    messages their source posts, or native is not predicted at other shapes."""
    if "native" not in priced_pairs(op):
        pytest.skip(f"no native formula for {op.value} yet")
    assert formula_disagreement(backend, op.value) == ""


@pytest.mark.skipif("native" not in BARRIER_ALGOS, reason="no native barrier formula yet")
def test_a_native_whose_formula_disagrees_with_its_backend_is_refused_at_other_shapes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(NATIVE_STRUCTURES, ("gloo", Op.BARRIER), NativeStructure("a star barrier", lambda p: p - 1))
    (fit,) = fit_results(barrier_rows("native", 4, 30.0)).fits
    assert predict([fit], 4, [0]).predictions[0].time_us == pytest.approx(30.0)
    with pytest.raises(ConfigError, match=r"barrier native: native's formula counts .* where a star barrier takes"):
        predict([fit], 64, [0])


def test_nccls_barrier_is_priced_as_nccls_all_reduce_of_one_byte() -> None:
    """torch's NCCL barrier is an all-reduce of one byte: NCCL's model of it, scaled to the measured time."""
    fit = Fit("barrier", "native", "nccl", 8, 40.0, 0.0, None, 1.0, 0.0, 0.0, 0, 0, points=1)
    if "native" not in BARRIER_ALGOS:
        with pytest.raises(ConfigError, match="no cost formula for barrier"):
            predict([fit], 64, [0], measured_nodes={8: 1})
        return
    measured = fit.predict_us(0)
    machine = NcclMachine(bus_bw_gbps=1.0)
    here = nccl_choice(machine, Op.ALL_REDUCE, 8, 1, 1.0, smooth=True).latency_us
    # Measured on one node, the scale is that node's latencies' (tuning.cc's base and intraLat); across 8
    # nodes the network's (interLat) stay NCCL's own (tests/unit/test_nccl_link_class_latency.py).
    split = dataclasses.replace(machine, latency_scale=measured / here, net_latency_scale=1.0)
    there = nccl_choice(split, Op.ALL_REDUCE, 64, 8, 1.0, smooth=True).latency_us
    report = predict([fit], 64, [1 << 20], nodes=8, measured_nodes={8: 1})
    (p,) = report.predictions
    assert (p.size_bytes, p.busbw_gbps, p.error_pct) == (0, None, None)
    assert p.time_us == pytest.approx(there)
    assert p.time_us != pytest.approx(
        measured * nccl_choice(machine, Op.ALL_REDUCE, 64, 8, 1.0, smooth=True).latency_us / here
    )
    assert p.time_us > measured  # more ranks, and a network between the nodes
    assert "all-reduce of one byte" in p.basis and "ProcessGroupNCCL::barrier" in p.basis
    assert "network latencies NCCL's own (unmeasured)" in p.basis
    (same,) = predict([fit], 8, [0], nodes=1, measured_nodes={8: 1}).predictions
    assert same.time_us == pytest.approx(measured)


@pytest.mark.parametrize(("op", "algo"), [(op, algo) for op in DATA_OPS for algo in priced_pairs(op)])
def test_a_data_op_fit_predicts_its_own_rows_at_the_measured_shape(op: Op, algo: str) -> None:
    rows = data_op_rows(op, algo, 4, 15.0, 1e-3 / 4.0, seed=2, noise=0.0)
    (fit,) = fit_results(rows).fits
    sizes = sorted({r.size_bytes for r in rows})[::4]
    report = predict([fit], 4, sizes, simulate_max_ranks=0)
    for p in report.predictions:
        measured = next(r.time_us for r in rows if r.size_bytes == p.size_bytes)
        assert p.time_us == pytest.approx(measured, rel=0.02)
        assert p.error_pct is not None and p.error_pct < 2.0
        factor = op.spec.busbw_factor(4)
        assert p.busbw_gbps == pytest.approx(p.size_bytes / p.time_us / 1e3 * factor)


def test_a_latency_fitted_from_points_that_are_mostly_bandwidth_is_said_to_be_barely_measured() -> None:
    """A log of 8 GiB and 16 GiB only (as published all-to-all logs often are) fits a latency that
    its points hardly show: a prediction at another world size built on it says so."""
    fit = Fit("all-reduce", "ring", "nccl", 8, 40.0, 1e-3 / 300.0, None, 1.0, 0.0, 0.0, 8 << 30, 16 << 30)
    (p,) = predict([fit], 64, [1024], nodes=8, measured_nodes={8: 1}).predictions
    assert "its latency is barely measured (at its smallest size, 8 GiB, latency is 1% of the fitted time)" in p.basis
    measured_small = dataclasses.replace(fit, min_bytes=1024)
    (q,) = predict([measured_small], 64, [1024], nodes=8, measured_nodes={8: 1}).predictions
    assert "barely measured" not in q.basis
