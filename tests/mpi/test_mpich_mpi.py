"""MPICH as the fourth backend, on the real MPICH: a sweep of its forced algorithms, and its exports obeyed.

Obeyed is observed, not timed: mpich_ucx_spy.c counts each rank's sends (MPICH's ch4:ucx device sends
every message of an algorithm through ucp_tag_send_nbx), and an allreduce on 4 ranks sends 2 messages
of the whole buffer under recursive doubling, 4 (half, quarter, quarter, half) under
reduce_scatter_allgather, which is also what MPICH 4.0.2's own selection runs there from 1 KiB up
(checked below, so a file that changed nothing could not pass). The exported selection file is MPICH's
own tree, read from the installed library, with the profile's choices in front.
"""

from __future__ import annotations

import json
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
P = {"segment_bytes": None, "layout": "rank-order"}
RANKS = 4
SMALL, LARGE = 256, 65536
"""Floats per allreduce: 1 KiB and 256 KiB."""
RECURSIVE_DOUBLING = {SMALL: (2, 2 * 4 * SMALL), LARGE: (2, 2 * 4 * LARGE)}
RSAG = {SMALL: (4, 3 * 4 * SMALL // 2), LARGE: (4, 3 * 4 * LARGE // 2)}
"""(sends, bytes) of every rank: recursive doubling sends the whole buffer to lg 4 = 2 partners;
reduce_scatter_allgather halves then doubles (B/2 + B/4, then B/4 + B/2)."""


def _need_mpich() -> None:
    if not (shutil.which("mpicc.mpich") and shutil.which("mpiexec.mpich")):
        pytest.skip("MPICH is not installed (mpich, libmpich-dev; .ci/run installs them)")
    shown = subprocess.run(["mpichversion"], capture_output=True, text=True, timeout=60).stdout
    if "ch4:ucx" not in shown:
        pytest.skip("the message spy needs MPICH's ch4:ucx device (Debian's MPICH)")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    _need_mpich()
    where = tmp_path_factory.mktemp("mpich")
    spy, program = where / "spy.so", where / "allreduce"
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, "-O1", "-Wall", "-shared", "-fPIC", "-o", spy, HERE / "mpich_ucx_spy.c", "-ldl"], check=True)
    subprocess.run(["mpicc.mpich", "-O1", "-Wall", "-o", program, HERE / "mpich_allreduce.c"], check=True)
    subprocess.run(["mpicc.mpich", "-O1", "-Wall", "-o", where / "alltoall", HERE / "mpich_alltoall.c"], check=True)
    return spy, program


def sends(built: tuple[Path, Path], count: int, env: dict[str, str], *alltoall: str) -> tuple[int, int]:
    """(sends, bytes) of each rank of one allreduce of ``count`` floats (or, given ``alltoall``'s in-place
    flag, one all-to-all of ``count`` floats a rank), checked, the same on every rank."""
    spy, program = built
    if alltoall:
        program = program.with_name("alltoall")
    base = {k: v for k, v in os.environ.items() if not k.startswith("MPIR_CVAR_")}
    cmd = ["mpiexec.mpich", "-n", str(RANKS), "-genv", "LD_PRELOAD", str(spy), str(program), str(count), *alltoall]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**base, **env}, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = {tuple(int(x) for x in line.split()[1:]) for line in done.stderr.splitlines() if line.startswith("spy ")}
    assert len(seen) == 1, done.stderr[-2000:]
    found = seen.pop()
    return found[0], found[1]


def profile(path: Path, *rules: Rule) -> Path:
    Profile(fingerprint="fp", host="h", backend="mpich", rule_sets=(RuleSet(RANKS, 1, rules),)).save(path)
    return path


def test_the_spy_tells_the_algorithms_apart(built: tuple[Path, Path]) -> None:
    cvar = "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM"
    for count in (SMALL, LARGE):
        assert sends(built, count, {cvar: "recursive_doubling"}) == RECURSIVE_DOUBLING[count]
        assert sends(built, count, {cvar: "reduce_scatter_allgather"}) == RSAG[count]
        assert sends(built, count, {}) == RSAG[count]  # MPICH's own choice here


def test_mpich_follows_the_exported_selection_file(built: tuple[Path, Path], tmp_path: Path) -> None:
    chosen = profile(
        tmp_path / "p.yaml",
        Rule("all-reduce", 0, 4095, "native:recursive_doubling", params=P),
        Rule("all-reduce", 4096, None, "native", params=P),
    )
    out = tmp_path / "selection.json"
    done = CliRunner().invoke(app, ["export", "mpich-json", str(chosen), "-O", str(out)])
    assert done.exit_code == 0, done.output
    assert "MPICH's own selection read from" in done.output
    tree = json.loads(out.read_text())
    assert "collective=ineighbor_alltoallw" in tree  # MPICH's whole tree: nothing left without a branch
    env = {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": str(out)}
    assert sends(built, SMALL, env) == RECURSIVE_DOUBLING[SMALL]  # the profile's choice, not MPICH's
    assert sends(built, LARGE, env) == RSAG[LARGE]  # native there: MPICH's own tree


def test_a_choice_mpich_runs_out_of_place_only_is_not_given_in_place_calls(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    # MPICH 4.0.2 asserts in MPIR_Alltoall_intra_brucks given MPI_IN_PLACE where a selection file sends
    # it there (alltoall_intra_brucks.c:45, checked by hand): the file keeps in-place calls on MPICH's own.
    chosen = profile(tmp_path / "p.yaml", Rule("all-to-all", 0, None, "native:brucks", params=P))
    out = tmp_path / "selection.json"
    done = CliRunner().invoke(app, ["export", "mpich-json", str(chosen), "-O", str(out)])
    assert done.exit_code == 0, done.output
    env = {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": str(out)}
    brucks = sends(built, 1024, {"MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM": "brucks"}, "0")
    assert brucks == (2, 4096)  # lg 4 steps of half the buffer; MPICH's own sends to each rank (4 sends)
    assert sends(built, 1024, env, "0") == brucks
    assert sends(built, 1024, env, "1") == sends(built, 1024, {}, "1")  # in place: MPICH's own, checked


def test_mpich_follows_the_exported_variables(built: tuple[Path, Path], tmp_path: Path) -> None:
    chosen = profile(tmp_path / "p.yaml", Rule("all-reduce", 0, None, "native:recursive_doubling", params=P))
    done = CliRunner().invoke(app, ["export", "mpich-env", str(chosen)])
    assert done.exit_code == 0, done.output
    exports = [line.removeprefix("export ") for line in done.output.splitlines() if line.startswith("export ")]
    assert exports == ["MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=recursive_doubling"]
    name, _, value = exports[0].partition("=")
    assert sends(built, LARGE, {name: value}) == RECURSIVE_DOUBLING[LARGE]


def test_a_sweep_measures_each_forced_algorithm_and_checks_it(tmp_path: Path) -> None:
    _need_mpich()
    out = tmp_path / "r.jsonl"
    args = ["sweep", "--backend", "mpich", "--ranks", "2", "--op", "all-reduce", "--algo", "all"]
    args += ["-b", "1K", "-e", "4K", "-n", "3", "-O", str(out)]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["algo"] for r in rows} == {
        "native",
        "native:nb",
        "native:recursive_doubling",
        "native:reduce_scatter_allgather",
    }
    assert all(r["wrong"] == 0 and r["backend"] == "mpich" and r["backend_version"] == "4.0.2" for r in rows)
    # smp needs a node hierarchy MPICH has not on one node: refused by MPICH, said, not measured.
    assert "native:smp all-reduce: MPICH cannot run it on 2 ranks" in " ".join(done.output.split())


def test_an_algorithm_mpich_refuses_in_place_is_still_measured_out_of_place(tmp_path: Path) -> None:
    _need_mpich()
    out = tmp_path / "a.jsonl"
    args = ["sweep", "--backend", "mpich", "--ranks", "2", "--op", "all-to-all", "--algo", "native:brucks"]
    done = CliRunner().invoke(app, [*args, "-b", "1K", "-e", "4K", "-n", "3", "-O", str(out)])
    assert done.exit_code == 0, done.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # MPICH 4.0.2's brucks takes no MPI_IN_PLACE (MPIR_Alltoall_intra_brucks asserts a send buffer).
    assert rows and {r["in_place"] for r in rows} == {False} and all(r["wrong"] == 0 for r in rows)
    said = " ".join(done.output.split())
    assert "native:brucks all-to-all (its points in place): MPICH cannot run it on 2 ranks" in said
    assert "error stack" not in said  # MPICH's reason alone, not its internal frames
