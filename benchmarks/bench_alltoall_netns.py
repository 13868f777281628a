"""All-to-all over a namespace cluster: the layout's exchange order (topo-pairwise) against rank order.

Four ranks, one per network namespace, every directed pair shaped with htb (benchmarks/netns.py). The
pairs 0-1 and 2-3 are slow. Rank order's pairwise exchange (step k: to r+k, from r-k) meets them in two
steps (0->1 and 2->3 in the first, 1->0 and 3->2 in the last), so two of its three steps run at the
slow rate; the topology's order (``layouts/exchange.py``) puts both slow pairs in one round. Inside
the job the ranks probe their links (collbench's probe), plan the layout on the measured topology,
then time both schedules with collbench's executor over gloo, checking the result. Prints busbw for
both and their ratio, per size. The best this can give is 2x (each direction of a slow pair still
carries its block) if the slow pairs had rounds of their own; the layout spreads them instead
(``Layout.exchange_spread``: their blocks in pieces beside the fast rounds), so the fast rounds' time
hides under the slow links' and the bound is ``(2 slow + fast) / slow``. Needs root (skips otherwise).

    python benchmarks/bench_alltoall_netns.py [--fast 300] [--slow 50] [--mib 1 4] [--iters 3]
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
from collbench.layouts.plan import plan_layout
from collbench.runtime.executor.schedule_runner import ScheduleRunner
from collbench.runtime.launch.ranks import launch
from collbench.schedules.ops import Op, block_bounds
from collbench.schedules.registry import get_algorithm
from collbench.runtime.probe import ProbeConfig, probe_topology

sizes, iters, out = [int(x) for x in sys.argv[1].split(",")], int(sys.argv[2]), sys.argv[3]
topo = probe_topology(4, timeout_s=120.0, config=ProbeConfig(repeats=2, pings=5, target_s=0.15), everywhere=True)
layout = plan_layout(topo, 4)

def worker(ctx, payload):
    n, r = 4, ctx.rank
    results = {}
    for nbytes in sizes:
        count = nbytes // 4 // n * n
        b = count // n
        for name, algo, lay in (("rank order", "pairwise", None), ("topology", "topo-pairwise", layout)):
            sched = get_algorithm(algo).build(Op.ALL_TO_ALL, n, count, layout=lay)
            runner = ScheduleRunner(sched, rank=r, elem_bytes=4)
            buf = torch.empty(2 * count, dtype=torch.float32)
            # input block j holds (source r, destination j); output block j must hold (source j, destination r)
            for j in range(n):
                buf[j * b:(j + 1) * b] = r * 10 + j
            runner.run(buf, "sum")  # warm-up
            times = []
            for _ in range(iters):
                buf[count:] = -1
                dist.barrier(group=ctx.control)
                t0 = time.perf_counter()
                runner.run(buf, "sum")
                t = torch.tensor([time.perf_counter() - t0])
                dist.all_reduce(t, op=dist.ReduceOp.MAX, group=ctx.control)
                times.append(float(t.item()))
            for j in range(n):
                assert torch.all(buf[count + j * b:count + (j + 1) * b] == j * 10 + r), f"{name}: wrong block {j}"
            t = sorted(times)[len(times) // 2]
            results.setdefault(str(count * 4), {})[name] = {
                "layout": sched.layout, "steps": sched.num_steps, "time_s": t,
                "busbw_gbps": count * 4 / t * (n - 1) / n / 1e9,
            }
    return results

res = launch(None, worker, None, backend="gloo", timeout_s=600.0)[0]
if os.environ["RANK"] == "0":
    links = {f"{l.a}-{l.b}": round(l.bandwidth_gbps * 8e3, 1) for l in topo.links}
    rounds = [list(x) for x in layout.exchange_rounds]
    doc = {"measured_mbit": links, "exchange_rounds": rounds, "exchange_spread": layout.exchange_spread, "results": res}
    with open(out, "w") as f:
        json.dump(doc, f)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fast", type=float, default=300.0, help="Mbit/s of the fast pairs")
    ap.add_argument("--slow", type=float, default=50.0, help="Mbit/s of the slow pairs (0-1 and 2-3)")
    ap.add_argument("--mib", type=float, nargs="+", default=[1.0, 4.0], help="all-to-all sizes in MiB")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    why = netns_unavailable()
    if why is not None:
        print(f"skipped: {why}")
        return 0
    n = 4
    slow = {frozenset((0, 1)), frozenset((2, 3))}
    rates = [[args.slow if frozenset((i, j)) in slow else args.fast for j in range(n)] for i in range(n)]
    sizes = ",".join(str(int(m * 1024 * 1024)) for m in args.mib)
    with tempfile.TemporaryDirectory() as tmp, NamespaceCluster(rates) as cluster:
        out = Path(tmp) / "result.json"
        cluster.run_job([sys.executable, "-c", _JOB, sizes, str(args.iters), str(out)], cwd=REPO, timeout_s=900.0)
        doc = json.loads(out.read_text())
    print(f"shaped: fast pairs {args.fast} Mbit/s, slow pairs 0-1 and 2-3 {args.slow} Mbit/s")
    print("probe measured (Mbit/s):", doc["measured_mbit"])
    print("exchange rounds (partner of each rank):", doc["exchange_rounds"], "spread:", doc["exchange_spread"])
    for size, res in doc["results"].items():
        for name, r in res.items():
            print(
                f"{int(size) / 1048576:6.2f} MiB {name:>10}: {r['steps']} steps ({r['layout']})"
                f"  time {r['time_s']:.3f} s  busbw {r['busbw_gbps'] * 8e3:.1f} Mbit/s"
            )
        ratio = res["topology"]["busbw_gbps"] / res["rank order"]["busbw_gbps"]
        print(f"{int(size) / 1048576:6.2f} MiB busbw ratio topology / rank order: {ratio:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
