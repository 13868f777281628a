"""Open MPI's mpirun across the namespace cluster of netns.py: one "host" per network namespace.

mpirun starts one orted per host through its rsh launcher (``plm_rsh_agent``); here the agent is a
script that, instead of ssh, enters the host's namespace (``ip netns exec``) with a UTS namespace of
its own whose hostname is the host's name (n0, n1, ...), so each orted and its ranks see their own host
and Open MPI treats them as separate nodes. mpirun itself runs in the bridge namespace, on an address
of the cluster's subnet (``.254``) that every rank reaches unshaped: only rank-to-rank traffic goes
through the shaped pairs. Ranks talk over TCP (``btl self,tcp``), on the cluster's subnet alone, so
no shared memory between "hosts" that are really one machine. Needs root (as netns.py does).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType


def _netns() -> ModuleType:
    """netns.py beside this file, under the name tests/netns loads it as (a plain ``import netns`` would
    find the tests' package of that name when the tests run)."""
    name = "collbench_bench_netns"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("netns.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


netns = _netns()
SUBNET: str = netns.SUBNET

MPIRUN_ADDRESS = f"{SUBNET}.254"
TCP_ONLY = (
    "--mca", "btl", "self,tcp",
    "--mca", "btl_tcp_if_include", f"{SUBNET}.0/24",
    "--mca", "oob_tcp_if_include", f"{SUBNET}.0/24",
    "--mca", "mpi_yield_when_idle", "1",
)  # fmt: skip
"""Rank traffic over TCP on the cluster's subnet only; and, since every "host" is this one machine's
few cores, ranks that wait yield them (mpirun sees one slot per host, so it would let them spin)."""


def _agent(hosts: Sequence[str], namespaces: Sequence[str]) -> str:
    cases = "\n".join(f"  {host}) ns={ns} ;;" for host, ns in zip(hosts, namespaces, strict=True))
    return f"""#!/bin/sh
# mpirun's rsh agent for the namespace cluster: "<agent> HOST COMMAND..." runs COMMAND in HOST's namespace.
host="$1"; shift
case "$host" in
{cases}
  *) echo "namespace agent: unknown host $host" >&2; exit 1 ;;
esac
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
"""


class MpiNamespaceCluster:
    """``with MpiNamespaceCluster(rates, work) as c: c.mpirun(...)``: hosts n0..n(N-1), one per namespace."""

    def __init__(self, rates_mbit: Sequence[Sequence[float]], work: Path) -> None:
        self.cluster = netns.NamespaceCluster(rates_mbit)
        self.work = work
        self.hosts = [f"n{i}" for i in range(self.cluster.n)]
        self.agent = work / "netns-rsh-agent.sh"
        self.hostfile = work / "netns-hosts"

    def __enter__(self) -> MpiNamespaceCluster:
        self.cluster.__enter__()
        try:
            bridge = self.cluster.bridge
            subprocess.run(["ip", "netns", "exec", bridge, "ip", "link", "set", "lo", "up"], check=True)
            subprocess.run(
                ["ip", "netns", "exec", bridge, "ip", "addr", "add", f"{MPIRUN_ADDRESS}/24", "dev", "br0"], check=True
            )
            self.agent.write_text(_agent(self.hosts, self.cluster.ranks))
            os.chmod(self.agent, 0o755)
            self.hostfile.write_text("".join(f"{h} slots=1\n" for h in self.hosts))
        except BaseException:
            self.cluster.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.cluster.close()

    def mpirun(
        self,
        argv: Sequence[str],
        *,
        options: Sequence[str] = (),
        hostfile: bool = True,
        timeout_s: float = 600.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``mpirun -np N [options] argv`` over the hosts (the hostfile's, one rank each, unless
        ``hostfile`` is False and ``options`` name them with ``-H``)."""
        command = [
            "ip", "netns", "exec", self.cluster.bridge,
            "mpirun", "--allow-run-as-root", "-np", str(self.cluster.n),
            *(["--hostfile", str(self.hostfile)] if hostfile else []),
            "--mca", "plm_rsh_agent", str(self.agent),
            *TCP_ONLY,
            *options,
            *argv,
        ]  # fmt: skip
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
