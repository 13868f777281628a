"""`profile predict --no-nvls` and `tune --predict-ranks ... --no-nvls` (issue 32): `predict --no-nvls` says
the runs set NCCL_NVLS_ENABLE=0 (CoreWeave's GB200 jobs do: benchmarks/bench_predict.py's NO_NVLS), so
NCCL's search makes no NVLS graph and its model runs ring and tree where it would run NVLS (tuning.cc
prices NVLS and NVLS-tree from that graph), for the measured shape and the asked one. The predicted rule
sets of a profile mean the same with the option as `predict` does with it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.importers.nccl_tests import read_nccl_tests
from collbench.models.fit import fit_results
from collbench.models.nccl_graph import NodeFacts
from collbench.models.predict import predict
from collbench.profile.document import Profile
from collbench.profile.rules import Rule
from collbench.tuning.build_profile import build_profile
from collbench.tuning.config import TuneConfig
from collbench.tuning.predicted_shapes import with_predictions
from collbench.tuning.shape_args import Shape

REAL_H100 = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "all_reduce_perf-h100-2node-mpirun-gcp.log"
GLOO_PROFILE = Path(__file__).resolve().parents[1] / "fixtures" / "profiles" / "cpu-2core-gloo-4ranks.yaml"

RING_BUS_GBPS = 415.0
"""The ring fit's bus bandwidth: between NCCL's model of 8 H100s of this log with NVLS (473 GB/s busbw at
1 GiB) and without it (its ring, 359), so which of the two runs decides which algorithm a rule picks."""


def _profile(tmp_path: Path) -> Path:
    """A profile of 16 H100s over NCCL (the GCP log's rows, 2 nodes) holding NCCL's native fit and a ring fit
    (collbench's own ring, as a tune over NCCL keeps one) whose bus bandwidth is ``RING_BUS_GBPS``."""
    rows = read_nccl_tests(REAL_H100)
    (native,) = fit_results(rows).fits
    # The GPU the rank lines name, as `collbench fit` records it (its NVLinks and NVSwitch: NCCL's NVLS).
    native = dataclasses.replace(native, device=rows[0].device_name)
    assert native.backend == "nccl" and {r.nodes for r in rows} == {2} and not native.distrust()
    ring = dataclasses.replace(native, algo="ring", alpha_us=10.0, beta_us_per_byte=1e-3 / RING_BUS_GBPS, segments=())
    rules = [Rule("all-reduce", 0, None, "native", {})]
    profile = build_profile(
        TuneConfig(command="collbench tune"), rows, [native, ring], rules, topology=None, layout=None
    )
    return profile.save(tmp_path / "h100.yaml")


def _last_rule(path: Path) -> Rule:
    predicted = next(s for s in Profile.load(path).rule_sets if s.predicted)
    assert predicted.shape == (8, 1)
    return predicted.rules[-1]


def test_profile_predict_no_nvls_prices_the_ring_where_nccl_would_run_nvls(tmp_path: Path) -> None:
    source = _profile(tmp_path)
    runner = CliRunner()
    on, off = tmp_path / "on.yaml", tmp_path / "off.yaml"
    assert runner.invoke(app, ["profile", "predict", str(source), "--ranks", "8:1", "-O", str(on)]).exit_code == 0
    done = runner.invoke(app, ["profile", "predict", str(source), "--ranks", "8:1", "-O", str(off), "--no-nvls"])
    assert done.exit_code == 0, done.output
    # One node of 8 H100s: NCCL's NVLS beats the ring fit at every size; told NVLS is off, NCCL's ring does
    # not, and collbench's ring is the rule from some size on.
    assert _last_rule(on).algo.name == "native"
    last = _last_rule(off)
    assert last.algo.name == "ring" and last.min_bytes > 0
    # The same native as `predict --no-nvls` gives at that size (one model behind both commands).
    fits = list(Profile.load(source).fits)
    asked = predict(fits, 8, [last.at_bytes], nodes=1, measured_nodes={16: 2}, nccl_facts=NodeFacts(nvls=False))
    (native,) = [p for p in asked.predictions if p.algo == "native"]
    assert "picks ring/" in native.basis or "picks tree/" in native.basis
    assert last.gain_vs_native == pytest.approx(native.time_us / last.predicted_us, rel=1e-9)
    # The function behind `tune --predict-ranks` gives the same rule set.
    profile = Profile.load(source)
    by_tune = with_predictions(profile, [Shape(8, 1)], facts=NodeFacts(nvls=False))
    assert by_tune.rule_sets[-1].rules == next(s for s in Profile.load(off).rule_sets if s.predicted).rules


def test_no_nvls_of_what_nccl_did_not_run_is_one_error_line(tmp_path: Path) -> None:
    # A gloo profile: NCCL's model is not behind any of its fits, so the option would change nothing.
    out = tmp_path / "p.yaml"
    done = CliRunner().invoke(
        app, ["profile", "predict", str(GLOO_PROFILE), "--ranks", "8", "-O", str(out), "--no-nvls"]
    )
    assert done.exit_code == 2 and "Traceback" not in done.output
    assert "error: --no-nvls describes NCCL's own choice, and this profile's fits are gloo's" in done.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--quick"], {}, "--no-nvls tells the predictions of --predict-ranks how NCCL runs"),
        (["--quick", "--predict-ranks", "8"], {}, "this tune's environment does not: export NCCL_NVLS_ENABLE=0"),
        (["--quick", "--predict-ranks", "8"], {"NCCL_NVLS_ENABLE": "1"}, "this tune's environment does not"),
        (
            ["--quick", "--backend", "gloo", "--predict-ranks", "8"],
            {"NCCL_NVLS_ENABLE": "0"},
            "this tune measures gloo's",
        ),
        (["--check", "p.yaml"], {}, "leave out -O, --no-nvls (it takes --ranks"),
    ],
)
def test_tune_no_nvls_refusals_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str], says: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    done = CliRunner().invoke(app, ["tune", *args, "--no-nvls", "-O", str(tmp_path / "t.yaml")])
    assert done.exit_code == 2, done.output
    assert says in done.output and "Traceback" not in done.output
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("predicting", "no_nvls", "backends", "environ", "off"),
    [
        (True, False, ["nccl"], {"NCCL_NVLS_ENABLE": "0"}, True),
        (True, False, ["nccl"], {"NCCL_NVLS_ENABLE": " 0 "}, True),
        (True, False, ["nccl"], {"NCCL_NVLS_ENABLE": "1"}, False),
        (True, False, ["nccl"], {}, False),
        (True, False, ["gloo"], {"NCCL_NVLS_ENABLE": "0"}, False),  # nothing of NCCL's model to tell
        (False, False, ["nccl"], {"NCCL_NVLS_ENABLE": "0"}, False),  # no shapes to predict
        (True, True, ["nccl"], {"NCCL_NVLS_ENABLE": "0"}, False),  # --no-nvls given says it already
    ],
)
def test_a_tune_run_with_nvls_off_predicts_with_it_off(
    predicting: bool, no_nvls: bool, backends: list[str], environ: dict[str, str], off: bool
) -> None:
    # A tune over NCCL whose environment sets NCCL_NVLS_ENABLE=0 measures with NVLS off (its runs inherit
    # the environment; NCCL's docs: NCCL_NVLS_ENABLE); its predicted shapes must be priced the same way.
    from collbench.cli.tune import nvls_off_in_environment

    assert nvls_off_in_environment(predicting, no_nvls, backends, environ) is off
