"""Does the profile choose well? Re-measure every algorithm at each rule's sizes, fresh, and compare.

For every size of a grid (by default 9 sizes over the quick tune's range: 512 B .. 2 MiB in x2.8
steps), the profile's rule names an algorithm; this benchmark sweeps *all* applicable algorithms again
at those sizes (a new run, ``--repeats`` times, alternating their order), and reports, per size, the
chosen algorithm's time over the best measured one's (in place, as tune measures), each time being
what decisions compare (``noise.decision_time_us``: the row's p25, smallest over repeats). The
profile passes at a size when that ratio is at most 1.05 (within 5%), or when the chosen and the best
cannot be told apart in this re-measurement (``selection.decide_at``: within the measured noise).
Targets (issue 10): at least 8 of 9 sizes pass, geometric-mean ratio at most 1.05.

    python benchmarks/bench_tune_rules.py profiles/<name>.yaml [--ranks N] [--repeats 2] [--json out.json]

The chosen variant is matched by algorithm and segment size; rows of another segment size count
among "all others".
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from collbench.profile.document import Profile
from collbench.results.row import ResultRow
from collbench.runtime.sweep.plan import SweepConfig
from collbench.runtime.sweep.run import run_sweep
from collbench.tuning.selection import SelectionSettings, measured_points
from collbench.tuning.sweeps import algorithm_order


def remeasure(profile: Profile, op: str, args: argparse.Namespace) -> list[list[ResultRow]]:
    names = algorithm_order((op,))
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
    parser.add_argument("-b", "--min-bytes", type=int, default=512)
    parser.add_argument("-e", "--max-bytes", type=int, default=2 << 20)
    parser.add_argument("-f", "--step-factor", type=float, default=2.8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--budget", type=float, default=0.2, help="timed seconds per point")
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    profile = Profile.load(args.profile)
    print("load before:", subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip())
    report = []
    started = time.monotonic()
    for op in profile.ops:
        runs = remeasure(profile, op, args)
        rows = [r for run in runs for r in run]
        points = measured_points(rows).get(op, {})
        sizes = sorted({s for pts in points.values() for s in pts})
        print(f"\n{op}, {profile.backend}, {profile.world_size} ranks, {args.repeats} fresh run(s), rounds' min p25")
        print(f"{'size':>10}  {'chosen':<20} {'time us':>10}  {'best':<20} {'time us':>10}  {'ratio':>6}  tie  ok")
        for size in sizes:
            rule = profile.select(op, size)
            here = {v: pts[size] for v, pts in points.items() if size in pts}
            best = min(here, key=lambda v: here[v].time_us)
            chosen = [
                v
                for v in here
                if v.algo == rule.algo
                and (rule.algo == "native" or v.segment_bytes == rule.params.get("segment_bytes"))
            ] or [v for v in here if v.algo == rule.algo]
            if not chosen:
                print(f"{size:>10}  {rule.algo:<20} not measured in this run")
                continue
            mine = min(chosen, key=lambda v: here[v].time_us)
            ratio = here[mine].time_us / here[best].time_us
            # Tied as selection.decide_at ties: within the two points' noise bar of the fastest.
            bar = SelectionSettings().bar(here[mine], here[best])
            tie = here[mine].time_us <= here[best].time_us * (1.0 + bar)
            ok = ratio <= 1.0 + args.tolerance or tie
            report.append(
                {
                    "op": op,
                    "size_bytes": size,
                    "chosen": mine.algo,
                    "chosen_us": here[mine].time_us,
                    "best": best.algo,
                    "best_us": here[best].time_us,
                    "ratio": ratio,
                    "tied_within_noise": tie,
                    "within_tolerance": ok,
                }
            )
            print(
                f"{size:>10}  {mine.algo:<20} {here[mine].time_us:>10.1f}  "
                f"{best.algo:<20} {here[best].time_us:>10.1f}  {ratio:>6.2f}  "
                f"{'yes' if tie else 'no':>3}  {'yes' if ok else 'NO'}"
            )
    passed = sum(r["within_tolerance"] for r in report)
    print(
        f"\n{passed}/{len(report)} sizes within {args.tolerance:.0%} of the best measured or tied within noise "
        f"(geometric mean ratio {statistics.geometric_mean([r['ratio'] for r in report]):.3f}); "
        f"{time.monotonic() - started:.0f} s"
    )
    print("load after:", subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip())
    if args.json is not None:
        args.json.write_text(json.dumps({"profile": str(args.profile), "points": report}, indent=1))


if __name__ == "__main__":
    main()
