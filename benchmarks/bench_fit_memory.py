"""Peak memory and time of ``collbench fit`` on results files of growing size (issue 13: fit streams).

Writes JSONL results files of about 50, 200 and 400 MB in a temporary directory (valid rows: every
point of a 2-rank sweep of all-reduce and all-gather, 7 algorithms, 20 sizes, in and out of place,
repeated with a different time each round, as rounds and resumed runs give), runs the real CLI
``collbench fit --json FILE`` on each in a fresh process, and reads that process's peak RSS from
``RUSAGE_CHILDREN``. The reference in the same run: ``collbench fit`` on one round of the same
points (the smallest file a fit of these points can read), so the ratios show what file size adds.
Target: the 400 MB file within a few MB of the 50 MB one. The files are deleted at the end.

/work/venv/bin/python benchmarks/bench_fit_memory.py [--sizes-mb 50,200,400] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CHILD = """
import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""

OPS = {
    "all-reduce": ("ring", "tree", "two-tree", "recursive-doubling", "rabenseifner", "direct", "native"),
    "all-gather": ("ring", "recursive-doubling", "direct", "native", "bruck", "one-shot", "tree"),
}
SIZES = [1 << k for k in range(6, 26)]


def _templates() -> list[tuple[str, float]]:
    """One JSON row per point with ``@T@`` where its times go, and the point's base time in us."""
    from collbench.results.row import ResultRow
    from collbench.schedules.ops import Op
    from collbench.schedules.registry import algorithms_for

    out = []
    for op, algos in OPS.items():
        known = {spec.name for spec in algorithms_for(Op.parse(op))} | {"native"}
        for algo in (a for a in algos if a in known):
            for size in SIZES:
                for in_place in (False, True):
                    base = 20.0 + size / 2e3
                    row = ResultRow(
                        op=op, algo=algo, backend="gloo", world_size=2, dtype="float32", redop="sum",
                        in_place=in_place, size_bytes=size, count=size // 4, iters=20, time_us=base,
                        time_us_mean=base, time_us_min=base, time_us_max=base, algbw_gbps=1.0, busbw_gbps=1.0,
                        wrong=0, host="bench-host", topology_fingerprint="0" * 16, torch_version="2.13.0",
                        backend_version="gloo", device_name="cpu", timestamp=1.0, stall_fraction=0.0,
                        bimodal=False, time_us_p25=base,
                    )  # fmt: skip
                    text = json.dumps(row.to_dict(), sort_keys=True)
                    # Every time field carries the same placeholder value; swap it for a marker.
                    out.append((text.replace(json.dumps(base), "@T@"), base))
    return out


def write_results(path: Path, target_bytes: int, seed: int = 0) -> tuple[int, int]:
    """Rounds of every point, each with its own times, until ``target_bytes``; (rows, points)."""
    rng = random.Random(seed)
    templates = _templates()
    written = rows = 0
    with path.open("w") as f:
        while written < target_bytes:
            lines = []
            for text, base in templates:
                lines.append(text.replace("@T@", repr(round(base * rng.uniform(1.0, 1.5), 3))) + "\n")
            chunk = "".join(lines)
            f.write(chunk)
            written += len(chunk)
            rows += len(lines)
    return rows, len(templates)


def measure(path: Path) -> tuple[int, float]:
    """(peak RSS in bytes, wall seconds) of ``collbench fit --json FILE`` in a fresh process."""
    cmd = [sys.executable, "-c", _CHILD, sys.executable, "-m", "collbench.cli.app", "fit", "--json", str(path)]
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=3600)
    wall = time.perf_counter() - start
    rc, rss = (int(x) for x in out.stdout.split())
    if rc != 0:
        raise SystemExit(f"fit exited {rc} on {path}: {out.stderr.strip()}")
    return rss, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", default="50,200,400")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    mib = 1 << 20
    figures: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        ref = Path(tmp) / "ref.jsonl"
        ref_rows, points = write_results(ref, 1)
        ref_rss, ref_wall = measure(ref)
        ref.unlink()
        figures.append({"file_mb": 0.0, "rows": ref_rows, "peak_rss_mib": ref_rss / mib, "wall_s": ref_wall})
        for mb in (float(x) for x in args.sizes_mb.split(",")):
            path = Path(tmp) / f"r{mb:g}.jsonl"
            rows, _ = write_results(path, int(mb * 1e6))
            size = path.stat().st_size
            rss, wall = measure(path)
            path.unlink()
            figures.append({"file_mb": size / 1e6, "rows": rows, "peak_rss_mib": rss / mib, "wall_s": wall})
    print(f"{points} points; reference: fit on one round of them ({ref_rows} rows)")
    ref = figures[0]
    print(f"{'file MB':>8} {'rows':>9} {'peak RSS MiB':>13} {'x ref':>6} {'+MiB':>6} {'wall s':>7}")
    for f in figures:
        rss = f["peak_rss_mib"]
        ratio, extra = rss / ref["peak_rss_mib"], rss - ref["peak_rss_mib"]
        print(f"{f['file_mb']:8.1f} {f['rows']:9.0f} {rss:13.1f} {ratio:6.3f} {extra:6.1f} {f['wall_s']:7.1f}")
    if args.json:
        args.json.write_text(json.dumps({"points": points, "runs": figures}, indent=2) + "\n")


if __name__ == "__main__":
    main()
