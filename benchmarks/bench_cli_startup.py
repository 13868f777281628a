"""CPU time of `collbench --help` and of every command's `--help`: what every command pays before it does
anything (issue 34's target: under 0.3 s of CPU each, with no torch import until a command needs it).

Each help runs ``--runs`` times in a fresh interpreter (the installed ``collbench`` entry point); the
user + system CPU of that child alone comes from ``RUSAGE_CHILDREN`` of a wrapper process. The best
run is reported (the least disturbed by other processes on a shared machine), with the median beside
it, and the load average at the start, since a loaded machine's caches stretch CPU time too.

.venv/bin/python benchmarks/bench_cli_startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys

_CHILD = """
import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(rc, usage.ru_utime + usage.ru_stime)
"""

TARGET_S = 0.3


def commands() -> list[list[str]]:
    """Every command and group, as the root lists them (its table: nothing is imported to list them)."""
    from collbench.cli.app import COMMANDS, GROUPS

    out: list[list[str]] = [[]]
    out += [[name] for name in COMMANDS]
    for name in GROUPS:
        out.append([name])
    out += [["export", "nccl-tuner"], ["import", "nccl-tests"], ["profile", "merge"]]
    return out


def cpu_seconds(argv: list[str]) -> float:
    out = subprocess.run([sys.executable, "-c", _CHILD, *argv], capture_output=True, text=True, check=True)
    rc, seconds = out.stdout.split()
    if rc != "0":
        raise SystemExit(f"{' '.join(argv)} exited {rc}")
    return float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    exe = shutil.which("collbench") or os.path.join(os.path.dirname(sys.executable), "collbench")
    print(f"load average at start: {os.getloadavg()[0]:.1f}; {args.runs} runs each; CPU s (user + system)")
    print(f"{'command':<28} {'best':>6} {'median':>7}  target {TARGET_S} s")
    worst = 0.0
    for words in commands():
        times = [cpu_seconds([exe, *words, "--help"]) for _ in range(args.runs)]
        best = min(times)
        worst = max(worst, best)
        label = " ".join(["collbench", *words, "--help"])
        print(f"{label:<28} {best:6.3f} {statistics.median(times):7.3f}  {'ok' if best < TARGET_S else 'MISSED'}")
    print(f"slowest best: {worst:.3f} s")


if __name__ == "__main__":
    main()
