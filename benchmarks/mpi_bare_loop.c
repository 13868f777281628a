/* Open MPI's all-reduce in a bare loop timed with MPI_Wtime (as OSU's osu_allreduce times it): the
 * reference bench_mpi_overhead.py compares collbench's harness and mpi4py with.
 * usage: mpi_bare_loop REPS CALLS SIZE_BYTES...
 * Each of REPS loops runs CALLS calls between two MPI_Wtime reads, nothing else inside; per loop, the
 * slowest rank's time per call. Rank 0 prints "SIZE MEDIAN_US MEAN_US" over the loops (the median
 * leaves out loops a descheduled rank stalled, as collbench's rows do). Float32 sum, out of place,
 * Open MPI's own algorithm. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int reps = atoi(argv[1]);
    long calls = atol(argv[2]);
    double *mine = malloc(sizeof(double) * (size_t)reps), *slowest = malloc(sizeof(double) * (size_t)reps);
    for (int i = 3; i < argc; i++) {
        int n = atoi(argv[i]) / 4;
        float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
        /* Written, as the harness writes its buffers: untouched calloc pages all map one zero page. */
        for (int k = 0; k < n; k++) a[k] = b[k] = 1.0f;
        for (int w = 0; w < 5; w++) MPI_Allreduce(a, b, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        for (int r = 0; r < reps; r++) {
            double t0 = MPI_Wtime();
            for (long k = 0; k < calls; k++) MPI_Allreduce(a, b, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            mine[r] = (MPI_Wtime() - t0) * 1e6 / (double)calls;
        }
        MPI_Reduce(mine, slowest, reps, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            double sum = 0;
            for (int r = 0; r < reps; r++) sum += slowest[r];
            qsort(slowest, (size_t)reps, sizeof(double), cmp);
            double median = reps % 2 ? slowest[reps / 2] : (slowest[reps / 2 - 1] + slowest[reps / 2]) / 2;
            printf("%s %.4f %.4f\n", argv[i], median, sum / reps);
        }
        free(a);
        free(b);
    }
    free(mine);
    free(slowest);
    MPI_Finalize();
    return 0;
}
