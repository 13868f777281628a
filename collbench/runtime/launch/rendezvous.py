"""Where a Slurm job step's or an mpirun job's store listens, as its rank 0 publishes it: nothing
assumes where rank 0 runs, and no port is derived from the job (two jobs on a host would meet on one).

srun names no rendezvous point, and task 0 need not run on the first host of the node list
(``--distribution=arbitrary`` with ``SLURM_HOSTFILE``, a heterogeneous step). So task 0 binds its
store to port 0 (the kernel picks a free one: no other job's store can hold it) and publishes its
host and port in a small file; the other tasks wait for the file and join there. Its host is the
address of the interface ``GLOO_SOCKET_IFNAME`` (or an exact ``NCCL_SOCKET_IFNAME``) names, where
the job's traffic was told to go, else its host name.

The file must exist before the store does, so it lives in a directory every task of the step sees
without the store: ``COLLBENCH_RENDEZVOUS_DIR`` when set, else ``SLURM_SUBMIT_DIR`` (the directory
srun or sbatch was run from: on clusters a shared filesystem, as the job's output files there need),
else the working directory. Its name carries the cluster, job, step and restart count
(``SLURM_RESTART_COUNT`` grows when a job is requeued, which keeps its id), so no other step's file
can be taken for it. It is written whole and renamed into place (a reader never sees half of it),
and task 0 removes it once every task has joined (or when it exits). On NFS a new file can take
the attribute cache's time (``acdirmin``, 30 s by default) to show on the other hosts: well inside
the store's timeout.

mpirun (Open MPI, MPICH's Hydra) without ``MASTER_PORT`` does the same: rank 0 binds port 0 and
publishes it in ``.collbench-store-mpirun-<job>.json``, in ``COLLBENCH_RENDEZVOUS_DIR`` when set, else
in the working directory, which both launchers give every rank (mpirun's own unless ``-wdir`` says
otherwise). ``<job>`` is a digest of what the launcher sets alike for every rank of the job and for
no other job running: under Open MPI the job's PMIx namespace, its id and the URI of the mpirun that
holds it (``OMPI_MCA_orte_hnp_uri``: its host's address and listening port); under Hydra, which
exports no job id, the host and port of the mpiexec every proxy of the job reports to, from the
command line of the proxy that started the rank (``hydra_pmi_proxy --control-port HOST:PORT``).
That port is free again once a job is over, so a rank 0 killed (SIGKILL: no exit handler runs) can
leave a file a later job of the same port reads: a reader takes no file published before its own
proxy started, less :data:`STALE_MARGIN_S`, and rank 0 replaces one whole.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import itertools
import json
import os
import socket
import struct
import time
from collections.abc import Mapping
from pathlib import Path

from collbench.errors import ConfigError

RENDEZVOUS_DIR_ENV = "COLLBENCH_RENDEZVOUS_DIR"
POLL_S = 0.1
"""How often a task waiting for task 0's file looks for it."""
MAX_FILE_BYTES = 4096


def launcher_rank(launcher: str, rank: int) -> str:
    """How the launcher names a process of its job in an error: srun's tasks, mpirun's ranks."""
    return f"{launcher} {'task' if launcher == 'srun' else 'rank'} {rank}"


def mpirun_rendezvous_path(env: Mapping[str, str], job: str) -> Path:
    """The file rank 0 of the mpirun job named ``job`` (:func:`mpirun_job`) publishes its store's address in."""
    folder = env.get(RENDEZVOUS_DIR_ENV) or os.getcwd()
    digest = hashlib.sha256(job.encode("utf-8", "replace")).hexdigest()[:20]
    return Path(folder) / f".collbench-store-mpirun-{digest}.json"


OPEN_MPI_JOB_VARS = ("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_hnp_uri")
"""What Open MPI sets alike for every rank of one job: the PMIx namespace (4.x: the job id; 5.x:
``prterun-HOST-PID@1``), the job id, and (4.x) the URI of the mpirun holding the job."""
HYDRA_PROXY = "hydra_pmi_proxy"
ANCESTORS_SEARCHED = 8
"""How far up from a rank the Hydra proxy is looked for (a rank may run under a shell or a wrapper)."""


def mpirun_job(env: Mapping[str, str], pid: int | None = None) -> str:
    """What names this process's mpirun job alike on every rank and apart from any other job running:
    Open MPI's variables (:data:`OPEN_MPI_JOB_VARS`), else the Hydra proxy's ``--control-port`` and
    ``--pgid`` from its command line (Linux /proc); empty when neither is there."""
    found = [f"{name}={env[name]}" for name in OPEN_MPI_JOB_VARS if env.get(name)]
    if found:
        return "open-mpi:" + ";".join(found)
    proxy = _hydra_proxy_args(os.getpid() if pid is None else pid)
    return f"hydra:{proxy}" if proxy else ""


def _hydra_proxy_args(pid: int) -> str:
    """``--control-port`` and ``--pgid`` of the Hydra proxy above ``pid``, as one string; empty if none is."""
    found = _hydra_proxy(pid)
    if found is None:
        return ""
    named = dict(itertools.pairwise(found[1]))
    port = named.get("--control-port", "")
    return f"{port} pgid {named.get('--pgid', '')}" if port else ""


def _hydra_proxy(pid: int) -> tuple[int, list[str]] | None:
    """The pid and command line of the Hydra proxy above ``pid``; None if none is."""
    for _ in range(ANCESTORS_SEARCHED):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
            pid = int(stat[stat.rfind(")") + 2 :].split()[1])
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace").split("\0")
        except (OSError, ValueError, IndexError):
            return None
        if os.path.basename(argv[0]) == HYDRA_PROXY:
            return pid, argv
        if pid <= 1:
            return None
    return None


STALE_MARGIN_S = 10.0
"""How long before a reader's own Hydra proxy started rank 0 may have published and still be of its
job: mpiexec starts its proxies host by host (ssh), so rank 0's may be up and publishing before
another host's proxy starts, and the hosts' clocks differ a little. A file of a job that ended this
close before, on the same control port and pgid, is not told apart."""


def process_start_s(pid: int) -> float | None:
    """When process ``pid`` started, in seconds since the epoch (proc(5): ``starttime``, clock ticks
    after boot, plus ``btime``); None where /proc does not say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
        ticks = int(stat[stat.rfind(")") + 2 :].split()[19])
        boot = next(
            int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime ")
        )
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def published_since(pid: int | None = None) -> float | None:
    """The earliest publish time (seconds since the epoch) a file of this process's job can have: the
    start of the Hydra proxy above it, less :data:`STALE_MARGIN_S`; None where no proxy is (Slurm's and
    Open MPI's files are named after ids no later job has)."""
    proxy = _hydra_proxy(os.getpid() if pid is None else pid)
    started = process_start_s(proxy[0]) if proxy is not None else None
    return None if started is None else started - STALE_MARGIN_S


def rendezvous_path(env: Mapping[str, str]) -> Path:
    """The file task 0 of this srun step publishes its store's address in."""
    folder = env.get(RENDEZVOUS_DIR_ENV) or env.get("SLURM_SUBMIT_DIR") or os.getcwd()
    parts = [
        env.get("SLURM_CLUSTER_NAME", ""),
        env.get("SLURM_JOB_ID", env.get("SLURM_JOBID", "")),
        env.get("SLURM_STEP_ID", env.get("SLURM_STEPID", "")),
        env.get("SLURM_RESTART_COUNT", "0"),
    ]
    name = "-".join("".join(c for c in part if c.isalnum() or c in "_.")[:40] for part in parts)
    return Path(folder) / f".collbench-store-{name}.json"


_SIOCGIFADDR = 0x8915
"""netdevice(7): the ioctl that reads an interface's IPv4 address."""
_IFNAMSIZ = 16


def published_address(env: Mapping[str, str]) -> str:
    """What task 0 publishes as its host: the address of the interface the job's traffic was told to
    use (``GLOO_SOCKET_IFNAME``, else an exact ``NCCL_SOCKET_IFNAME``; its first name), else its host
    name. A host name can resolve to another network than the job's (a management one, or none the
    other hosts reach, as in network namespaces): the named interface is the one the ranks share."""
    for name in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        first = env.get(name, "").split(",")[0].strip().removeprefix("=")
        # NCCL's "^docker" (all but) and "eth" (a prefix) name no one interface.
        if first and not first.startswith("^") and (name == "GLOO_SOCKET_IFNAME" or env[name].startswith("=")):
            address = interface_address(first)
            if address is not None:
                return address
    return socket.gethostname()


def interface_address(name: str) -> str | None:
    """The IPv4 address of network interface ``name`` (Linux), None when it has none or does not exist."""
    try:
        import fcntl
    except ImportError:
        return None
    request = struct.pack("256s", name.encode("utf-8", "replace")[: _IFNAMSIZ - 1])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            answer = fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, request)
        except OSError:
            return None
    return socket.inet_ntoa(answer[20:24])


def publish(path: Path, addr: str, port: int, launcher: str = "srun") -> None:
    """Write ``addr:port`` to ``path`` whole (a temporary file renamed into place, replacing any file a
    killed job left there); removed at exit. It records when, for readers to tell it from such a file."""
    text = json.dumps({"addr": addr, "port": port, "pid": os.getpid(), "published_s": time.time()})
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text)
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise ConfigError(
            f"{launcher_rank(launcher, 0)}: cannot publish the job's store address in {path} "
            f"({exc.strerror or exc}); set {RENDEZVOUS_DIR_ENV} to a directory every node of the job can "
            f"write and read, or {_given(launcher)}"
        ) from None
    atexit.register(withdraw, path)


def withdraw(path: Path) -> None:
    """Remove the published file (every task has read it, or the job is over)."""
    with contextlib.suppress(OSError):
        path.unlink()


def _given(launcher: str) -> str:
    """What a user sets instead of a published address: mpirun's rank 0 is at ``MASTER_ADDR`` already."""
    return "MASTER_ADDR and MASTER_PORT" if launcher == "srun" else "MASTER_PORT"


def read_published(
    path: Path, timeout_s: float, rank: int, launcher: str = "srun", since_s: float | None = None
) -> tuple[str, int]:
    """Task 0's store address and port from ``path``, waiting for it up to ``timeout_s``. A file
    published before ``since_s`` (seconds since the epoch: :func:`published_since`) is an earlier job's,
    left by a rank 0 that was killed: it is waited past, as if not there, until rank 0 replaces it.

    Raises ConfigError when it does not come, or holds something other than what task 0 writes.
    """
    deadline = time.monotonic() + timeout_s
    stale = False
    while True:
        try:
            with path.open("rb") as file:
                data = file.read(MAX_FILE_BYTES + 1)
                modified_s = os.fstat(file.fileno()).st_mtime
        except FileNotFoundError:
            data = None
        except OSError as exc:
            raise ConfigError(f"{launcher_rank(launcher, rank)}: cannot read {path} ({exc.strerror or exc})") from None
        if data is not None:
            stale = since_s is not None and _published_s(data, modified_s) < since_s
            if not stale:
                return _parsed(path, data, launcher_rank(launcher, rank))
        if time.monotonic() > deadline:
            zero = launcher_rank(launcher, 0).split(" ", 1)[1]
            left = "; the file there is an earlier job's (remove it)" if stale else ""
            raise ConfigError(
                f"{launcher_rank(launcher, rank)}: {zero} published no store address in {path} within "
                f"{timeout_s:g} s (it did not start, or the directory is not shared between the job's nodes: "
                f"set {RENDEZVOUS_DIR_ENV} to one that is, or {_given(launcher)}){left}"
            )
        time.sleep(POLL_S)


def _published_s(data: bytes, modified_s: float) -> float:
    """When a file was published: the time rank 0 recorded in it, else (a file of an older collbench,
    or not rank 0's, which :func:`_parsed` then refuses) its modification time."""
    with contextlib.suppress(ValueError, TypeError, AttributeError):
        recorded = json.loads(data[:MAX_FILE_BYTES]).get("published_s")
        if isinstance(recorded, (int, float)) and not isinstance(recorded, bool):
            return float(recorded)
    return modified_s


def _parsed(path: Path, data: bytes, who: str) -> tuple[str, int]:
    try:
        record = json.loads(data[:MAX_FILE_BYTES])
        addr, port = record["addr"], record["port"]
    except (ValueError, TypeError, KeyError):
        record, addr, port = None, None, None
    if not isinstance(addr, str) or not addr or isinstance(port, bool) or not isinstance(port, int):
        raise ConfigError(f"{who}: {path} is not a store address {who.split()[1]} 0 wrote; remove it")
    if not 0 < port < 65536:
        raise ConfigError(f"{who}: {path} names port {port}, not a TCP port")
    return addr, port
