"""`collbench tune --check PROFILE` re-measures on the profile's own backend, among what it chose from there.

A profile of ``tune --backend mpi`` holds Open MPI's own algorithms (``native``, ``native:<name>``): its
check runs them under mpirun (runtime/mpi/), never collbench's schedules over gloo, whose regrets would
say nothing of the rules. A ``--backend`` other than the profile's is refused in one line.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
from synthetic_rows import point_row
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.errors import ConfigError
from collbench.ompi.algorithms import OPEN_MPI_4_1
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule
from collbench.results.row import ResultRow
from collbench.runtime.mpi import plan as mpi_plan
from collbench.runtime.sweep import run as sweep_run
from collbench.runtime.sweep.plan import SweepConfig
from collbench.schedules.ops import Op
from collbench.tuning import check
from collbench.tuning.check import check_backend, check_candidates

MPI_RULES = (
    Rule("all-reduce", 0, 4095, "native", at_bytes=1024),
    Rule("all-reduce", 4096, None, "native:recursive_doubling", at_bytes=65536),
)


def _mpi_profile() -> Profile:
    return Profile(fingerprint="f", host="h", backend="mpi", rule_sets=(RuleSet(2, 1, MPI_RULES),))


def _fake_sweep(seen: list[SweepConfig]):  # type: ignore[no-untyped-def]
    """A sweep that records what it was asked and measures every asked algorithm at the asked size."""

    def run_sweep(config: SweepConfig, progress: object = None) -> list[ResultRow]:
        seen.append(config)
        times = {"native": 10.0, "native:recursive_doubling": 9.0}
        return [
            dataclasses.replace(
                point_row(algo, config.min_bytes, times.get(algo, 20.0), iters=100, spread=0.01), backend="mpi"
            )
            for algo in config.algos
        ]

    return run_sweep


def test_an_mpi_profile_is_re_measured_on_mpi_among_open_mpis_own_algorithms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: the sweep was asked for backend "auto" (gloo here) and collbench's ring, tree, ... .
    seen: list[SweepConfig] = []
    monkeypatch.setattr(mpi_plan, "installed_algorithms", lambda: OPEN_MPI_4_1)
    monkeypatch.setattr(sweep_run, "run_sweep", _fake_sweep(seen))
    checks = check.run_check(_mpi_profile(), world_size=2, rounds=2, stream_dir=tmp_path)
    assert seen and {c.backend for c in seen} == {"mpi"}
    forced = {f"native:{a.name}" for a in OPEN_MPI_4_1[Op.ALL_REDUCE.spec.mpi_name]}
    for config in seen:
        assert set(config.algos) == {"native", *forced}, config.algos
    assert [c.rule.algo for c in checks] == ["native", "native:recursive_doubling"]
    assert all(c.regret is not None for c in checks)
    assert checks[1].best_algo == "native:recursive_doubling" and checks[1].regret == pytest.approx(1.0)


def test_check_backend_is_the_profiles_own_and_another_one_is_refused() -> None:
    assert check_backend(_mpi_profile(), "auto") == "mpi"
    assert check_backend(_mpi_profile(), "MPI") == "mpi"
    gloo = dataclasses.replace(_mpi_profile(), backend="gloo")
    assert check_backend(gloo, "auto") == "gloo"
    with pytest.raises(ConfigError, match=r"chosen over mpi; --check re-measures them there: use --backend mpi"):
        check_backend(_mpi_profile(), "gloo")
    with pytest.raises(ConfigError, match=r"chosen over gloo; .* use --backend gloo"):
        check_backend(gloo, "nccl")


def test_gloo_candidates_are_collbenchs_algorithms_and_native() -> None:
    names = check_candidates("gloo", "all-reduce", RuleSet(2, 1, MPI_RULES))
    assert "ring" in names and "native" in names
    assert not any(n.startswith("native:") for n in names)


def test_nccl_candidates_add_nccls_own_variants(monkeypatch: pytest.MonkeyPatch) -> None:
    from collbench.runtime.host import environment

    monkeypatch.setattr(environment, "nccl_version", lambda: "2.21.5")
    names = check_candidates("nccl", "all-reduce", RuleSet(2, 1, MPI_RULES))
    assert "ring" in names and "native" in names
    assert any(n.startswith("native:") for n in names), names


def test_cli_refuses_checking_an_mpi_profile_over_gloo(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    _mpi_profile().save(path)
    result = CliRunner().invoke(app, ["tune", "--check", str(path), "--backend", "gloo"])
    assert result.exit_code == 2, result.output
    assert "chosen over mpi" in result.output and "Traceback" not in result.output


@pytest.mark.mpi
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs Open MPI's mpirun")
def test_cli_checks_an_mpi_profile_under_mpirun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Real Open MPI ranks, made small: one round of 10 ms per point. Before: refused with --backend mpi
    # ("ring is collbench's own"), and without it measured over gloo.
    monkeypatch.setattr(check, "CHECK_ROUNDS", 1)
    monkeypatch.setattr(check, "CHECK_BUDGET_S", 0.01)
    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "m.yaml"
    _mpi_profile().save(path)
    for args in ([], ["--backend", "mpi"]):
        result = CliRunner().invoke(app, ["tune", "--check", str(path), *args])
        assert result.exit_code == 0, result.output
        assert "native:recursive_doubling" in result.output
        assert "geometric-mean regret" in result.output
        for collbench_own in (" ring ", " tree ", "recursive-halving"):
            assert collbench_own not in result.output, result.output
