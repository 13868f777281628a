"""Starting collbench as a launcher starts it, for the tests that run ranks as their own processes
(tests/dist, tests/slurm): a port the kernel picks, an environment in which nothing of the launcher
pytest itself may run under leaks in, and a torchrun-style job of n ranks on this host."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# What mpirun, srun, Hydra and torchrun set: a rank that saw any of them would take it for its own job.
LAUNCHER_PREFIXES = ("OMPI_", "PMI", "SLURM_", "MASTER_", "TORCHELASTIC")
LAUNCHER_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def free_port() -> int:
    """A TCP port on the loopback that nothing listens on now (a fixed port collides between runs)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(*, drop: Sequence[str] = (), **extra: str) -> dict[str, str]:
    """This process's environment without any launcher's variables, nor any whose name starts with one
    of ``drop``; collbench imported from this checkout, one OpenMP thread a process (2 cores run the
    suite); ``extra`` set last."""
    env = {k: v for k, v in os.environ.items() if not k.startswith((*LAUNCHER_PREFIXES, *drop))}
    for name in LAUNCHER_NAMES:
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra)
    return env


def torchrun_env(rank: int, n: int, port: int, *, drop: Sequence[str] = (), **extra: str) -> dict[str, str]:
    """What torchrun sets for ``rank`` of ``n`` on one host (torch/distributed/run.py: RANK, WORLD_SIZE,
    LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), on :func:`clean_env`."""
    return clean_env(
        drop=drop, RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(n),
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), **extra,
    )  # fmt: skip


def torchrun_job(
    n: int,
    argv: Sequence[str] | Sequence[Sequence[str]],
    cwd: Path | Sequence[Path],
    *,
    timeout_s: float,
    drop: Sequence[str] = (),
    **extra: str,
) -> list[subprocess.CompletedProcess[str]]:
    """Run ``python argv`` as ranks 0..n-1 of one torchrun-style job and wait for every rank; each
    rank's exit code, stdout and stderr. ``argv``: one for every rank, or one per rank; ``cwd``: one
    folder, or one per rank; ``drop`` and ``extra`` as :func:`clean_env` takes them."""
    port = free_port()
    per_rank = [list(a) for a in argv] if argv and not isinstance(argv[0], str) else [list(argv)] * n
    folders = [cwd] * n if isinstance(cwd, Path) else list(cwd)
    procs = [
        subprocess.Popen(
            [sys.executable, *per_rank[rank]],
            env=torchrun_env(rank, n, port, drop=drop, **extra),
            cwd=folders[rank],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(n)
    ]
    done = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout_s)
            done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    finally:
        # A rank that timed out leaves its peers waiting on it: none may outlive the test.
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return done
