"""How much `sweep --backend mpi`'s measuring adds to Open MPI's all-reduce: collbench's C harness and
mpi4py, each against a bare C loop timed with MPI_Wtime (mpi_bare_loop.c, as OSU's benchmarks time).

    python benchmarks/bench_mpi_overhead.py [--rounds 3] [--ranks 2]

Per size (8 B to 1 MiB, float32 sum, out of place, Open MPI's own algorithm): the mean microseconds
per call of each, and the ratio to the bare loop, measured in the same run, the three methods
interleaved round by round (each round: bare, harness, mpi4py, one mpirun each); the figure per method
is the median over rounds. The harness times each call on its own (MPI_Wtime either side, the slowest
rank's per call), as do rows; mpi4py is timed the same way from Python (the Python worker's way).
All three run under ``chrt -r 1`` (SCHED_RR 1, inherited by mpirun's ranks) where permitted, as
collbench's sweep runs its ranks, so that a busy host's scheduler adds as little as it can to any of
them (``--normal-scheduler`` to leave it out). Target: the chosen way within a few percent of the bare
loop at every size. mpi4py is skipped with a
note where it is not installed (`pip install mpi4py`; it is not a dependency of collbench).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from collbench.runtime.host.rank_priority import permitted
from collbench.runtime.mpi.harness import HarnessJob, HarnessVariant
from collbench.runtime.mpi.ompi_tools import OpenMpiTools, build_harness, find_tools, mpirun_command, ompi_environment

HERE = Path(__file__).resolve().parent
SIZES = (8, 1024, 65536, 1 << 20)


def iters_for(size: int) -> int:
    return 2000 if size <= 65536 else 300


CALLS_PER_LOOP = 10


def bare(tools_mpirun: list[str], program: Path, size: int) -> tuple[float, float]:
    """Median and mean over loops of CALLS_PER_LOOP calls, microseconds per call."""
    out = subprocess.run(
        [*tools_mpirun, str(program), str(iters_for(size) // CALLS_PER_LOOP), str(CALLS_PER_LOOP), str(size)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    return float(out.split()[1]), float(out.split()[2])


def harness(prefix: list[str], tools: OpenMpiTools, built: Path, ranks: int, size: int) -> tuple[float, float]:
    cmd = prefix + mpirun_command(
        tools, built, ranks, ["float32", "sum", "0", "0", "0", HarnessVariant("allreduce", 0, 0).argument()]
    )
    with HarnessJob(cmd, 300.0, ompi_environment()) as job:
        job.start()
        prepared = job.prepare(0, size // 4, False, 5, True, "benchmark")
        assert prepared.error_code == 0 and prepared.wrong == 0, prepared
        samples = job.time(iters_for(size))
    return statistics.median(samples), statistics.fmean(samples)


def with_mpi4py(tools_mpirun: list[str], size: int) -> tuple[float, float]:
    cmd = [*tools_mpirun, sys.executable, str(HERE / "mpi4py_loop.py"), str(iters_for(size)), str(size)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300).stdout.split()
    return float(out[2]), float(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--normal-scheduler", action="store_true")
    args = parser.parse_args()
    tools = find_tools()
    try:
        import mpi4py  # noqa: F401

        have_mpi4py = True
    except ImportError:
        have_mpi4py = False
        print("note: mpi4py is not installed (pip install mpi4py): its column is left out")
    work = Path(tempfile.mkdtemp(prefix="bench-mpi-"))
    program = work / "mpi_bare_loop"
    subprocess.run([tools.mpicc, "-O2", "-o", str(program), str(HERE / "mpi_bare_loop.c")], check=True)
    built = build_harness(tools, print)
    chrt = shutil.which("chrt")
    realtime = not args.normal_scheduler and chrt is not None and permitted()
    base = [*([chrt, "-r", "1"] if realtime and chrt else []), tools.mpirun, "-np", str(args.ranks)]
    if os.geteuid() == 0:
        base.append("--allow-run-as-root")
    print(
        f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}; {args.ranks} ranks; {args.rounds} rounds; "
        f"{'SCHED_RR 1' if realtime else 'normal scheduler'}"
    )
    kinds = ("bare", "bare_mean", "harness", "harness_mean", "mpi4py", "mpi4py_mean")
    results: dict[str, dict[int, list[float]]] = {k: {s: [] for s in SIZES} for k in kinds}
    for _ in range(args.rounds):
        for size in SIZES:
            got = {
                "bare": bare(base, program, size),
                "harness": harness(base[:3] if realtime else [], tools, built, args.ranks, size),
            }
            if have_mpi4py:
                got["mpi4py"] = with_mpi4py(base, size)
            for kind, (median, mean) in got.items():
                results[kind][size].append(median)
                results[kind + "_mean"][size].append(mean)
    print(f"load average after {os.getloadavg()[0]:.2f}")
    print("median us per call (x bare loop); mean us per call in brackets; each the median over rounds")
    print("| size B | bare C loop | collbench harness | mpi4py |")
    print("| --- | --- | --- | --- |")
    for size in SIZES:
        cells = [str(size)]
        b = statistics.median(results["bare"][size])
        for kind in ("bare", "harness", "mpi4py"):
            if not results[kind][size]:
                cells.append("-")
                continue
            median = statistics.median(results[kind][size])
            mean = statistics.median(results[kind + "_mean"][size])
            ratio = "" if kind == "bare" else f" (x{median / b:.3f})"
            cells.append(f"{median:.2f}{ratio} [{mean:.1f}]")
        print("| " + " | ".join(cells) + " |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
