"""`export ompi-rankfile` fed to the real mpirun: each MPI_COMM_WORLD rank runs where the ring puts it.

A tiny MPI program (ompi_where.c) prints each rank's hostname and the CPUs it is bound to. On this
machine (two ranks, one host) the rankfile's slots bind rank 0 to the core of the tuned rank the ring
puts first. Across the namespace cluster (benchmarks/ompi_netns.py: four hosts n0..n3, one network
namespace each, mpirun through an rsh agent that enters them; needs root) rank j runs on the host of
the tuned rank ring[j], with the rankfile and with the `-H ... --map-by slot` line the export offers.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from collbench.cli.app import app
from collbench.profile.document import Profile, ProfileLayout, RuleSet
from collbench.profile.rules import Rule
from tests.netns._cluster import REPO, netns

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.mpi
WHERE = re.compile(r"^rank (\d+) host (\S+) cpus ([\d ]+)$")


def _need_mpicc() -> None:
    if not (shutil.which("mpirun") and shutil.which("mpicc")):
        pytest.skip("Open MPI is not installed (openmpi-bin, libopenmpi-dev; .ci/run installs them)")


def _where_program(tmp_path: Path) -> Path:
    program = tmp_path / "where"
    subprocess.run(["mpicc", "-O1", "-Wall", "-o", program, HERE / "ompi_where.c"], check=True, timeout=120)
    return program


def _placed(output: str) -> dict[int, tuple[str, tuple[int, ...]]]:
    """rank -> (host, bound CPUs) from the program's lines."""
    out = {}
    for line in output.splitlines():
        match = WHERE.match(line.strip())
        if match:
            out[int(match.group(1))] = (match.group(2), tuple(int(c) for c in match.group(3).split()))
    return out


def _profile(tmp_path: Path, world: int, nodes: int, ring: tuple[int, ...]) -> Path:
    rules = (Rule("all-reduce", 0, None, "native", {"segment_bytes": None, "layout": "topology"}),)
    shape = RuleSet(world, nodes, rules, layout=ProfileLayout("topology", rings=(ring,)))
    return Profile(fingerprint="fp", host="h", backend="mpi", rule_sets=(shape,)).save(tmp_path / "profile.yaml")


def _export(profile: Path, out: Path, *args: str) -> str:
    result = CliRunner().invoke(app, ["export", "ompi-rankfile", str(profile), "-O", str(out), *args])
    assert result.exit_code == 0, result.output
    return out.read_text()


def test_one_host_binds_each_rank_to_its_ring_positions_core(tmp_path: Path) -> None:
    _need_mpicc()
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("binding two ranks to two different cores needs two cores")
    program = _where_program(tmp_path)
    rankfile = tmp_path / "ranks"
    _export(_profile(tmp_path, 2, 1, (1, 0)), rankfile)
    done = subprocess.run(
        ["mpirun", "--allow-run-as-root", "-np", "2", "--rankfile", str(rankfile), str(program)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    placed = _placed(done.stdout)
    # Rank 0 takes tuned rank 1's place (core 1), rank 1 tuned rank 0's (core 0).
    assert {rank: cpus for rank, (_, cpus) in placed.items()} == {0: (1,), 1: (0,)}


RING = (0, 2, 1, 3)


def _ompi_netns() -> ModuleType:
    """benchmarks/ompi_netns.py (benchmarks/ is no package)."""
    spec = importlib.util.spec_from_file_location("collbench_bench_ompi_netns", REPO / "benchmarks" / "ompi_netns.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_namespace_hosts_take_ranks_in_the_rings_order(tmp_path: Path) -> None:
    _need_mpicc()
    why = netns.netns_unavailable()
    if why is not None:
        pytest.skip(f"network namespaces cannot be made here: {why}")
    ompi_netns = _ompi_netns()
    program = _where_program(tmp_path)
    rankfile = tmp_path / "ranks"
    text = _export(_profile(tmp_path, 4, 4, RING), rankfile, "--hosts", "n0,n1,n2,n3", "--slots", "0")
    alternative = re.search(r"# alternative without a file: mpirun (.*)$", text, re.MULTILINE)
    assert alternative is not None, text
    rates = [[100.0] * 4 for _ in range(4)]
    with ompi_netns.MpiNamespaceCluster(rates, tmp_path) as cluster:
        default = cluster.mpirun([str(program)], timeout_s=180)
        ruled = cluster.mpirun([str(program)], options=["--rankfile", str(rankfile)], timeout_s=180)
        mapped = cluster.mpirun([str(program)], options=alternative.group(1).split(), hostfile=False, timeout_s=180)
    for done in (default, ruled, mapped):
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert {r: host for r, (host, _) in _placed(default.stdout).items()} == {0: "n0", 1: "n1", 2: "n2", 3: "n3"}
    expected = {j: f"n{tuned}" for j, tuned in enumerate(RING)}
    assert {r: host for r, (host, _) in _placed(ruled.stdout).items()} == expected
    assert {r: host for r, (host, _) in _placed(mapped.stdout).items()} == expected
