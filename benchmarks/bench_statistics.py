"""Which time should decisions compare? The stability of p50, p25, trimmed mean and min-of-round-medians.

On a busy machine a fraction of calls stall (results/noise.py), and the statistic a point is summarised
by decides whether two runs agree. This benchmark measures, on local gloo ranks (default: the default
rank count), every algorithm in ``--algos`` at each size in ``--sizes``, in ``--rounds`` rounds that
alternate the algorithms' order, keeping every iteration's time (slowest rank). Rounds are paired
(rounds 0+1, 2+3, ...): each pair is one "run", as ``tune`` makes one from two rounds. Per statistic:

* spread: per point, the coefficient of variation of the statistic across runs (stdev / mean);
  the median and the 90th percentile over points;
* agreement: per size, the fraction of runs whose fastest algorithm by that statistic is the one
  most runs name.

Statistics of a run: p50, p25 and the 20%-trimmed mean of the run's pooled iterations, the smaller
of its two rounds' medians (min-of-round-medians), and the smaller of its two rounds' p25s (what tune's
decisions use). The stall fraction of every point is printed too.

    python benchmarks/bench_statistics.py [--ranks N] [--rounds 6] [--budget 0.1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from collbench.results.noise import min_of_medians, quantile, stall_fraction, trimmed_mean
from collbench.runtime.executor.schedule_runner import ScheduleRunner
from collbench.runtime.executor.timing import CpuTimer, slowest_rank
from collbench.runtime.host.affinity import default_cpu_ranks
from collbench.runtime.launch.ranks import RankContext, launch
from collbench.schedules.ops import Op
from collbench.schedules.registry import get_algorithm


@dataclass(frozen=True)
class Plan:
    algos: tuple[str, ...]
    sizes: tuple[int, ...]
    rounds: int
    budget_s: float


def _call(ctx: RankContext, algo: str, size: int) -> Any:
    buf = torch.ones(size // 4, dtype=torch.float32)
    if algo == "native":
        return lambda: dist.all_reduce(buf)
    schedule = get_algorithm(algo).build(Op.ALL_REDUCE, ctx.world_size, buf.numel())
    runner = ScheduleRunner(schedule, rank=ctx.rank, segment_bytes=4 << 20, elem_bytes=4, device=ctx.device)
    return lambda: runner.run(buf, "sum")


def worker(ctx: RankContext, plan: Plan) -> dict[str, list[float]]:
    """Every point's slowest-rank iteration times, per round (rank 0 returns them)."""
    timer = CpuTimer()
    out: dict[str, list[float]] = {}
    for r in range(plan.rounds):
        algos = plan.algos if r % 2 == 0 else tuple(reversed(plan.algos))
        for algo in algos:
            for size in plan.sizes:
                call = _call(ctx, algo, size)
                for _ in range(2):
                    call()
                samples: list[float] = []
                batch = 5
                while True:
                    dist.barrier(group=ctx.control)
                    mine = timer.time_iterations(call, batch)
                    gathered: list[Any] = [None] * ctx.world_size
                    dist.all_gather_object(gathered, mine, group=ctx.control)
                    samples.extend(slowest_rank(gathered))
                    # Every rank decides from the same gathered times: the same number of batches.
                    if sum(samples) * 1e-6 >= plan.budget_s or len(samples) >= 2000:
                        break
                    batch = min(2 * batch, 200)
                out[f"{algo}|{size}|{r}"] = samples
    return out if ctx.rank == 0 else {}


STATS = ("p50", "p25", "trimmed mean", "min of round medians", "min of round p25s")


def run_stats(rounds: list[list[float]]) -> dict[str, float]:
    pooled = [x for r in rounds for x in r]
    return {
        "p50": quantile(pooled, 0.5),
        "p25": quantile(pooled, 0.25),
        "trimmed mean": trimmed_mean(pooled, 0.2),
        "min of round medians": min_of_medians(rounds),
        # What tune's decisions use (selection.decision_time_us, combined over rounds by the minimum).
        "min of round p25s": min(quantile(r, 0.25) for r in rounds),
    }


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, default=None)
    parser.add_argument("--algos", default="native,ring,tree,recursive-doubling")
    parser.add_argument("--sizes", default="1024,16384,262144,2097152")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--budget", type=float, default=0.1, help="timed seconds per point and round")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    ranks = args.ranks or default_cpu_ranks()
    plan = Plan(
        tuple(a.strip() for a in args.algos.split(",")),
        tuple(int(s) for s in args.sizes.split(",")),
        args.rounds,
        args.budget,
    )
    before = load()
    started = time.monotonic()
    raw = launch(ranks, worker, plan, backend="gloo", timeout_s=600.0)[0]
    after = load()
    per_point: dict[tuple[str, int], list[list[float]]] = defaultdict(list)
    for key, samples in raw.items():
        algo, size, _ = key.split("|")
        per_point[(algo, int(size))].append(samples)
    runs = args.rounds // 2
    # values[stat][(algo, size)] = the statistic of each run (a pair of rounds)
    values: dict[str, dict[tuple[str, int], list[float]]] = {s: {} for s in STATS}
    stalls: dict[tuple[str, int], float] = {}
    for point, rounds in per_point.items():
        stalls[point] = stall_fraction([x for r in rounds for x in r])
        for stat in STATS:
            values[stat][point] = [run_stats(rounds[2 * i : 2 * i + 2])[stat] for i in range(runs)]
    print(f"{ranks} ranks, {args.rounds} rounds = {runs} runs, {args.budget} s per point and round")
    print(f"load before: {before}\nload after:  {after}")
    print("\nstall fraction (iterations > 3x the fastest) per point:")
    for (algo, size), frac in sorted(stalls.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"  {algo:<20} {size:>9} B  {frac:6.1%}")
    summary: dict[str, dict[str, float]] = {}
    print(f"\n{'statistic':<22} {'median CV':>10} {'p90 CV':>8} {'winner agreement':>17}")
    for stat in STATS:
        cvs = [statistics.pstdev(v) / statistics.fmean(v) for v in values[stat].values() if statistics.fmean(v) > 0]
        agree = []
        for size in plan.sizes:
            winners = [
                min(plan.algos, key=lambda a, i=i: values[stat][(a, size)][i])  # type: ignore[misc]
                for i in range(runs)
            ]
            agree.append(Counter(winners).most_common(1)[0][1] / runs)
        summary[stat] = {
            "median_cv": statistics.median(cvs),
            "p90_cv": quantile(cvs, 0.9),
            "winner_agreement": statistics.fmean(agree),
        }
        s = summary[stat]
        print(f"{stat:<22} {s['median_cv']:>10.3f} {s['p90_cv']:>8.3f} {s['winner_agreement']:>17.2f}")
    print(f"\n{time.monotonic() - started:.0f} s")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "ranks": ranks,
                    "load_before": before,
                    "load_after": after,
                    "summary": summary,
                    "stall_fraction": {f"{a}|{s}": f for (a, s), f in stalls.items()},
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
