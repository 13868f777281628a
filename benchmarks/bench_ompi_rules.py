"""Does a job get faster with `export ompi-rules` (and `export ompi-rankfile`)? Measured, side by side.

A plain MPI program (ompi_bench.c, built with mpicc here) runs an all-reduce loop at the tune's sizes
and a small data-parallel step loop (gradients reduced bucket by bucket between compute passes). It
runs under `mpirun` as Open MPI's fixed decisions (no rules, mpirun's rank order) and with collbench's
exports (the rules file, plus the rankfile across the namespace cluster), one launch each, alternating
which goes first, `--rounds` times. Per size: the ratio of the defaults' median time to the exports'
(above 1: the exports are faster), its geometric mean over rounds, and its noise (the 95% interval of
that mean from the rounds' log ratios, Student t, as a factor). A size is "slower beyond noise" when
the ratio times that factor is still below 1. Each launch's time at a size is the p25 of its calls.

Where the rules come from (the whole collbench path, nothing hand-written):

* this machine (`--where local`): `collbench tune --backend mpi --ranks 2 --quick`, then
  `collbench export ompi-rules`. Two ranks: no rankfile (every order of two ranks is the same ring).
* the namespace cluster (`--where netns`, needs root): four hosts n0..n3 (benchmarks/ompi_netns.py,
  mpirun through an rsh agent entering each namespace), pairs n0-n1 and n2-n3 shaped to `--slow`
  Mbit/s and the others to `--fast`. collbench's probe measures the links (torchrun-style, inside the
  namespaces) into a topology; the ring planned on it (as `export ompi-rankfile --topology` plans it)
  is given to the tune's mpirun as a rankfile, so Open MPI's algorithms are measured in the order the
  job will run them; `collbench tune --backend mpi --ranks 4 --quick` then runs from the bridge
  namespace, and `export ompi-rules` and `export ompi-rankfile --topology` (checked to give the same
  order) make the exports. Defaults: the hostfile's rank order n0, n1, n2, n3.

    python benchmarks/bench_ompi_rules.py [--where local|netns|both] [--rounds 4]

Prints one table per place; `--keep DIR` keeps the profiles, exports and raw times.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ompi_netns import TCP_ONLY, MpiNamespaceCluster, netns  # noqa: E402

Launch = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]
Times = dict[str, float]
"""``allreduce SIZE`` / ``step SIZE`` -> the p25 of one launch's calls (or steps), microseconds: the
statistic tune decides on, least moved by the bursts in which a loaded machine deschedules a rank."""
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}
"""Two-sided 95% Student t quantiles by degrees of freedom (rounds - 1); 1.96 beyond."""

_PROBE = """
import json, os, sys
from collbench.runtime.probe import ProbeConfig, probe_topology
topo = probe_topology(4, timeout_s=120.0, config=ProbeConfig(repeats=2, pings=5, target_s=0.2))
if os.environ["RANK"] == "0":
    with open(sys.argv[1], "w") as f:
        json.dump(topo.to_dict(), f)
"""


def collbench_cli() -> list[str]:
    found = Path(sys.executable).with_name("collbench")
    return [str(found)] if found.exists() else [shutil.which("collbench") or "collbench"]


def run(cmd: Sequence[str], *, env: dict[str, str] | None = None, timeout_s: float = 1800) -> str:
    done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout_s, env=env)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {shlex.join(cmd)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr


def tune_sizes(results: Path) -> list[int]:
    """The all-reduce sizes the tune measured (its results file), smallest first."""
    sizes = set()
    for line in results.read_text().splitlines():
        row = json.loads(line)
        if row.get("op") == "all-reduce":
            sizes.add(int(row["size_bytes"]))
    return sorted(sizes)


def parse_times(output: str) -> Times:
    out: Times = {}
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 6 and parts[0] in ("allreduce", "step"):
            out[f"{parts[0]} {parts[1]}"] = float(parts[3])  # the p25, the time collbench's decisions compare
    return out


def interleave(configs: dict[str, Launch], argv: Sequence[str], rounds: int) -> dict[str, list[Times]]:
    """Each config launched once per round, the first of the pair alternating between rounds."""
    names = list(configs)
    got: dict[str, list[Times]] = {name: [] for name in names}
    for i in range(rounds):
        for name in names if i % 2 == 0 else reversed(names):
            done = configs[name](argv)
            if done.returncode != 0:
                raise SystemExit(f"{name} launch failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
            got[name].append(parse_times(done.stdout))
        print(f"  round {i + 1}/{rounds} done", flush=True)
    return got


def ratios(base: list[Times], other: list[Times]) -> list[tuple[str, float, float, float, float]]:
    """(key, base median us, other median us, ratio base/other (geometric mean over rounds), noise factor:
    the 95% interval of that mean, as a factor)."""
    rows = []
    for key in base[0]:
        logs = [math.log(b[key] / o[key]) for b, o in zip(base, other, strict=True) if key in b and key in o]
        mean = statistics.fmean(logs)
        err = statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else float("inf")
        err *= T95.get(len(logs) - 1, 1.96)
        rows.append(
            (
                key,
                statistics.median(b[key] for b in base),
                statistics.median(o[key] for o in other),
                math.exp(mean),
                math.exp(err),
            )
        )
    return rows


def report(title: str, got: dict[str, list[Times]], base: str, other: str) -> list[tuple[str, float, float]]:
    print(f"\n{title}: {base} vs {other}, {len(got[base])} rounds, load average {os.getloadavg()[0]:.1f}")
    print(f"{'what':>20} {base + ' us':>14} {other + ' us':>14} {'ratio':>8} {'noise':>7}  verdict")
    out = []
    for key, b, o, ratio, noise in ratios(got[base], got[other]):
        if ratio * noise < 1:
            verdict = "slower beyond noise"
        elif ratio / noise > 1:
            verdict = "faster beyond noise"
        else:
            verdict = "within noise"
        print(f"{key:>20} {b:14.1f} {o:14.1f} {ratio:7.2f}x {'x/' + format(noise, '.2f'):>7}  {verdict}")
        out.append((key, ratio, noise))
    return out


def build(work: Path) -> Path:
    program = work / "ompi_bench"
    run(["mpicc", "-O2", "-Wall", "-o", str(program), str(HERE / "ompi_bench.c")])
    return program


def bench_local(work: Path, args: argparse.Namespace) -> None:
    program = build(work)
    profile = work / "local.yaml"
    print("tune --backend mpi --ranks 2 --quick on this machine ...", flush=True)
    run(
        [
            *collbench_cli(),
            "tune",
            "--backend",
            "mpi",
            "--ranks",
            "2",
            "--quick",
            "--op",
            "all-reduce",
            "-O",
            str(profile),
        ]
    )
    rules = work / "local.rules"
    said = run([*collbench_cli(), "export", "ompi-rules", str(profile), "-O", str(rules)])
    print(said.strip())
    sizes = tune_sizes(work / "local-results.jsonl")
    argv = [
        str(program),
        str(args.budget),
        str(args.step_bytes),
        str(args.bucket_bytes),
        str(args.steps),
        *map(str, sizes),
    ]
    base = ["mpirun", "--allow-run-as-root", "-np", "2"]
    rule_opts = ["--mca", "coll_tuned_use_dynamic_rules", "1", "--mca", "coll_tuned_dynamic_rules_filename", str(rules)]
    configs: dict[str, Launch] = {
        "defaults": lambda a: subprocess.run([*base, *a], capture_output=True, text=True, timeout=1800),
        "rules": lambda a: subprocess.run([*base, *rule_opts, *a], capture_output=True, text=True, timeout=1800),
    }
    report("this machine, 2 ranks", interleave(configs, argv, args.rounds), "defaults", "rules")


def bench_netns(work: Path, args: argparse.Namespace) -> None:
    from collbench.exporters.ompi_rankfile import places_along, planned_layout, rankfile_entries
    from collbench.profile.document import Profile
    from collbench.topology.model import Topology

    why = netns.netns_unavailable()
    if why is not None:
        print(f"namespace cluster skipped: {why}")
        return
    program = build(work)
    slow = {frozenset((0, 1)), frozenset((2, 3))}
    rates = [[args.slow if frozenset((i, j)) in slow else args.fast for j in range(4)] for i in range(4)]
    with MpiNamespaceCluster(rates, work) as cluster:
        print(f"namespace cluster: pairs n0-n1, n2-n3 at {args.slow} Mbit/s, the others at {args.fast}; probing ...")
        topo_path = work / "netns-topology.json"
        cluster.cluster.run_job([sys.executable, "-c", _PROBE, str(topo_path)], cwd=REPO, timeout_s=600.0)
        topology = Topology.from_dict(json.loads(topo_path.read_text()))
        ring = planned_layout(topology, 4).rings[0]
        print(f"  probe: {[(lk.a, lk.b, round(lk.bandwidth_gbps * 8e3)) for lk in topology.links]} Mbit/s; ring {ring}")
        tune_rankfile = work / "netns-tune.rankfile"
        tune_rankfile.write_text("\n".join(rankfile_entries(places_along(ring, 4), cluster.hosts, "0-1")) + "\n")
        mpirun_args = [
            "--hostfile", str(cluster.hostfile), "--mca", "plm_rsh_agent", str(cluster.agent), *TCP_ONLY,
            "--rankfile", str(tune_rankfile),
        ]  # fmt: skip
        env = {**os.environ, "COLLBENCH_MPIRUN_ARGS": shlex.join(mpirun_args)}
        profile = work / "netns.yaml"
        print("tune --backend mpi --ranks 4 --quick across the namespaces (ranks along the ring) ...", flush=True)
        tune = [*collbench_cli(), "tune", "--backend", "mpi", "--ranks", "4", "--quick", "--op", "all-reduce"]
        tune += ["-b", str(args.netns_min), "-e", str(args.netns_max), "-O", str(profile)]
        run(["ip", "netns", "exec", cluster.cluster.bridge, *tune], env=env, timeout_s=3600)
        rules = work / "netns.rules"
        print(run([*collbench_cli(), "export", "ompi-rules", str(profile), "-O", str(rules)]).strip())
        rankfile = work / "netns.rankfile"
        hosts = ",".join(cluster.hosts)
        export = ["export", "ompi-rankfile", str(profile), "--topology", str(topo_path), "--hosts", hosts]
        run([*collbench_cli(), *export, "--slots", "0-1", "-O", str(rankfile)])
        same = [ln.split("#")[0].strip() for ln in rankfile.read_text().splitlines() if not ln.startswith("#")]
        ran = [ln.split("#")[0].strip() for ln in tune_rankfile.read_text().splitlines()]
        assert same == ran, f"export ompi-rankfile gave {same}, the tune ran {ran}"
        print(f"  profile {Profile.load(profile).shapes_label()}; rankfile {same}")
        sizes = tune_sizes(work / "netns-results.jsonl")
        argv = [
            str(program), str(args.budget), str(args.step_bytes), str(args.bucket_bytes), str(args.steps),
            *map(str, sizes),
        ]  # fmt: skip
        rule_opts = [
            "--mca", "coll_tuned_use_dynamic_rules", "1", "--mca", "coll_tuned_dynamic_rules_filename", str(rules),
            "--rankfile", str(rankfile),
        ]  # fmt: skip
        configs: dict[str, Launch] = {
            "defaults": lambda a: cluster.mpirun(a, options=["--bind-to", "none"], timeout_s=1800),
            "rules+rankfile": lambda a: cluster.mpirun(a, options=rule_opts, timeout_s=1800),
        }
        got = interleave(configs, argv, args.rounds)
    report("namespace cluster, 4 hosts", got, "defaults", "rules+rankfile")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--where", choices=("local", "netns", "both"), default="both")
    ap.add_argument("--rounds", type=int, default=4, help="launches of each configuration, interleaved")
    ap.add_argument("--budget", type=float, default=0.3, help="seconds of timed calls per size and launch")
    ap.add_argument("--step-bytes", type=int, default=4 << 20, help="gradient bytes of the step loop")
    ap.add_argument("--bucket-bytes", type=int, default=1 << 20, help="bytes per reduced bucket")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--fast", type=float, default=400.0, help="Mbit/s of the fast pairs")
    ap.add_argument("--slow", type=float, default=50.0, help="Mbit/s of the slow pairs n0-n1, n2-n3")
    ap.add_argument("--netns-min", default="16K", help="smallest size the namespace tune measures")
    ap.add_argument("--netns-max", default="4M", help="largest size the namespace tune measures")
    ap.add_argument("--keep", type=Path, help="keep profiles, exports and results here")
    args = ap.parse_args()
    if not (shutil.which("mpirun") and shutil.which("mpicc")):
        print("skipped: Open MPI (mpirun, mpicc) is not installed")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if args.where in ("local", "both"):
            bench_local(work, args)
        if args.where in ("netns", "both"):
            bench_netns(work, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
