"""Under the real mpirun, a job's nodes are those its ranks report (host name plus boot id), not
``world size // local size``, which assumed block mapping with equal ranks per node.

One machine stands in for two hosts: each rank's wrapper gives it the boot id of its pretend host
(``COLLBENCH_TEST_BOOT_ID``, the test hook of ``collbench/runtime/launch/membership.py``) and the
local rank and size Open MPI sets on a host of that layout (``OMPI_COMM_WORLD_LOCAL_RANK``,
``OMPI_COMM_WORLD_LOCAL_SIZE``, as ``mpirun -np 4 env`` shows them on each node). Every rank then
reaches rank 0's store on the loopback, as ``mpirun -x MASTER_ADDR`` would name it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from launcher_env import clean_env, free_port

from collbench.results.io import read_jsonl

pytestmark = [
    pytest.mark.dist,
    pytest.mark.skipif(
        shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed (.ci/run installs it)"
    ),
]

JOB_S = 240.0
SWEEP = ["sweep", "--backend", "gloo", "--op", "all-reduce", "--algo", "ring", "-b", "1K", "-e", "1K"]
SWEEP += ["-n", "2", "-w", "1", "--timeout", "60", "--format", "json"]

# Each rank's pretend host, as it sets OMPI_COMM_WORLD_LOCAL_RANK/SIZE there (ranks in rank order).
_WRAPPER = """
import json, os, sys
hosts = json.loads(os.environ["PRETEND_HOSTS"])
rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
mine = hosts[rank]
os.environ["COLLBENCH_TEST_BOOT_ID"] = "pretend-" + mine
os.environ["OMPI_COMM_WORLD_LOCAL_RANK"] = str(hosts[:rank].count(mine))
os.environ["OMPI_COMM_WORLD_LOCAL_SIZE"] = str(hosts.count(mine))
with open(f"out.{rank}", "w") as out:
    os.dup2(out.fileno(), 1)
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""


def _mpirun(hosts: list[str], args: list[str], cwd: Path, *options: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(
        drop=("COLLBENCH_TEST_BOOT_ID",),
        PRETEND_HOSTS=json.dumps(hosts),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
    )
    (cwd / "wrapper.py").write_text(_WRAPPER)
    mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(len(hosts)), *options]
    mpirun += ["-x", "PRETEND_HOSTS", "-x", "MASTER_ADDR", "-x", "MASTER_PORT", "-x", "PYTHONPATH"]
    argv = [*mpirun, sys.executable, str(cwd / "wrapper.py"), *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=JOB_S, cwd=cwd)


@pytest.mark.parametrize(
    ("hosts", "options"),
    [
        # Two ranks on the first host, three on the second: 5 // 3 and 5 // 2 made it one node.
        (["a", "a", "b", "b", "b"], ()),
        # mpirun --map-by node over two hosts: rank r on host r % 2.
        (["a", "b", "a", "b"], ("--map-by", "node")),
    ],
)
def test_the_rows_count_the_hosts_the_ranks_ran_on(hosts: list[str], options: tuple[str, ...], tmp_path: Path) -> None:
    done = _mpirun(hosts, ["-m", "collbench.cli.app", *SWEEP, "--stream", "rows.jsonl"], tmp_path, *options)
    outputs = "".join(f"--- {p.name}\n{p.read_text()}" for p in sorted(tmp_path.glob("out.*")))
    assert done.returncode == 0, done.stdout + done.stderr + outputs
    rows = list(read_jsonl(tmp_path / "rows.jsonl"))
    assert rows and all(r.wrong == 0 for r in rows)
    assert {(r.world_size, r.nodes) for r in rows} == {(len(hosts), 2)}


_SHAPE = """
from collbench.runtime.here import HERE
print(*HERE.job_shape(None))
"""


def test_every_rank_of_an_uneven_job_sees_the_same_shape(tmp_path: Path) -> None:
    # What a tune plans by before its first step (NCCL's variants, tune --check's shapes): on the host
    # of 2 it was 5 // 2 = 2 nodes, on the host of 3 it was 5 // 3 = 1, so the ranks planned apart.
    done = _mpirun(["a", "a", "b", "b", "b"], ["-c", _SHAPE], tmp_path)
    outputs = [(tmp_path / f"out.{rank}").read_text().strip() for rank in range(5)]
    assert done.returncode == 0, done.stdout + done.stderr + repr(outputs)
    assert outputs == ["5 2"] * 5


def test_a_probed_topology_names_the_nodes_the_job_runs_on(tmp_path: Path) -> None:
    # Two pretend hosts that share this machine's host name (containers, the namespace cluster): the
    # probe named each rank by its host name alone, so its topology had one host, and a sweep on it
    # said its layout put the ranks on 1 node while they ran on 2. The probe names the nodes as the job
    # does (host name and boot id), so the two agree and nothing is said.
    from collbench.topology.io import load_topology

    hosts = ["a", "a", "b", "b"]
    probe = ["-m", "collbench.cli.app", "discover", "--probe", "-O", "measured.yaml", "--timeout", "60"]
    done = _mpirun(hosts, probe, tmp_path)
    outputs = "".join(f"--- {p.name}\n{p.read_text()}" for p in sorted(tmp_path.glob("out.*")))
    assert done.returncode == 0, done.stdout + done.stderr + outputs
    topology = load_topology(tmp_path / "measured.yaml")
    names = [d.host for d in topology.rank_devices]
    assert len(names) == 4 and names[0] == names[1] != names[2] == names[3], names
    sweep = [*SWEEP[: SWEEP.index("--algo")], "--algo", "ring,hierarchical", *SWEEP[SWEEP.index("--algo") + 2 :]]
    sweep += ["--topology", "measured.yaml", "--stream", "rows.jsonl"]
    done = _mpirun(hosts, ["-m", "collbench.cli.app", *sweep], tmp_path)
    outputs = "".join(f"--- {p.name}\n{p.read_text()}" for p in sorted(tmp_path.glob("out.*")))
    said = done.stdout + done.stderr + outputs
    assert done.returncode == 0, said
    assert "groups the ranks into" not in said
    rows = list(read_jsonl(tmp_path / "rows.jsonl"))
    assert {r.algo for r in rows} == {"ring", "hierarchical"} and all(r.wrong == 0 for r in rows)
    assert {(r.world_size, r.nodes) for r in rows} == {(4, 2)}
