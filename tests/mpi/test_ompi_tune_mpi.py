"""`tune --backend mpi` and its `export ompi-rules`, fed back to the real Open MPI.

The tune measures Open MPI's fixed decision and each coll/tuned algorithm forced in turn, and chooses
among them; the exported file must make Open MPI run exactly what the profile chose: the forced
algorithm inside each forced rule's range, Open MPI's own choice ("no rule needed") inside the others.
What ran is observed as tests/mpi/test_ompi_rules_mpi.py does: a preloaded shim (ompi_observe_shim.c)
around the ``ompi_coll_base_*`` functions coll/tuned calls, and a program (ompi_collectives.c) that runs
MPI_Allreduce at the sizes asked. The function each forced algorithm reaches is written out here from
Open MPI v4.1.4's ``ompi_coll_tuned_allreduce_intra_do_this``, independently of collbench's tables.

Which algorithms win on a shared machine is whatever the noise lets through (often none: every rule
"no rule needed"), so a second test hands the same path a profile of Open MPI's own algorithms with a
forced rule in every range and checks each one ran.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.profile.document import Profile, RuleSet
from collbench.profile.rules import Rule

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.mpi
B = "ompi_coll_base_allreduce_intra_"
FORCED = {
    "native:basic_linear": B + "basic_linear",
    "native:nonoverlapping": B + "nonoverlapping",
    "native:recursive_doubling": B + "recursivedoubling",
    "native:ring": B + "ring",
    "native:segmented_ring": B + "ring_segmented",
    "native:rabenseifner": B + "redscat_allgather",
}


def _need_open_mpi() -> None:
    if not (shutil.which("mpirun") and shutil.which("mpicc") and shutil.which("ompi_info")):
        pytest.skip("Open MPI is not installed (openmpi-bin, libopenmpi-dev; .ci/run installs them)")
    version = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, timeout=60).stdout
    if "4.1." not in version:
        pytest.skip(f"the expected functions are Open MPI 4.1's; this is {version.splitlines()[0] if version else '?'}")


def _build(tmp_path: Path) -> tuple[Path, Path]:
    shim, program = tmp_path / "shim.so", tmp_path / "collectives"
    cc = os.environ.get("CC", "cc")
    subprocess.run(
        [cc, "-O1", "-shared", "-fPIC", "-o", shim, HERE / "ompi_observe_shim.c", "-ldl"], check=True, timeout=120
    )
    subprocess.run(["mpicc", "-O1", "-o", program, HERE / "ompi_collectives.c", "-ldl"], check=True, timeout=120)
    return shim, program


def observe(built: tuple[Path, Path], out: Path, sizes: list[int], rules: Path | None) -> dict[int, str]:
    """bytes -> the function coll/tuned ran for MPI_Allreduce on 2 ranks, agreed by both."""
    shim, program = built
    out.mkdir()
    mca = ["--mca", "coll_tuned_use_dynamic_rules", "1"]
    if rules is not None:
        mca += ["--mca", "coll_tuned_dynamic_rules_filename", str(rules)]
    command = [
        "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "--mca", "mpi_yield_when_idle", "1",
        *mca, "-x", f"LD_PRELOAD={shim}", str(program), str(out), "2", *(f"allreduce:{n}" for n in sizes),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    seen: dict[int, set[str]] = {}
    for rank in range(2):
        for line in (out / f"rank{rank}.txt").read_text().splitlines():
            _, _, nbytes, function = line.split()
            seen.setdefault(int(nbytes), set()).add(function)
    assert all(len(f) == 1 for f in seen.values()), seen
    return {n: next(iter(f)) for n, f in seen.items()}


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
    built = _build(tmp_path)
    own = observe(built, tmp_path / "own", sizes, None)
    ruled = observe(built, tmp_path / "ruled", sizes, rules_file)
    for nbytes in sizes:
        rule = next(r for r in rules if r.covers(nbytes))
        expected = own[nbytes] if rule.algo == "native" else FORCED[rule.algo]
        assert ruled[nbytes] == expected, f"{nbytes} B: profile says {rule.algo}, Open MPI ran {ruled[nbytes]}"
    forced = sum(r.algo != "native" for r in rules)
    if forced < len(rules):
        assert "no rule needed" in exported.stderr
    return forced, len(rules) - forced


def test_tune_over_open_mpi_writes_rules_open_mpi_then_runs(tmp_path: Path) -> None:
    _need_open_mpi()
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
    _need_open_mpi()
    names = list(FORCED)
    bounds = [0, 1000, 5000, 20000, 70000, 300000, 1 << 20]
    rules = [
        Rule("all-reduce", lo, bounds[i + 1] - 1 if i + 1 < len(bounds) else None, algo, {}, at_bytes=None)
        for i, (lo, algo) in enumerate(zip(bounds, ["native", *names], strict=True))
    ]
    profile = Profile(fingerprint="fp", host="h", backend="mpi", rule_sets=(RuleSet(2, 1, tuple(rules)),))
    forced, left = check_open_mpi_runs(tmp_path, profile.save(tmp_path / "profile.yaml"))
    assert (forced, left) == (6, 1)
