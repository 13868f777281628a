"""`tune --backend mpi` and its `export ompi-rules`, fed back to the real Open MPI.

The tune measures Open MPI's fixed decision and each coll/tuned algorithm forced in turn, and chooses
among them; the exported file must make Open MPI run exactly what the profile chose: the forced
algorithm inside each forced rule's range, Open MPI's own choice ("no rule needed") inside the others.
What ran is observed as tests/mpi/test_ompi_rules_mpi.py does (tests/mpi/ompi_observer.py): a preloaded
shim around the ``ompi_coll_base_*`` functions coll/tuned calls, and a program that runs MPI_Allreduce
at the sizes asked. The function each forced algorithm reaches is ompi_observer.FORCED's, written out
from Open MPI v4.1.4's ``ompi_coll_tuned_allreduce_intra_do_this``, independently of collbench's tables.

Which algorithms win on a shared machine is whatever the noise lets through (often none: every rule
"no rule needed"), so a second test hands the same path a profile of Open MPI's own algorithms with a
forced rule in every range and checks each one ran.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ompi_observer import FORCED as OPEN_MPI_RUNS
from ompi_observer import build_observer, need_open_mpi, observe
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule

pytestmark = pytest.mark.mpi
FORCED = {algo: function for (op, algo), function in OPEN_MPI_RUNS.items() if op == "all-reduce"}
"""Forced all-reduce algorithm -> the function Open MPI runs for it."""


def _ran(built: tuple[Path, Path], out: Path, sizes: list[int], rules: Path | None) -> dict[int, str]:
    """bytes -> the function coll/tuned ran for MPI_Allreduce on 2 ranks, agreed by both."""
    observed = observe(built, out, 2, (2,), [f"allreduce:{n}" for n in sizes], rules)
    return {nbytes: function for (_, _, nbytes), function in observed.items()}


def sizes_inside(rules: list[Rule]) -> list[int]:
    """Each rule's first and last byte (its last below 64 MiB for the unbounded one) and its evidence size."""
    out: set[int] = set()
    for rule in rules:
        top = rule.max_bytes if rule.max_bytes is not None else max(rule.min_bytes, 1) * 4
        out |= {max(rule.min_bytes, 1), min(top, 64 << 20)}
        if rule.at_bytes is not None and rule.covers(rule.at_bytes) and rule.at_bytes <= 64 << 20:
            out.add(rule.at_bytes)
    return sorted(out)


def check_open_mpi_runs(tmp_path: Path, profile_path: Path) -> tuple[int, int]:
    """Export the profile's rules, run Open MPI with and without them, and compare with the profile.

    Returns (forced rules, rules left to Open MPI) among the 2-rank all-reduce rules.
    """
    rules_file = tmp_path / "rules.txt"
    exported = CliRunner().invoke(app, ["export", "ompi-rules", str(profile_path), "-O", str(rules_file)])
    assert exported.exit_code == 0, exported.output
    rules = Profile.load(profile_path).rule_set(2).rules_for("all-reduce")
    sizes = sizes_inside(rules)
    built = build_observer(tmp_path)
    own = _ran(built, tmp_path / "own", sizes, None)
    ruled = _ran(built, tmp_path / "ruled", sizes, rules_file)
    for nbytes in sizes:
        rule = next(r for r in rules if r.covers(nbytes))
        expected = own[nbytes] if rule.algo == "native" else FORCED[rule.algo]
        assert ruled[nbytes] == expected, f"{nbytes} B: profile says {rule.algo}, Open MPI ran {ruled[nbytes]}"
    forced = sum(r.algo != "native" for r in rules)
    if forced < len(rules):
        assert "no rule needed" in exported.stderr
    return forced, len(rules) - forced


def test_tune_over_open_mpi_writes_rules_open_mpi_then_runs(tmp_path: Path) -> None:
    need_open_mpi()
    profile_path = tmp_path / "profile.yaml"
    args = ["tune", "--backend", "mpi", "--ranks", "2", "--quick", "--op", "all-reduce", "-e", "256K"]
    tuned = CliRunner().invoke(app, [*args, "-O", str(profile_path)])
    assert tuned.exit_code == 0, tuned.output
    profile = Profile.load(profile_path)
    assert profile.backend == "mpi"
    rules = profile.rule_set(2).rules_for("all-reduce")
    assert {r.algo for r in rules} <= {"native", *FORCED}, "only Open MPI's own algorithms are chosen"
    assert all(r.measured_us is not None for r in rules), "every rule is measured here"
    check_open_mpi_runs(tmp_path, profile_path)


def test_every_forced_winner_of_an_open_mpi_profile_is_what_open_mpi_runs(tmp_path: Path) -> None:
    need_open_mpi()
    names = list(FORCED)
    bounds = [0, 1000, 5000, 20000, 70000, 300000, 1 << 20]
    rules = [
        Rule("all-reduce", lo, bounds[i + 1] - 1 if i + 1 < len(bounds) else None, algo, {}, at_bytes=None)
        for i, (lo, algo) in enumerate(zip(bounds, ["native", *names], strict=True))
    ]
    profile = Profile(fingerprint="fp", host="h", backend="mpi", rule_sets=(RuleSet(2, 1, tuple(rules)),))
    forced, left = check_open_mpi_runs(tmp_path, profile.save(tmp_path / "profile.yaml"))
    assert (forced, left) == (6, 1)
