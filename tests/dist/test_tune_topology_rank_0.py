"""``collbench tune --topology`` under a launcher: rank 0 alone reads the topology and plans the layout,
and the other ranks run on what it hands them (tuning/placement.py). Ranks in folders of their own, as
on hosts of their own: only rank 0's holds the topology file, so a rank that opened it would fail. The
tune measures all-reduce and all-to-all (topo-pairwise, whose exchange order on this topology is not
the round-robin one, so each rank's partners travel) with every point's data checked, and its profile
records the layout rank 0 planned, as a tune whose every rank read the file did (test_tune_launcher)."""

from __future__ import annotations

from pathlib import Path

import pytest
from launcher_env import torchrun_job
from node_link_topologies import classed, every_pair

from collbench.layouts.model import Layout
from collbench.layouts.plan import plan_layout
from collbench.profile.document import Profile
from collbench.results.io import read_jsonl
from collbench.runtime.probe import PairMeasure, measured_topology
from collbench.topology.io import save_topology
from collbench.topology.model import Topology

pytestmark = pytest.mark.dist

JOB_S = 240.0


def _rank_0_holds_the_topology(tmp_path: Path, n: int) -> tuple[Topology, Layout, list[Path]]:
    """A measured topology of ``n`` ranks on one host (ranks 0 and 1 closest), its planned layout and
    one folder a rank, rank 0's alone holding the topology (measured.yaml)."""
    measures = [
        PairMeasure(a, b, 50.0, 0.05 if {a, b} == {0, 1} else 0.3) for a in range(n) for b in range(n) if a != b
    ]
    topology = measured_topology(["host"] * n, measures, gpus=False)
    planned = plan_layout(topology, n)
    assert not planned.exchange_is_round_robin()  # the partners are handed out, not derived
    folders = [tmp_path / f"rank{rank}" for rank in range(n)]
    for folder in folders:
        folder.mkdir()
    save_topology(topology, folders[0] / "measured.yaml")
    return topology, planned, folders


def test_a_tune_whose_other_ranks_have_no_topology_file_runs_rank_0s_layout(tmp_path: Path) -> None:
    n = 3
    topology, planned, folders = _rank_0_holds_the_topology(tmp_path, n)
    tune = [
        *("-m", "collbench.cli.app", "tune", "--quick", "--backend", "gloo", "--op", "all-reduce,all-to-all"),
        *("-b", "64K", "-e", "128K", "--timeout", "60", "-O", "p.yaml", "--topology", "measured.yaml"),
    ]
    done = torchrun_job(n, tune, folders, timeout_s=JOB_S)
    for rank, proc in enumerate(done):
        assert proc.returncode == 0, f"rank {rank}: {proc.stdout}{proc.stderr}"
    assert all(not (folder / "measured.yaml").exists() for folder in folders[1:])

    rows = list(read_jsonl(folders[0] / "p-results.jsonl"))
    assert rows and all(r.wrong == 0 and r.world_size == n for r in rows)
    assert {r.topology_fingerprint for r in rows} == {str(topology.fingerprint)}
    exchanged = [r for r in rows if r.algo == "topo-pairwise"]
    assert exchanged and {r.layout for r in exchanged} == {planned.name}
    profile = Profile.load(folders[0] / "p.yaml")
    assert profile.layout is not None
    assert profile.layout.rings == planned.rings and profile.layout.trees == planned.trees


def test_rank_0s_refusal_of_the_topology_reaches_every_rank_at_once(tmp_path: Path) -> None:
    folders = [tmp_path / f"rank{rank}" for rank in range(2)]
    for folder in folders:
        folder.mkdir()
    (folders[0] / "measured.yaml").write_text("devices: [\n", encoding="utf-8")
    tune = ["-m", "collbench.cli.app", "tune", "--quick", "--backend", "gloo", "--timeout", "60"]
    done = torchrun_job(2, [*tune, "-O", "p.yaml", "--topology", "measured.yaml"], folders, timeout_s=JOB_S)
    assert [proc.returncode for proc in done] == [2, 2], [p.stderr for p in done]
    first = done[0].stderr.strip().splitlines()[-1]
    assert first.startswith("error: ") and "measured.yaml" in first
    assert done[1].stderr.strip().splitlines()[-1] == first.replace("error: ", "error: rank 0: ", 1)


def test_a_sweep_whose_other_ranks_have_no_topology_file_runs_rank_0s_layout(tmp_path: Path) -> None:
    # sweep --topology alike: rank 0 reads and plans in its plan of the sweep; the others get the
    # layout's shared part and their own all-to-all partners (runtime/sweep/worker.py).
    n = 3
    topology, planned, folders = _rank_0_holds_the_topology(tmp_path, n)
    sweep = [
        *("-m", "collbench.cli.app", "sweep", "--backend", "gloo", "--op", "all-to-all", "--algo", "topo-pairwise"),
        *("-b", "1K", "-e", "64K", "-n", "2", "--timeout", "60", "-O", "rows.jsonl", "--topology", "measured.yaml"),
    ]
    done = torchrun_job(n, sweep, folders, timeout_s=JOB_S)
    for rank, proc in enumerate(done):
        assert proc.returncode == 0, f"rank {rank}: {proc.stdout}{proc.stderr}"
    rows = list(read_jsonl(folders[0] / "rows.jsonl"))
    assert len(rows) == 4 and all(r.wrong == 0 and r.layout == planned.name for r in rows)
    assert {r.topology_fingerprint for r in rows} == {str(topology.fingerprint)}

    # A topology of fewer ranks than the job: rank 0's refusal, every rank's one line.
    save_topology(
        measured_topology(["host"] * 2, [PairMeasure(0, 1, 50.0, 0.3), PairMeasure(1, 0, 50.0, 0.3)], gpus=False),
        folders[0] / "two.yaml",
    )
    few = [*sweep[:-1], "two.yaml", "--overwrite"]
    done = torchrun_job(n, few, folders, timeout_s=JOB_S)
    assert [proc.returncode for proc in done] == [2] * n, [p.stderr for p in done]
    assert all("describes 2 ranks, fewer than the 3 this sweep runs" in p.stderr for p in done)


def test_a_tune_on_a_topology_said_by_pairs_of_nodes_runs_the_layout_of_every_pair(tmp_path: Path) -> None:
    # A probe by nodes' file: one rank on each of 4 hosts, hosts 0 and 1 measured slow, the other pairs
    # of hosts inferred (node_links' default). The tune plans on it the layout that the same topology
    # with every pair of ranks listed gives, and rank 0 alone reads it.
    n = 4
    compact = classed(n, 1, {(0, 1): 0.3})
    assert compact.default_node_link is not None and not compact.links
    planned = plan_layout(every_pair(compact), n)
    folders = [tmp_path / f"rank{rank}" for rank in range(n)]
    for folder in folders:
        folder.mkdir()
    save_topology(compact, folders[0] / "measured.yaml")
    tune = [
        *("-m", "collbench.cli.app", "tune", "--quick", "--backend", "gloo", "--op", "all-reduce"),
        *("-b", "64K", "-e", "128K", "--timeout", "60", "-O", "p.yaml", "--topology", "measured.yaml"),
    ]
    done = torchrun_job(n, tune, folders, timeout_s=JOB_S)
    for rank, proc in enumerate(done):
        assert proc.returncode == 0, f"rank {rank}: {proc.stdout}{proc.stderr}"
    rows = list(read_jsonl(folders[0] / "p-results.jsonl"))
    assert rows and all(r.wrong == 0 and r.world_size == n for r in rows)
    profile = Profile.load(folders[0] / "p.yaml")
    assert profile.layout is not None
    assert profile.layout.rings == planned.rings and profile.layout.trees == planned.trees
    # The slow pair of hosts is no hop of the best ring.
    ring = planned.rings[0]
    assert 1 not in (ring[ring.index(0) - 1], ring[(ring.index(0) + 1) % n])
