"""Which launcher started this process, if any: torchrun, mpirun (Open MPI, MPICH) or Slurm's srun.

Under a launcher this process is one rank of a job that the launcher started; collbench joins it
instead of spawning ranks. Each launcher says who is who in its own environment variables:

==========  ======================  ======================  =====================  ========================
launcher    rank                    world size              local rank             store address
==========  ======================  ======================  =====================  ========================
torchrun    RANK                    WORLD_SIZE              LOCAL_RANK             MASTER_ADDR:MASTER_PORT
Open MPI    OMPI_COMM_WORLD_RANK    OMPI_COMM_WORLD_SIZE    ..._LOCAL_RANK         see below
MPICH/PMI   PMI_RANK                PMI_SIZE                MPI_LOCALRANKID        see below
srun        SLURM_PROCID            SLURM_STEP_NUM_TASKS    SLURM_LOCALID          published by task 0
==========  ======================  ======================  =====================  ========================

mpirun and srun name no rendezvous point. Under srun, unless ``MASTER_ADDR`` and ``MASTER_PORT`` are
both set, task 0 binds its store to a port the kernel picks (``MASTER_PORT`` when set) and publishes
its address and port in a file the step's tasks share (:mod:`collbench.runtime.launch.rendezvous`):
on the loopback when every task runs on this host, else on every interface of task 0's host, named
by ``MASTER_ADDR`` or task 0's host name. Under mpirun the address is ``MASTER_ADDR`` when set; else
127.0.0.1 when every rank is on this host (the launcher's local size equals the world size: the
store then listens on the loopback only); else an error (``mpirun -x MASTER_ADDR=HOST``). Over
several hosts the store of rank 0 listens on every interface of its host, as torchrun's does.
mpirun's port is ``MASTER_PORT`` when set; else rank 0 binds a port the kernel picks and publishes it
in a file named after the job (``rendezvous.mpirun_job``: Open MPI's job variables, or the mpiexec
that MPICH's Hydra proxies report to), so that no two jobs on a host can meet on one port. A PMI
launcher that names its job in neither way gets :data:`PORT_BASE`.

Slurm is recognised inside a job step only (``SLURM_STEP_ID`` set, as srun sets it): a batch script
or an ``salloc`` shell also carries ``SLURM_PROCID``/``SLURM_NTASKS``, and a ``collbench sweep``
typed there must start its own ranks rather than wait for tasks that were never started.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from collbench.errors import ConfigError
from collbench.runtime.launch.rendezvous import mpirun_job, mpirun_rendezvous_path, rendezvous_path

PORT_BASE = 29500
"""torchrun's default port: that of an mpirun job without MASTER_PORT whose job has no name to publish under."""
_SLURM_SPECIAL_STEPS = 0xFFFFFFF0
"""Slurm's batch, extern and interactive steps have ids from here up: they are not srun steps."""
MAX_HOSTLIST = 1 << 16
"""The most nodes a Slurm job's tasks-per-node list may count: more is a typo, not a cluster."""
MAX_WORLD_SIZE = 1 << 17
"""The most ranks a launcher's job may have: the largest GPU jobs run about 100,000 ranks, and every
rank keeps per-rank tables (chunk bounds, schedules) that a typo like ``SLURM_NTASKS=999999999``
would make exhaust memory before anything could say so."""
MAX_NUMBER_DIGITS = 18
"""Digits a number in a launcher's variable may have (below 2^63): Python refuses to convert
strings of more than 4,300 digits, and nothing a launcher counts needs more than this."""


@dataclass(frozen=True, slots=True)
class JobEnv:
    """This process's place in a job started by a launcher."""

    launcher: str
    """``torchrun``, ``mpirun`` or ``srun``."""
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    """Ranks of this job on this host (GPUs it needs here)."""
    master_addr: str
    master_port: int
    local_only: bool = False
    """Every rank runs on this host: the store listens on the loopback only."""
    rendezvous: str = ""
    """The file rank 0 publishes its store's address and port in (srun without MASTER_ADDR and
    MASTER_PORT, mpirun without MASTER_PORT: ``rendezvous.py``); ``master_addr`` and ``master_port``
    are then known once read."""
    agent_store: bool = False
    """torchrun's elastic agent holds the store at the address (TORCHELASTIC_USE_AGENT_STORE): every rank
    joins it, none starts one."""
    store_scope: str = ""
    """Names this run of the job in the store's keys: torchrun's restart count, under its agent's store,
    which outlives a restarted group of workers."""
    master_source: str = "MASTER_ADDR"
    """Where ``master_addr`` came from, for a message that cannot reach it (a variable, or how it was chosen)."""

    def __post_init__(self) -> None:
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise ConfigError(f"{self.launcher} says rank {self.rank} of {self.world_size}: not a rank of that job")
        if not 0 <= self.local_rank < max(self.local_world_size, 1):
            raise ConfigError(
                f"{self.launcher} says local rank {self.local_rank} of {self.local_world_size} on this host"
            )
        if self.world_size > MAX_WORLD_SIZE:
            raise ConfigError(
                f"{self.launcher} says the job has {self.world_size} ranks, "
                f"more than the {MAX_WORLD_SIZE} collbench runs"
            )
        if not 0 < self.master_port < 65536 and not (self.rendezvous and self.master_port == 0):
            raise ConfigError(f"{self.launcher}: store port {self.master_port} is not a TCP port (1-65535)")


def _int(env: Mapping[str, str], name: str, launcher: str) -> int:
    text = env[name].strip()
    if not re.fullmatch(r"\d{1,9}", text):
        raise ConfigError(
            f"{launcher} set {name}={_shown(env[name])}, which is not a non-negative integer of at most 9 digits"
        )
    return int(text)


def _shown(text: str) -> str:
    """``text`` quoted for an error line, cut to its first 60 characters (a variable may hold megabytes)."""
    return repr(text) if len(text) <= 60 else f"{text[:60]!r}... ({len(text)} characters)"


def detect_job(env: Mapping[str, str] | None = None) -> JobEnv | None:
    """The launcher's job this process belongs to, or None when it runs on its own.

    Checked in order: torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT all set), Open MPI,
    MPICH/PMI, srun. Raises ConfigError for a launcher's variable that is not a number, a rank
    outside the world, or an mpirun job over several hosts without MASTER_ADDR.
    """
    env = os.environ if env is None else env
    rank_var = _rank_variable(env)
    if rank_var == "RANK":
        return _torchrun(env)
    if rank_var == "OMPI_COMM_WORLD_RANK":
        return _mpi(
            env,
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_SIZE",
        )
    if rank_var == "PMI_RANK":
        return _mpi(env, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS")
    if rank_var == "SLURM_PROCID":
        return _slurm(env)
    return None


def _rank_variable(env: Mapping[str, str]) -> str | None:
    """The variable holding this process's rank, of the first launcher whose job it is in (the order
    of :func:`detect_job`); None outside any."""
    if all(name in env for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")):
        return "RANK"
    if "OMPI_COMM_WORLD_RANK" in env and "OMPI_COMM_WORLD_SIZE" in env:
        return "OMPI_COMM_WORLD_RANK"
    if "PMI_RANK" in env and "PMI_SIZE" in env:
        return "PMI_RANK"
    if "SLURM_PROCID" in env and _in_srun_step(env):
        return "SLURM_PROCID"
    return None


def launched_rank(env: Mapping[str, str] | None = None) -> int | None:
    """This process's rank as its launcher numbers it, None outside a launcher's job or where the
    variable is no rank; raises nothing. For deciding, as an error is printed, whether this rank is the
    one to say it: the job's other variables are not checked (that may be the error being printed)."""
    env = os.environ if env is None else env
    rank_var = _rank_variable(env)
    text = env.get(rank_var, "").strip() if rank_var else ""
    return int(text) if re.fullmatch(r"\d{1,9}", text, flags=re.ASCII) else None


def _torchrun(env: Mapping[str, str]) -> JobEnv:
    launcher = "torchrun"
    size = _int(env, "WORLD_SIZE", launcher)
    agent = env.get("TORCHELASTIC_USE_AGENT_STORE", "") == "True"
    restarts = _int(env, "TORCHELASTIC_RESTART_COUNT", launcher) if "TORCHELASTIC_RESTART_COUNT" in env else 0
    return JobEnv(
        launcher=launcher,
        rank=_int(env, "RANK", launcher),
        world_size=size,
        local_rank=_int(env, "LOCAL_RANK", launcher) if "LOCAL_RANK" in env else 0,
        local_world_size=_int(env, "LOCAL_WORLD_SIZE", launcher) if "LOCAL_WORLD_SIZE" in env else 1,
        master_addr=env["MASTER_ADDR"],
        master_port=_int(env, "MASTER_PORT", launcher),
        # Only ranks of this host can reach a store on the loopback: it listens there alone.
        local_only=not agent and is_loopback(env["MASTER_ADDR"]),
        agent_store=agent,
        store_scope=f"attempt{restarts}/" if agent else "",
    )


def is_loopback(address: str) -> bool:
    """Whether ``address`` names this host's loopback (127.0.0.0/8, ::1, localhost)."""
    import ipaddress

    name = address.strip().strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _mpi(env: Mapping[str, str], rank_var: str, size_var: str, local_var: str, local_size_var: str) -> JobEnv:
    launcher = "mpirun"
    size = _int(env, size_var, launcher)
    local_size = _int(env, local_size_var, launcher) if local_size_var in env else None
    local_only = local_size == size
    if "MASTER_ADDR" in env:
        addr = env["MASTER_ADDR"]
    elif local_only:
        addr = "127.0.0.1"
    else:
        raise ConfigError(
            f"mpirun started {size} ranks over several hosts (or did not say how many are here): "
            "set MASTER_ADDR to rank 0's host for every rank (mpirun -x MASTER_ADDR=HOST)"
        )
    rendezvous = ""
    if "MASTER_PORT" in env:
        port = _int(env, "MASTER_PORT", launcher)
    elif job := mpirun_job(env):
        # Rank 0 binds a free port and publishes it (runtime/launch/rendezvous.py): a port derived from
        # the job id was another job's once in a thousand, and MPICH's jobs had one port for all.
        rendezvous, port = str(mpirun_rendezvous_path(env, job)), 0
    else:
        port = PORT_BASE
    return JobEnv(
        launcher=launcher,
        rank=_int(env, rank_var, launcher),
        world_size=size,
        local_rank=_int(env, local_var, launcher) if local_var in env else 0,
        local_world_size=local_size if local_size is not None else 1,
        master_addr=addr,
        master_port=port,
        local_only=local_only and "MASTER_ADDR" not in env,
        master_source="MASTER_ADDR" if "MASTER_ADDR" in env else "the loopback: every rank is on this host",
        rendezvous=rendezvous,
    )


def _in_srun_step(env: Mapping[str, str]) -> bool:
    step = env.get("SLURM_STEP_ID", env.get("SLURM_STEPID", "")).strip()
    # A step id is 32 bits: a longer string of digits is no srun step (and int() of 5,000 digits raises).
    return re.fullmatch(r"\d{1,10}", step, flags=re.ASCII) is not None and int(step) < _SLURM_SPECIAL_STEPS


def _slurm(env: Mapping[str, str]) -> JobEnv:
    launcher = "srun"
    size_var = "SLURM_STEP_NUM_TASKS" if "SLURM_STEP_NUM_TASKS" in env else "SLURM_NTASKS"
    if size_var not in env:
        raise ConfigError("srun set SLURM_PROCID but neither SLURM_STEP_NUM_TASKS nor SLURM_NTASKS")
    size = _int(env, size_var, launcher)
    local_size = _tasks_here(env)
    local_only = local_size == size and "MASTER_ADDR" not in env
    source = "MASTER_ADDR"
    rendezvous = ""
    if "MASTER_ADDR" in env and "MASTER_PORT" in env:
        addr, port = env["MASTER_ADDR"], _int(env, "MASTER_PORT", launcher)
    else:
        # Task 0 binds its store to a free port and publishes where (runtime/launch/rendezvous.py):
        # it need not run on the node list's first host, and no fixed port can be another job's.
        rendezvous = str(rendezvous_path(env))
        addr = env.get("MASTER_ADDR", "127.0.0.1" if local_only else "")
        port = _int(env, "MASTER_PORT", launcher) if "MASTER_PORT" in env else 0
        source = "MASTER_ADDR" if "MASTER_ADDR" in env else f"task 0, published in {rendezvous}"
    return JobEnv(
        launcher=launcher,
        rank=_int(env, "SLURM_PROCID", launcher),
        world_size=size,
        local_rank=_int(env, "SLURM_LOCALID", launcher) if "SLURM_LOCALID" in env else 0,
        local_world_size=local_size,
        master_addr=addr,
        master_port=port,
        local_only=local_only,
        master_source=source,
        rendezvous=rendezvous,
    )


def _tasks_here(env: Mapping[str, str]) -> int:
    """Tasks of this step on this node, from ``SLURM_STEP_TASKS_PER_NODE`` (``2(x3),1``) and SLURM_NODEID."""
    text = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE")
    node = env.get("SLURM_NODEID", "0").strip()
    if not text or not node.isdecimal():
        return 1
    if len(node) > MAX_NUMBER_DIGITS:
        raise ConfigError(f"srun set SLURM_NODEID to a {len(node)}-digit number, which is no node of a job")
    counts: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d{1,9})(?:\(x(\d{1,9})\))?\s*", part, flags=re.ASCII)
        if match is None:
            raise ConfigError(f"srun set SLURM_STEP_TASKS_PER_NODE={_shown(text)}, which is not like 2(x3),1")
        repeat = int(match.group(2) or 1)
        if len(counts) + repeat > MAX_HOSTLIST:
            raise ConfigError(f"SLURM_STEP_TASKS_PER_NODE={_shown(text)} names more than {MAX_HOSTLIST} nodes")
        counts.extend([int(match.group(1))] * repeat)
    index = int(node)
    return counts[index] if index < len(counts) else 1
