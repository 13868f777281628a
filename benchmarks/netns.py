"""A small cluster of Linux network namespaces with shaped links, for the probe test and benchmarks.

One namespace per rank and one bridge namespace: rank i's namespace holds ``cbv<i>`` (address
``10.213.77.<i+1>/24``, a private subnet used only inside these namespaces), its veth peer sits on
the bridge. Every rank's egress is shaped per destination with htb: one class per peer at
``rates_mbit[i][j]``, selected by a u32 filter on the peer's address, so each directed pair of
ranks has its own rate. Needs root, ``ip`` and ``tc`` (sch_htb); :func:`netns_unavailable` says why
not where they are missing. Everything is removed on exit, whatever happened.

Ranks are started as a torchrun-style job (RANK, WORLD_SIZE, MASTER_ADDR (rank 0's address),
MASTER_PORT and LOCAL_RANK set), or with the variables srun or Open MPI's mpirun set (``launcher=``),
one rank per "host" (or ``ranks_per_host`` consecutive ranks a host); GLOO_SOCKET_IFNAME names the
rank's veth, and COLLBENCH_TEST_BOOT_ID (a test hook) gives each "host" a boot id of its own, so that
collbench counts each host as a node (each namespace, with one rank per host).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

SUBNET = "10.213.77"
PORT = 29517  # inside the namespaces nothing else listens: a fixed port cannot clash there


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


def netns_unavailable() -> str | None:
    """Why namespaces cannot be built here (None when they can): tries to make and delete one."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "iproute2 (ip, tc) is not installed"
    if os.geteuid() != 0:
        return "building network namespaces needs root"
    name = f"cbprobe{os.getpid()}"
    made = _run("ip", "netns", "add", name, check=False)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    try:
        veth = _run(
            "ip", "link", "add", f"cbt{os.getpid() % 10000}", "type", "veth", "peer", "name", "cbtp", check=False
        )
        if veth.returncode != 0:
            return f"cannot create veth pairs: {veth.stderr.strip()}"
        _run("ip", "link", "del", f"cbt{os.getpid() % 10000}", check=False)
    finally:
        _run("ip", "netns", "del", name, check=False)
    return None


class NamespaceCluster:
    """``with NamespaceCluster(rates) as c:`` builds the namespaces; ``c.start(...)`` runs ranks.

    ``ranks_per_host``: how many consecutive ranks the launcher says share a host (1: every namespace
    is a host). A cluster shaped as hosts of k ranks (fast pairs inside, slow ones across) says so to
    the launcher, so the rows' node count is the hosts', not one node per namespace."""

    def __init__(self, rates_mbit: Sequence[Sequence[float]], *, ranks_per_host: int = 1) -> None:
        n = len(rates_mbit)
        if n < 2 or any(len(row) != n for row in rates_mbit):
            raise ValueError("rates_mbit must be a square matrix over at least 2 ranks")
        if ranks_per_host < 1 or n % ranks_per_host:
            raise ValueError(f"ranks_per_host must divide the {n} ranks, got {ranks_per_host}")
        self.ranks_per_host = ranks_per_host
        self.rates_mbit = [list(map(float, row)) for row in rates_mbit]
        self.n = n
        tag = os.getpid() % 100000
        self.bridge = f"cbbr{tag}"
        self.ranks = [f"cbr{tag}x{i}" for i in range(n)]
        self._made: list[str] = []

    def address(self, rank: int) -> str:
        return f"{SUBNET}.{rank + 1}"

    def __enter__(self) -> NamespaceCluster:
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ns(self, ns: str, *args: str) -> None:
        _run("ip", "netns", "exec", ns, *args)

    def _build(self) -> None:
        _run("ip", "netns", "add", self.bridge)
        self._made.append(self.bridge)
        self._ns(self.bridge, "ip", "link", "add", "br0", "type", "bridge")
        self._ns(self.bridge, "ip", "link", "set", "br0", "up")
        for i, ns in enumerate(self.ranks):
            _run("ip", "netns", "add", ns)
            self._made.append(ns)
            self._ns(ns, "ip", "link", "set", "lo", "up")
            # Create the pair inside the rank's namespace, then move the peer to the bridge.
            self._ns(ns, "ip", "link", "add", f"cbv{i}", "type", "veth", "peer", "name", f"cbp{i}")
            self._ns(ns, "ip", "link", "set", f"cbp{i}", "netns", self.bridge)
            self._ns(ns, "ip", "addr", "add", f"{self.address(i)}/24", "dev", f"cbv{i}")
            self._ns(ns, "ip", "link", "set", f"cbv{i}", "up")
            self._ns(self.bridge, "ip", "link", "set", f"cbp{i}", "master", "br0")
            self._ns(self.bridge, "ip", "link", "set", f"cbp{i}", "up")
            self._shape(i)

    def _shape(self, i: int) -> None:
        ns, dev = self.ranks[i], f"cbv{i}"
        fast = max(max(row) for row in self.rates_mbit) * 10
        self._ns(ns, "tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "999")
        # Unmatched traffic (ARP) is not shaped to a peer: a generous default class.
        self._ns(ns, "tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:999", "htb", "rate", f"{fast}mbit")
        for j in range(self.n):
            if j == i:
                continue
            rate = self.rates_mbit[i][j]
            self._ns(
                ns, "tc", "class", "add", "dev", dev, "parent", "1:", "classid", f"1:{j + 1}",
                "htb", "rate", f"{rate}mbit", "ceil", f"{rate}mbit", "burst", "32k", "cburst", "32k",
            )  # fmt: skip
            self._ns(
                ns, "tc", "filter", "add", "dev", dev, "protocol", "ip", "parent", "1:", "prio", "1",
                "u32", "match", "ip", "dst", f"{self.address(j)}/32", "flowid", f"1:{j + 1}",
            )  # fmt: skip

    def close(self) -> None:
        """Delete every namespace this cluster made (their veths go with them)."""
        while self._made:
            _run("ip", "netns", "del", self._made.pop(), check=False)

    def launcher_env(self, rank: int, launcher: str) -> dict[str, str]:
        """The variables ``launcher`` (torchrun, srun or mpirun) sets for ``rank``, ``ranks_per_host``
        consecutive ranks a host."""
        k = self.ranks_per_host
        host, local = divmod(rank, k)
        if launcher == "torchrun":
            return {
                "RANK": str(rank),
                "WORLD_SIZE": str(self.n),
                "LOCAL_RANK": str(local),
                "LOCAL_WORLD_SIZE": str(k),
                "MASTER_ADDR": self.address(0),
                "MASTER_PORT": str(PORT),
            }
        if launcher == "srun":
            # srun(1)'s output variables (each host in the node list by its first rank's address). No
            # MASTER_ADDR: task 0 publishes its store's address, its GLOO_SOCKET_IFNAME veth's, in the
            # working directory (collbench/runtime/launch/rendezvous.py).
            hosts = ",".join(str(h * k + 1) for h in range(self.n // k))
            return {
                "SLURM_JOB_ID": "77",
                "SLURM_STEP_ID": "0",
                "SLURM_PROCID": str(rank),
                "SLURM_NTASKS": str(self.n),
                "SLURM_STEP_NUM_TASKS": str(self.n),
                "SLURM_LOCALID": str(local),
                "SLURM_NODEID": str(host),
                "SLURM_STEP_TASKS_PER_NODE": f"{k}(x{self.n // k})",
                "SLURM_JOB_NODELIST": f"{SUBNET}.[{hosts}]" if k > 1 else f"{SUBNET}.[1-{self.n}]",
                "MASTER_PORT": str(PORT),
            }
        if launcher == "mpirun":
            # What Open MPI 4.1's mpirun sets (OMPI_COMM_WORLD_*); across hosts it needs MASTER_ADDR.
            return {
                "OMPI_COMM_WORLD_RANK": str(rank),
                "OMPI_COMM_WORLD_SIZE": str(self.n),
                "OMPI_COMM_WORLD_LOCAL_RANK": str(local),
                "OMPI_COMM_WORLD_LOCAL_SIZE": str(k),
                "MASTER_ADDR": self.address(0),
                "MASTER_PORT": str(PORT),
            }
        raise ValueError(f"unknown launcher {launcher!r}: torchrun, srun or mpirun")

    def start(
        self,
        rank: int,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: dict[str, str] | None = None,
        launcher: str = "torchrun",
    ) -> subprocess.Popen[str]:
        """Start ``argv`` as rank ``rank`` inside its namespace, in ``launcher``'s environment."""
        # Only the chosen launcher's variables: another's, inherited, would win the detection.
        inherited = ("OMPI_", "SLURM_", "PMI_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_")
        full = {k: v for k, v in os.environ.items() if not k.startswith(inherited)}
        full.update(env or {})
        full.update(self.launcher_env(rank, launcher), GLOO_SOCKET_IFNAME=f"cbv{rank}")
        # The namespaces share this machine's host name and boot id: a boot id of its own per "host" is
        # collbench's test hook (runtime/launch/membership.py) that makes each one a node.
        full["COLLBENCH_TEST_BOOT_ID"] = f"netns-host-{rank // self.ranks_per_host}"
        return subprocess.Popen(
            ["ip", "netns", "exec", self.ranks[rank], *argv],
            cwd=cwd,
            env=full,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def run_job(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        timeout_s: float,
        env: dict[str, str] | None = None,
        launcher: str = "torchrun",
    ) -> list[str]:
        """Run ``argv`` on every rank at once; return each rank's output. Raises RuntimeError on failure."""
        procs = [self.start(r, argv, cwd=cwd, env=env, launcher=launcher) for r in range(self.n)]
        outputs: list[str] = []
        failed = []
        for r, p in enumerate(procs):
            try:
                out, _ = p.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                raise RuntimeError(f"rank {r} did not finish within {timeout_s} s") from None
            outputs.append(out)
            if p.returncode != 0:
                failed.append(f"rank {r} exited {p.returncode}:\n{out[-2000:]}")
        if failed:
            raise RuntimeError("\n".join(failed))
        return outputs


PYTHON = sys.executable
