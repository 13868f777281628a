#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for running collbench under the real srun (the tests in
# tests/slurm, and trying the Slurm commands of docs/clusters.md). Debian's slurm-wlm and munge must be
# installed (`apt-get install slurm-wlm munge`); run as root.
#
# Writes slurm.conf (default /etc/slurm/slurm.conf; SLURM_CONF overrides) for this host with the
# CPUs and memory `slurmd -C` finds here, creates the munge key if there is none, and starts munged,
# slurmctld and slurmd where they are not running, then waits until the node takes jobs. Idempotent:
# run it again and it rewrites nothing that is unchanged and starts only what is not running. It
# never overwrites a slurm.conf it did not write (a real cluster's): it stops with one line instead.
# Exit status 0 when `srun` can run a job step here; otherwise one line on stderr saying why, and 1.
set -euo pipefail

MARK="# written by collbench scripts/slurm-local.sh"
CONF=${SLURM_CONF:-/etc/slurm/slurm.conf}
STATE=/var/lib/slurm-collbench
LOGS=/var/log/slurm-collbench

die() { echo "slurm-local: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (munged, slurmctld and slurmd are system daemons)"
for cmd in munged mungekey slurmctld slurmd scontrol sinfo srun; do
  command -v "$cmd" >/dev/null 2>&1 || die "$cmd is missing: apt-get install slurm-wlm munge"
done
if [ -e "$CONF" ] && ! grep -qxF "$MARK" "$CONF"; then
  die "$CONF exists and was not written by this script (a real cluster's?); left as it is"
fi

host=$(hostname -s)
# slurmd -C prints this node's line as slurmd sees it: NodeName=... CPUs=... RealMemory=...
node_line=$(slurmd -C | head -n 1)
case "$node_line" in
  NodeName=*) ;;
  *) die "slurmd -C printed no node line: $node_line" ;;
esac
node_line=$(printf '%s' "$node_line" | sed -E "s/^NodeName=[^ ]+/NodeName=$host/")

mkdir -p "$(dirname "$CONF")" "$STATE/ctld" "$STATE/d" "$LOGS"
new=$(mktemp)
trap 'rm -f "$new"' EXIT
cat >"$new" <<EOF
$MARK
# One node, this machine; jobs run as the user who submits them.
ClusterName=collbench
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
# No cgroups: containers and CI runners often cannot delegate them.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
$node_line NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
changed=0
if ! cmp -s "$new" "$CONF"; then
  cp "$new" "$CONF"
  changed=1
fi
export SLURM_CONF=$CONF

# munge: the key, its run directory, the daemon (as the munge user, as Debian's service runs it).
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
fi
mkdir -p /run/munge
chown munge:munge /run/munge
if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
  runuser -u munge -- munged || die "munged did not start"
  for _ in $(seq 50); do munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n </dev/null | unmunge >/dev/null 2>&1 || die "munged started but credentials do not verify"
fi

running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
if [ "$changed" = 1 ]; then
  # A changed configuration is read on start: restart what runs with the old one.
  for pid in "$STATE/slurmd.pid" "$STATE/slurmctld.pid"; do
    if running "$pid"; then kill "$(cat "$pid")"; for _ in $(seq 50); do running "$pid" || break; sleep 0.1; done; fi
  done
fi
running "$STATE/slurmctld.pid" || slurmctld || die "slurmctld did not start (see $LOGS/slurmctld.log)"
for _ in $(seq 100); do scontrol ping >/dev/null 2>&1 && break; sleep 0.1; done
scontrol ping >/dev/null 2>&1 || die "slurmctld does not answer (see $LOGS/slurmctld.log)"
running "$STATE/slurmd.pid" || slurmd || die "slurmd did not start (see $LOGS/slurmd.log)"

# The node takes jobs once slurmd has registered; a node left down by an earlier run is resumed.
for _ in $(seq 150); do
  state=$(sinfo -h -n "$host" -o %T 2>/dev/null | head -n 1)
  case "$state" in
    idle* | mixed* | allocated*) break ;;
    down* | drain*) scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1 || true ;;
  esac
  sleep 0.2
done
case "$state" in
  idle* | mixed* | allocated*) ;;
  *) die "node $host is '${state:-unknown}', not taking jobs (see $LOGS/slurmd.log)" ;;
esac
echo "slurm-local: node $host up ($(printf '%s' "$node_line" | grep -oE 'CPUs=[0-9]+') $(printf '%s' "$node_line" | grep -oE 'RealMemory=[0-9]+') MB); config $CONF"
