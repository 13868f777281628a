"""CPU time and peak memory of ``collbench compare`` on two large results files, against a reference tree.

Writes two JSONL files of ``--points`` one-row points each (default 200,000: 167 MB each), as a sweep
writes them (every field of today's row; NEW 2% slower than BASE, 3% noise per point), and runs the
real CLI ``collbench compare BASE NEW --fail-above 5%`` in a fresh process, twice, with this tree's
collbench and with the reference's (``--reference DIR``: a copy of another revision's ``collbench/``
folder's parent, e.g. ``git archive REV collbench | tar -x -C DIR``), alternating. Each run's user +
system CPU and peak RSS come from ``RUSAGE_CHILDREN`` of a wrapper process, so only that run counts.
It also times ``collbench compare --help`` (importing the CLI) for each tree: what every command pays
before it reads anything. The files are deleted at the end.

.venv/bin/python benchmarks/bench_compare_files.py --reference /tmp/base [--points 200000] [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(rc, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024)
"""


def write_files(folder: Path, points: int) -> tuple[Path, Path]:
    """BASE and NEW: ``points`` all-reduce points of 2 gloo ranks, one row each, NEW 2% slower."""
    from collbench.results.row import ResultRow

    rng = random.Random(7)
    paths = (folder / "base.jsonl", folder / "new.jsonl")
    for path, factor in zip(paths, (1.0, 1.02), strict=True):
        with path.open("w") as f:
            for i in range(points):
                size = 4 * (i + 1)
                t = (20.0 + size / 2e3) * factor * (1 + rng.gauss(0, 0.03))
                row = ResultRow(
                    op="all-reduce", algo="ring", backend="gloo", world_size=2, dtype="float32", redop="sum",
                    in_place=bool(i % 2), size_bytes=size, count=size // 4, iters=50, time_us=t,
                    time_us_mean=t * 1.05, time_us_min=t * 0.9, time_us_max=t * 3, algbw_gbps=size / t / 1e3,
                    busbw_gbps=size / t / 1e3, wrong=0, host="vm", topology_fingerprint="1900d63b9e98",
                    torch_version="2.13.0+cpu", device_name="cpu", layout="topology", segment_bytes=4194304,
                    timestamp=1795351202.5 + i, stall_fraction=0.0, bimodal=False, time_us_p25=t * 0.95,
                )  # fmt: skip
                f.write(json.dumps(row.to_dict(), sort_keys=True, allow_nan=False) + "\n")
    return paths


def run(tree: Path, args: list[str], cwd: Path) -> tuple[int, float, int]:
    """(exit code, CPU seconds, peak RSS bytes) of ``collbench ARGS`` with ``tree``'s collbench.

    ``cwd`` must hold no collbench: ``python -m`` puts the working directory before PYTHONPATH.
    """
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, "-c", _CHILD, sys.executable, "-m", "collbench.cli.app", *args]
    out = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=True).stdout.split()
    return int(out[0]), float(out[1]), int(out[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path, required=True, help="folder holding the reference collbench/")
    parser.add_argument("--points", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=2)
    opts = parser.parse_args()
    here = Path(__file__).resolve().parents[1]
    trees = {"this tree": here, "reference": opts.reference.resolve()}
    with tempfile.TemporaryDirectory(prefix="collbench-bench-compare-") as tmp:
        base, new = write_files(Path(tmp), opts.points)
        print(f"{opts.points:,} points a file, {base.stat().st_size / 1e6:.0f} MB each; load {os.getloadavg()}")
        cpu: dict[str, list[float]] = {name: [] for name in trees}
        for name, tree in trees.items():
            _, help_s, _ = run(tree, ["compare", "--help"], Path(tmp))
            print(f"{name}: compare --help (importing the CLI) {help_s:.1f} s CPU")
        for attempt in range(opts.runs):
            for name, tree in trees.items():
                rc, seconds, rss = run(tree, ["compare", str(base), str(new), "--fail-above", "5%"], Path(tmp))
                cpu[name].append(seconds)
                print(f"{name} run {attempt + 1}: exit {rc}, {seconds:.1f} s CPU, {rss / 2**20:.0f} MiB peak RSS")
        for i in range(opts.runs):
            print(f"run {i + 1}: this tree / reference CPU = {cpu['this tree'][i] / cpu['reference'][i]:.2f}")
        print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
