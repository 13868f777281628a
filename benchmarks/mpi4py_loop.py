"""mpi4py's all-reduce timed per call as collbench's CPU timer times a call (a clock read either side),
for bench_mpi_overhead.py. usage (under mpirun): python mpi4py_loop.py ITERS SIZE_BYTES...

Rank 0 prints "SIZE MEAN_US MEDIAN_US" per size: per call, the slowest rank's time (MPI_MAX over ranks).
"""

from __future__ import annotations

import statistics
import sys

import numpy as np
from mpi4py import MPI


def main() -> None:
    comm = MPI.COMM_WORLD
    iters = int(sys.argv[1])
    for arg in sys.argv[2:]:
        # Written, as the harness writes its buffers (untouched zeroed pages all map one zero page).
        a = np.ones(int(arg) // 4, dtype=np.float32)
        b = np.ones_like(a)
        for _ in range(5):
            comm.Allreduce(a, b, op=MPI.SUM)
        times = np.empty(iters)
        wtime = MPI.Wtime
        allreduce = comm.Allreduce
        comm.Barrier()
        for k in range(iters):
            t0 = wtime()
            allreduce(a, b, op=MPI.SUM)
            times[k] = (wtime() - t0) * 1e6
        slowest = np.empty_like(times)
        comm.Reduce(times, slowest, op=MPI.MAX, root=0)
        if comm.rank == 0:
            print(arg, f"{slowest.mean():.4f}", f"{statistics.median(slowest.tolist()):.4f}", flush=True)


if __name__ == "__main__":
    main()
