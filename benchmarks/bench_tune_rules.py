"""Does the profile choose well? Re-measure every algorithm at each rule's sizes, fresh, and compare.

For every size of a grid (by default the quick tune's: 1 KiB .. 4 MiB in x8 steps), the profile's rule
names an algorithm; this benchmark sweeps *all* applicable algorithms again at those sizes (a new run,
``--repeats`` times, median of the p50s), and reports, per size, the chosen algorithm's time over the
best measured one's (in place, as tune measures). The profile passes at a size when that ratio is at
most 1.05 (within 5%).

    python benchmarks/bench_tune_rules.py profiles/<name>.yaml [--ranks 4] [--repeats 2] [--json out.json]

The chosen variant is matched by algorithm and segment size; rows of another segment size count
among "all others".
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from collbench.runtime.results import ResultRow
from collbench.runtime.sweep import SweepConfig, run_sweep
from collbench.tuning.pipeline import _algorithm_order
from collbench.tuning.profile import Profile


def remeasure(profile: Profile, op: str, args: argparse.Namespace) -> list[list[ResultRow]]:
    names = _algorithm_order((op,))
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-tune-") as tmp:
        for i in range(args.repeats):
            cfg = SweepConfig(
                world_size=args.ranks or profile.world_size,
                backend=profile.backend,
                ops=(op,),
                # Alternate the algorithm order between repeats, as tune does, so drift cancels.
                algos=names if i % 2 == 0 else tuple(reversed(names)),
                in_place=(True,),
                min_bytes=args.min_bytes,
                max_bytes=args.max_bytes,
                step_factor=args.step_factor,
                point_budget_s=args.budget,
                warmup=2,
                stream=Path(tmp) / f"run{i}.jsonl",
            )
            runs.append(run_sweep(cfg))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", type=Path)
    parser.add_argument("--ranks", type=int, default=None, help="default: the profile's world size")
    parser.add_argument("-b", "--min-bytes", type=int, default=1024)
    parser.add_argument("-e", "--max-bytes", type=int, default=4 << 20)
    parser.add_argument("-f", "--step-factor", type=float, default=8.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--budget", type=float, default=0.2, help="timed seconds per point")
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    profile = Profile.load(args.profile)
    report = []
    started = time.monotonic()
    for op in profile.ops:
        runs = remeasure(profile, op, args)
        times: dict[tuple[str, int | None, int], list[float]] = defaultdict(list)
        for rows in runs:
            for r in rows:
                if r.wrong <= 0:
                    times[(r.algo, r.segment_bytes, r.size_bytes)].append(r.time_us)
        sizes = sorted({k[2] for k in times})
        print(f"\n{op}, {profile.backend}, {profile.world_size} ranks, {args.repeats} fresh run(s), median of p50s")
        print(f"{'size':>10}  {'chosen':<20} {'time us':>10}  {'best':<20} {'time us':>10}  {'ratio':>6}  ok")
        for size in sizes:
            rule = profile.select(op, size)
            med = {(a, s): statistics.median(v) for (a, s, sz), v in times.items() if sz == size}
            best_key = min(med, key=lambda k: med[k])
            chosen = [
                k
                for k in med
                if k[0] == rule.algo and (rule.algo == "native" or k[1] == rule.params.get("segment_bytes"))
            ]
            if not chosen:
                chosen = [k for k in med if k[0] == rule.algo]
            if not chosen:
                print(f"{size:>10}  {rule.algo:<20} not measured in this run")
                continue
            ck = min(chosen, key=lambda k: med[k])
            ratio = med[ck] / med[best_key]
            ok = ratio <= 1.0 + args.tolerance
            report.append(
                {
                    "op": op,
                    "size_bytes": size,
                    "chosen": ck[0],
                    "chosen_us": med[ck],
                    "best": best_key[0],
                    "best_us": med[best_key],
                    "ratio": ratio,
                    "within_tolerance": ok,
                }
            )
            print(
                f"{size:>10}  {ck[0]:<20} {med[ck]:>10.1f}  {best_key[0]:<20} {med[best_key]:>10.1f}  "
                f"{ratio:>6.2f}  {'yes' if ok else 'NO'}"
            )
    passed = sum(r["within_tolerance"] for r in report)
    print(
        f"\n{passed}/{len(report)} sizes within {args.tolerance:.0%} of the best measured "
        f"(geometric mean ratio {statistics.geometric_mean([r['ratio'] for r in report]):.3f}); "
        f"{time.monotonic() - started:.0f} s"
    )
    if args.json is not None:
        args.json.write_text(json.dumps({"profile": str(args.profile), "points": report}, indent=1))


if __name__ == "__main__":
    main()
