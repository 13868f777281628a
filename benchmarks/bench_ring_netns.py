"""Ring all-reduce over a namespace cluster: the topology layout's ring against rank order.

Four ranks, one per network namespace, every directed pair shaped with htb (benchmarks/netns.py).
The pairs 1-2 and 3-0 are slow, so the rank-order ring 0-1-2-3-0 has two slow hops; the others are
fast. Inside the job, the ranks probe their links (collbench's probe), plan the layout on the measured
topology, then time the ring all-reduce schedule (collbench's executor over gloo) with the layout's
ring and with rank order. Prints busbw for both and their ratio. Needs root (skips otherwise).

    /work/venv/bin/python benchmarks/bench_ring_netns.py [--fast 300] [--slow 50] [--mib 4]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from netns import NamespaceCluster, netns_unavailable

REPO = Path(__file__).resolve().parents[1]

_JOB = """
import json, os, sys, time
import torch
import torch.distributed as dist
from collbench.layouts.model import Layout
from collbench.layouts.plan import plan_layout
from collbench.runtime.executor.schedule_runner import run_schedule
from collbench.runtime.launch.ranks import launch
from collbench.schedules.ops import Op
from collbench.schedules.registry import get_algorithm
from collbench.runtime.probe import ProbeConfig, probe_topology

nbytes, iters, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
topo = probe_topology(4, timeout_s=120.0, config=ProbeConfig(repeats=2, pings=5, target_s=0.15), everywhere=True)
layout = plan_layout(topo, 4)
best = layout.rings[0]

def worker(ctx, payload):
    count = nbytes // 4
    results = {}
    for name, order in (("rank order", (0, 1, 2, 3)), ("topology", best)):
        sched = get_algorithm("ring").build(Op.ALL_REDUCE, 4, count, layout=Layout(rings=(order,)))
        buf = torch.ones(count, dtype=torch.float32)
        run_schedule(sched, buf, "sum")  # warm-up
        times = []
        for _ in range(iters):
            buf = torch.ones(count, dtype=torch.float32)
            dist.barrier(group=ctx.control)
            t0 = time.perf_counter()
            run_schedule(sched, buf, "sum")
            t = torch.tensor([time.perf_counter() - t0])
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=ctx.control)
            times.append(float(t.item()))
        assert torch.all(buf == 4), "all-reduce gave a wrong result"
        t = sorted(times)[len(times) // 2]
        results[name] = {"order": list(order), "time_s": t, "busbw_gbps": nbytes / t * 2 * 3 / 4 / 1e9}
    return results

res = launch(None, worker, None, backend="gloo", timeout_s=300.0)[0]
if os.environ["RANK"] == "0":
    links = {f"{l.a}-{l.b}": round(l.bandwidth_gbps * 8e3, 1) for l in topo.links}
    with open(out, "w") as f:
        json.dump({"measured_mbit": links, "results": res}, f)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fast", type=float, default=300.0, help="Mbit/s of the fast pairs")
    ap.add_argument("--slow", type=float, default=50.0, help="Mbit/s of the slow pairs (1-2 and 3-0)")
    ap.add_argument("--mib", type=float, default=4.0, help="all-reduce size in MiB")
    ap.add_argument("--iters", type=int, default=3)
    args = ap.parse_args()
    why = netns_unavailable()
    if why is not None:
        print(f"skipped: {why}")
        return 0
    n = 4
    slow = {frozenset((1, 2)), frozenset((3, 0))}
    rates = [[args.slow if frozenset((i, j)) in slow else args.fast for j in range(n)] for i in range(n)]
    with tempfile.TemporaryDirectory() as tmp, NamespaceCluster(rates) as cluster:
        out = Path(tmp) / "result.json"
        nbytes = int(args.mib * 1024 * 1024)
        cluster.run_job([sys.executable, "-c", _JOB, str(nbytes), str(args.iters), str(out)], cwd=REPO, timeout_s=300.0)
        doc = json.loads(out.read_text())
    print(
        f"shaped: fast pairs {args.fast} Mbit/s, slow pairs 1-2 and 3-0 {args.slow} Mbit/s; all-reduce {args.mib} MiB"
    )
    print("probe measured (Mbit/s):", doc["measured_mbit"])
    res = doc["results"]
    for name, r in res.items():
        print(f"{name:>10}: ring {r['order']}  time {r['time_s']:.3f} s  busbw {r['busbw_gbps'] * 8e3:.1f} Mbit/s")
    ratio = res["topology"]["busbw_gbps"] / res["rank order"]["busbw_gbps"]
    print(f"busbw ratio topology / rank order: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
