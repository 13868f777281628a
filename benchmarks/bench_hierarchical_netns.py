"""Hierarchical all-reduce against ring and two-tree on two "hosts" of two ranks (shaped namespaces).

Four ranks, one per network namespace (benchmarks/netns.py), every directed pair shaped with htb:
ranks 0-1 and 2-3 are the two hosts (fast pairs, ``--fast``), every pair across them is the network
(``--slow``). The layout says so (``Layout.nodes``: ((0, 1), (2, 3)), what a topology of two hosts
gives); the ring is rank order 0-1-2-3, so it crosses the network twice, as a node-aware ring does.
Each rank runs every schedule with collbench's executor over gloo, checks the sum, and the slowest
rank's time per call is kept (median of ``--iters``). Prints time and busbw per algorithm and size,
hierarchical's speed-up over each, and what the two-class cost formulas expect from the shaped rates
(ring: 2(p-1) steps of n/p, each as slow as its network hop; hierarchical: n/k inside twice, 2(m-1)
network steps of n/(mk)). Needs root (skips otherwise).

    python benchmarks/bench_hierarchical_netns.py [--fast 800] [--slow 100] [--mib 1 4] [--iters 5]

``--tune`` then runs ``collbench tune --op all-reduce --quick -b 64K -e 1M`` in the same namespaces on
a topology of the four CPU ranks with hosts h0, h0, h1, h1 and the shaped rates as link bandwidths
(written from ``collbench discover --ranks 4``), so the sweep's layout has the two nodes and
hierarchical competes with every other algorithm; it prints the profile's all-reduce rules and the
node count its rows and profile record. The namespaces are started as two hosts of two ranks
(``ranks_per_host=2``: the launcher's local ranks and each host's boot id say so), so that count is 2,
as the topology says; one rank per host made every namespace a node and the rows said 4.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from netns import NamespaceCluster, netns_unavailable

REPO = Path(__file__).resolve().parents[1]
ALGOS = ("ring", "two-tree", "hierarchical")

_JOB = """
import json, os, sys, time
import torch
import torch.distributed as dist
from collbench.layouts.model import Layout
from collbench.runtime.executor.schedule_runner import ScheduleRunner
from collbench.runtime.launch.ranks import launch
from collbench.schedules.ops import Op
from collbench.schedules.registry import get_algorithm

sizes, iters, out = [int(x) for x in sys.argv[1].split(",")], int(sys.argv[2]), sys.argv[3]
algos = sys.argv[4].split(",")
layout = Layout(rings=((0, 1, 2, 3),), nodes=((0, 1), (2, 3)), name="two hosts")

def worker(ctx, payload):
    n, r = 4, ctx.rank
    results = {}
    for nbytes in sizes:
        count = nbytes // 4
        for algo in algos:
            sched = get_algorithm(algo).build(Op.ALL_REDUCE, n, count, layout=layout)
            runner = ScheduleRunner(sched, rank=r, elem_bytes=4)
            buf = torch.empty(count, dtype=torch.float32)
            want = float(sum(range(1, n + 1)))
            buf.fill_(r + 1)
            runner.run(buf, "sum")  # warm-up
            times = []
            for _ in range(iters):
                buf.fill_(r + 1)
                dist.barrier(group=ctx.control)
                t0 = time.perf_counter()
                runner.run(buf, "sum")
                t = torch.tensor([time.perf_counter() - t0])
                dist.all_reduce(t, op=dist.ReduceOp.MAX, group=ctx.control)
                times.append(float(t.item()))
                assert torch.all(buf == want), f"{algo}: wrong sum"
            t = sorted(times)[len(times) // 2]
            results.setdefault(str(count * 4), {})[algo] = {
                "steps": sched.num_steps, "time_s": t, "busbw_gbps": count * 4 / t * 2 * (n - 1) / n / 1e9,
            }
    return results

res = launch(None, worker, None, backend="gloo", timeout_s=900.0)[0]
if os.environ["RANK"] == "0":
    with open(out, "w") as f:
        json.dump(res, f)
"""


def expected_s(algo: str, size: float, fast_bps: float, slow_bps: float) -> float:
    """What the shaped rates alone give (bytes over the busiest hop of each step, no latency)."""
    p, m, k = 4, 2, 2
    if algo == "ring":
        return 2 * (p - 1) * size / p / slow_bps
    if algo == "hierarchical":
        return 2 * (k - 1) * size / k / fast_bps + 2 * (m - 1) * size / (m * k) / slow_bps
    return float("nan")  # two-tree's pipelined overlap is not a closed form of these two rates


def two_host_topology(path: Path, fast_mbit: float, slow_mbit: float) -> None:
    """This host's four CPU ranks as two hosts of two (h0: ranks 0-1, h1: 2-3), links at the shaped rates."""
    exe = shutil.which("collbench") or "collbench"
    subprocess.run([exe, "discover", "--ranks", "4", "-O", str(path)], check=True, capture_output=True)
    lines, rank = [], -1
    for line in path.read_text().splitlines():
        if dev := re.match(r"- id: CPU(\d)", line):
            rank = int(dev.group(1))
        elif line.startswith("  host: ") and rank >= 0:
            line = f"  host: h{rank // 2}"
        link = re.match(r"- \{a: CPU(\d), b: CPU(\d), kind: \w+(.*)bandwidth_gbps: [\d.]+(.*)", line)
        if link:
            a, b = int(link.group(1)), int(link.group(2))
            kind, gbps = ("loopback", fast_mbit / 8e3) if a // 2 == b // 2 else ("net", slow_mbit / 8e3)
            line = f"- {{a: CPU{a}, b: CPU{b}, kind: {kind}{link.group(3)}bandwidth_gbps: {gbps}{link.group(4)}"
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")


def run_tune(rates: list[list[float]], fast: float, slow: float) -> None:
    exe = shutil.which("collbench") or "collbench"
    with tempfile.TemporaryDirectory() as tmp, NamespaceCluster(rates, ranks_per_host=2) as cluster:
        topo, prof = Path(tmp) / "2x2.yaml", Path(tmp) / "profile.yaml"
        two_host_topology(topo, fast, slow)
        argv = [exe, "tune", "--topology", str(topo), "--op", "all-reduce", "--quick", "-b", "64K", "-e", "1M"]
        argv += ["-O", str(prof), "--results", str(Path(tmp) / "rows.jsonl")]
        cluster.run_job(argv, cwd=Path(tmp), timeout_s=1200.0)
        import yaml

        doc = yaml.safe_load(prof.read_text())
        rows = [json.loads(line) for line in (Path(tmp) / "rows.jsonl").read_text().splitlines() if line.strip()]
        kept = sorted({rs.get("nodes") for rs in doc["rule_sets"]})
        print(f"tune: rows record nodes {sorted({r['nodes'] for r in rows})}; the profile's rule sets {kept}")
        for rule_set in doc["rule_sets"]:
            for rule in rule_set["rules"]:
                hi = "-" if rule["max_bytes"] is None else rule["max_bytes"]
                ties = ", ".join(rule.get("tie_with") or []) or "none"
                print(f"tune: {rule['min_bytes']}-{hi} B: {rule['algo']} (gain {rule['gain_vs_native']}; ties: {ties})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fast", type=float, default=800.0, help="Mbit/s inside a host (pairs 0-1, 2-3)")
    ap.add_argument("--slow", type=float, default=100.0, help="Mbit/s between the hosts")
    ap.add_argument("--mib", type=float, nargs="+", default=[1.0, 4.0], help="all-reduce sizes in MiB")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--tune", action="store_true", help="then run a quick tune on a two-host topology")
    args = ap.parse_args()
    why = netns_unavailable()
    if why is not None:
        print(f"skipped: {why}")
        return 0
    n = 4
    rates = [[args.fast if i // 2 == j // 2 else args.slow for j in range(n)] for i in range(n)]
    sizes = ",".join(str(int(m * 1024 * 1024)) for m in args.mib)
    with tempfile.TemporaryDirectory() as tmp, NamespaceCluster(rates, ranks_per_host=2) as cluster:
        out = Path(tmp) / "result.json"
        argv = [sys.executable, "-c", _JOB, sizes, str(args.iters), str(out), ",".join(ALGOS)]
        cluster.run_job(argv, cwd=REPO, timeout_s=1200.0)
        doc = json.loads(out.read_text())
    print(f"shaped: inside a host (0-1, 2-3) {args.fast} Mbit/s, between hosts {args.slow} Mbit/s")
    fast_bps, slow_bps = args.fast * 1e6 / 8, args.slow * 1e6 / 8
    for size, res in doc.items():
        mib = int(size) / 1048576
        for algo in ALGOS:
            r = res[algo]
            want = expected_s(algo, int(size), fast_bps, slow_bps)
            rate_only = "" if want != want else f"  (the rates alone: {want:.3f} s)"
            print(
                f"{mib:6.2f} MiB {algo:>12}: {r['steps']:2d} steps  time {r['time_s']:.3f} s  "
                f"busbw {r['busbw_gbps'] * 8e3:6.1f} Mbit/s{rate_only}"
            )
        for other in ("ring", "two-tree"):
            ratio = res[other]["time_s"] / res["hierarchical"]["time_s"]
            print(f"{mib:6.2f} MiB hierarchical is {ratio:.2f}x faster than {other}")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2))
    if args.tune:
        run_tune(rates, args.fast, args.slow)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
