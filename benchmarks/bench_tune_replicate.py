"""Do two independent ``collbench tune --quick`` runs agree, and do their fits explain the data?

Runs ``collbench tune --quick`` twice (default rank count, fresh processes), then per op and measured
size compares the two runs' choices (``Profile.select``). A size is *separated* in a run when its winner
is faster than every other variant beyond the measured noise there (``selection.decide_at`` finds no
tie). Targets (issue 10):

* the two runs name the same algorithm wherever either run says its winner is separated;
* every fit's median error is under 10%, and no fit with a negative R^2 is presented as usable
  (``Fit.distrust``: the tables print "use: no").

    python benchmarks/bench_tune_replicate.py [--out DIR] [--ranks N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from collbench.profile.document import Profile
from collbench.results.io import read_rows
from collbench.results.noise import row_stalled
from collbench.tuning.selection import SelectionSettings, decide_at, measured_points


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def tune(out: Path, ranks: int | None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "collbench.cli.app", "tune", "--quick", "-O", str(out)]
    if ranks is not None:
        cmd += ["--ranks", str(ranks)]
    before = uptime()
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"tune failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return {"load_before": before, "load_after": uptime(), "seconds": time.monotonic() - started}


def separated_sizes(results: Path) -> dict[tuple[str, int], bool]:
    out = {}
    for op, variants in measured_points(read_rows(results)).items():
        for size in sorted({s for pts in variants.values() for s in pts}):
            here = {v: pts[size] for v, pts in variants.items() if size in pts}
            out[(op, size)] = not decide_at(here, None, SelectionSettings())[1]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None, help="keep the two profiles here (default: a temp dir)")
    parser.add_argument("--ranks", type=int, default=None, help="default: tune's default rank count")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-replicate-") as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        runs = []
        for i in range(2):
            path = out / f"run{i}.yaml"
            info = tune(path, args.ranks)
            profile = Profile.load(path)
            results = path.with_name(path.stem + "-results.jsonl")
            rows = read_rows(results)
            runs.append((profile, separated_sizes(results), info, rows))
            print(f"run {i}: {len(rows)} points in {info['seconds']:.0f} s; {info['load_before']}")
        report: dict[str, Any] = {"runs": [r[2] for r in runs], "sizes": [], "fits": []}
        (pa, sa, _, _), (pb, sb, _, _) = runs
        print(f"\n{'op':<11} {'size':>9}  {'run 0':<20} {'sep':>3}  {'run 1':<20} {'sep':>3}  agree")
        disagreements = 0
        binding = 0
        for op, size in sorted(set(sa) & set(sb)):
            a, b = pa.select(op, size).algo, pb.select(op, size).algo
            sep_a, sep_b = sa[(op, size)], sb[(op, size)]
            must = sep_a or sep_b
            binding += must
            bad = must and a != b
            disagreements += bad
            verdict = ("NO" if bad else "yes") if must else "tie (either is fine)" if a != b else "yes"
            flags = ("yes" if sep_a else "no", "yes" if sep_b else "no")
            print(f"{op:<11} {size:>9}  {a:<20} {flags[0]:>3}  {b:<20} {flags[1]:>3}  {verdict}")
            report["sizes"].append({"op": op, "size": size, "run0": a, "sep0": sep_a, "run1": b, "sep1": sep_b})
        print(f"\n{binding - disagreements}/{binding} sizes separated in either run agree on the winner")
        for i, (profile, _, _, rows) in enumerate(runs):
            fits = list(profile.fits)
            worst = max((f.median_abs_pct_error for f in fits), default=float("nan"))
            negative_used = [f.algo for f in fits if f.r2 < 0 and not f.distrust()]
            distrusted = [f"{f.algo} ({f.distrust()})" for f in fits if f.distrust()]
            stalled = sum(row_stalled(r) for r in rows)
            print(
                f"run {i}: fits' median errors {', '.join(f'{f.algo} {f.median_abs_pct_error:.1f}%' for f in fits)}; "
                f"largest {worst:.1f}%; negative R^2 presented as usable: {negative_used or 'none'}; "
                f"marked not usable: {distrusted or 'none'}; stalled points {stalled}/{len(rows)}"
            )
            report["fits"].append(
                {
                    "median_errors": {f.algo: f.median_abs_pct_error for f in fits},
                    "r2": {f.algo: f.r2 for f in fits},
                    "distrusted": distrusted,
                    "stalled_points": stalled,
                    "points": len(rows),
                }
            )
        report["agree"] = binding - disagreements
        report["binding"] = binding
        if args.json is not None:
            args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
