"""Peak memory of one rank for a large point, as a multiple of its buffer (issue 12 item 6).

Runs the real CLI: ``sweep --ranks 2 --backend gloo --op all-reduce --algo ring -b SIZE -e SIZE -n 1 -w 0``
with the data check on and off, and a 1 KiB sweep as the reference (what a rank costs before any
buffer), in the same run. The largest process's peak RSS is read from ``RUSAGE_CHILDREN`` (every
rank is a waited-for descendant). Target: under 4x the buffer with the check on, everything included.

/work/venv/bin/python benchmarks/bench_check_memory.py [--size 256M]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def peak_rss(size: str, check: int, stream: Path) -> int:
    """Peak RSS in bytes of the largest process of one sweep (its own measuring process is fresh)."""
    cmd = [
        sys.executable, "-c", _CHILD, sys.executable, "-m", "collbench.cli.app", "sweep", "--ranks", "2",
        "--backend", "gloo", "--op", "all-reduce", "--algo", "ring", "-b", size, "-e", size, "-n", "1",
        "-w", "0", "-c", str(check), "--stream", str(stream),
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=1200)
    rc, rss = (int(x) for x in out.stdout.split())
    if rc != 0:
        raise SystemExit(f"sweep exited {rc}: {out.stderr.strip()}")
    return rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="256M")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    size_bytes = int(args.size[:-1]) * units[args.size[-1].upper()] if args.size[-1].isalpha() else int(args.size)
    with tempfile.TemporaryDirectory() as tmp:
        # A stream of its own each: a sweep refuses a stream that already holds rows.
        base = peak_rss("1K", 1, Path(tmp) / "base.jsonl")
        off = peak_rss(args.size, 0, Path(tmp) / "check-off.jsonl")
        on = peak_rss(args.size, 1, Path(tmp) / "check-on.jsonl")
    mib = 1 << 20
    figures = {
        "size_bytes": size_bytes,
        "base_rss_mib": round(base / mib, 1),
        "peak_rss_mib_check_off": round(off / mib, 1),
        "peak_rss_mib_check_on": round(on / mib, 1),
        "ratio_to_buffer_check_on": round(on / size_bytes, 2),
        "check_adds_mib": round((on - off) / mib, 1),
    }
    print(json.dumps(figures, indent=2))
    print(f"peak RSS {on / mib:.0f} MiB = {on / size_bytes:.2f}x the {args.size} buffer (target < 4x)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
