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
leave a file a later job of the same port reads. A reader under Hydra takes a file only once the store
it names answers (:func:`store_answers`): a killed rank 0's store died with it, so its address refuses
a connection, whenever that job ran; the reader waits for rank 0 to replace the file whole. No clock
is compared (the hosts' clocks, and when each host's proxy started, differ). A port some other program
has bound since would answer: the join that follows then fails, naming the address.
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

from collbench.errors import ConfigError, RankZeroEndedError
from collbench.text import printable

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


def under_hydra(pid: int | None = None) -> bool:
    """Whether this process (or ``pid``) runs under a Hydra proxy, whose job file names can repeat."""
    return _hydra_proxy(os.getpid() if pid is None else pid) is not None


PROBE_S = 1.0
"""How long a reader waits for the store a file names to accept a connection, each time it looks."""


def store_answers(addr: str, port: int, timeout_s: float = PROBE_S) -> bool | None:
    """Whether something listens at ``addr:port``: True when a connection is accepted (it is closed at
    once; torch's store takes a client that leaves before a request as gone), False when it is refused
    (no listener: the store that published it is gone), None when no answer came within ``timeout_s``
    (the host unreachable or down) or the name does not resolve."""
    try:
        with socket.create_connection((addr, port), timeout=timeout_s):
            return True
    except ConnectionRefusedError:
        return False
    except OSError:
        return None


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
    killed job left there); removed at exit. Its store must listen already: readers under Hydra take
    the file only once that store answers."""
    text = json.dumps({"addr": addr, "port": port, "pid": os.getpid()})
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


def publish_ended(path: Path, proxy: int | None = None) -> None:
    """Say in ``path`` that task 0 ended before its store started (an error of its own, which it
    printed), so the tasks waiting for the file end at once (:class:`RankZeroEndedError`) rather than
    wait out the timeout and blame the directory. srun (unless ``--kill-on-bad-exit``) and MPICH's
    Hydra, unlike Open MPI's mpirun and torchrun, leave a job's other ranks running when one exits
    with an error. Under Hydra ``proxy`` is the pid of rank 0's ``hydra_pmi_proxy``: a file name there
    is reused by later jobs, and only a rank under that same proxy (this job, this host) takes the
    record as its job's. The file stays: the ranks that read it are not counted. Best effort: a
    directory that cannot be written leaves the others their timeout."""
    text = json.dumps({"ended": True, "pid": os.getpid(), "proxy": proxy})
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text)
        os.replace(temporary, path)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()


def withdraw(path: Path) -> None:
    """Remove the published file (every task has read it, or the job is over)."""
    with contextlib.suppress(OSError):
        path.unlink()


def _given(launcher: str) -> str:
    """What a user sets instead of a published address: mpirun's rank 0 is at ``MASTER_ADDR`` already."""
    return "MASTER_ADDR and MASTER_PORT" if launcher == "srun" else "MASTER_PORT"


def read_published(
    path: Path, timeout_s: float, rank: int, launcher: str = "srun", check_live: bool = False
) -> tuple[str, int]:
    """Task 0's store address and port from ``path``, waiting for it up to ``timeout_s``. With
    ``check_live`` (under Hydra, where a later job's file has an earlier one's name) a file whose store
    does not answer (:func:`store_answers`) is an earlier job's, left by a rank 0 that was killed: it is
    waited past, as if not there, until rank 0 replaces it.

    Raises ConfigError when it does not come, or holds something other than what task 0 writes;
    RankZeroEndedError when task 0 ended before its store started (:func:`publish_ended`).
    """
    deadline = time.monotonic() + timeout_s
    dead: tuple[str, int, bool | None] | None = None
    while True:
        try:
            with path.open("rb") as file:
                data = file.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            data = None
        except OSError as exc:
            raise ConfigError(f"{launcher_rank(launcher, rank)}: cannot read {path} ({exc.strerror or exc})") from None
        if data is not None and check_live and _ended_elsewhere(data):
            data = None  # an earlier Hydra job's end (or this one's on another host): waited past
        if data is not None:
            addr, port = _parsed(path, data, launcher_rank(launcher, rank))
            answered = store_answers(addr, port) if check_live else True
            if answered:
                return addr, port
            dead = (addr, port, answered)
        if time.monotonic() > deadline:
            zero = launcher_rank(launcher, 0).split(" ", 1)[1]
            raise ConfigError(
                f"{launcher_rank(launcher, rank)}: {zero} published no store address in {path} within "
                f"{timeout_s:g} s (it did not start, or the directory is not shared between the job's nodes: "
                f"set {RENDEZVOUS_DIR_ENV} to one that is, or {_given(launcher)}){_dead_text(dead)}"
            )
        time.sleep(POLL_S)


def _ended_elsewhere(data: bytes) -> bool:
    """Whether ``data`` is an ended record (:func:`publish_ended`) of a rank 0 under another Hydra proxy
    than this process's: a later job reusing the file's name, or a rank on another host of the job,
    which cannot tell an earlier job's record from its own and so waits as before."""
    try:
        record = json.loads(data[:MAX_FILE_BYTES])
    except ValueError:
        return False
    if not isinstance(record, dict) or record.get("ended") is not True:
        return False
    own = _hydra_proxy(os.getpid())
    return own is None or record.get("proxy") != own[0]


def hydra_proxy_pid() -> int | None:
    """The pid of the Hydra proxy above this process; None when it runs under none."""
    found = _hydra_proxy(os.getpid())
    return None if found is None else found[0]


def _dead_text(dead: tuple[str, int, bool | None] | None) -> str:
    """What the reader found in place of rank 0's file, where it found a file: the store it names gone
    (refused: an earlier job's file) or not answering (its host gone, or not reachable from here)."""
    if dead is None:
        return ""
    addr, port, answered = dead
    where = printable(f"{addr}:{port}")
    if answered is False:
        return f"; the file there names a store no one listens on ({where}): an earlier job's (remove it)"
    return (
        f"; the store the file there names ({where}) does not answer from here: rank 0's host is not "
        "reachable, or the file is an earlier job's from a host that is gone (remove it)"
    )


def _parsed(path: Path, data: bytes, who: str) -> tuple[str, int]:
    try:
        record = json.loads(data[:MAX_FILE_BYTES])
        if isinstance(record, dict) and record.get("ended") is True:
            zero = f"{who.split()[1]} 0"
            raise RankZeroEndedError(f"{who}: {zero} ended before the job's store started (its own error says why)")
        addr, port = record["addr"], record["port"]
    except (ValueError, TypeError, KeyError):
        record, addr, port = None, None, None
    if not isinstance(addr, str) or not addr or isinstance(port, bool) or not isinstance(port, int):
        raise ConfigError(f"{who}: {path} is not a store address {who.split()[1]} 0 wrote; remove it")
    if not 0 < port < 65536:
        raise ConfigError(f"{who}: {path} names port {port}, not a TCP port")
    return addr, port
