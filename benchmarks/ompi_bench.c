/* A plain MPI program for bench_ompi_rules.py: what a job does with MPI_Allreduce, timed.
 *
 * usage: ompi_bench BUDGET_S STEP_BYTES BUCKET_BYTES STEPS SIZE...
 *
 * 1. An all-reduce loop at each SIZE (bytes of float32, summed in place as a job reduces gradients):
 *    three calls to warm up, then as many timed calls as fit in BUDGET_S (5 to 200), each between two
 *    barriers and timed on every rank; a call's time is its slowest rank's. Rank 0 prints
 *    "allreduce SIZE MEDIAN_US P25_US MIN_US CALLS". The result is checked once per size (every rank adds
 *    rank + 1, so each element must be n(n+1)/2); a wrong result aborts.
 * 2. A data-parallel step loop: STEP_BYTES of float32 "gradients" reduced bucket by bucket
 *    (BUCKET_BYTES each, as DDP reduces its buckets), between a forward/backward stand-in (two passes
 *    over the parameters) and the update (one pass). Rank 0 prints "step STEP_BYTES MEDIAN_US P25_US MIN_US STEPS"
 *    after one warm-up step.
 *
 * Nothing here names an algorithm: which one runs is Open MPI's choice, or the rules file's.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* After median(): v is sorted. */
static double p25(const double *v, int n) { return v[(n - 1) / 4]; }

static double slowest(double local) {
    double worst;
    MPI_Allreduce(&local, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

static void fill(float *buf, long count, int rank) {
    for (long i = 0; i < count; i++) buf[i] = (float)(rank + 1);
}

static void allreduce_loop(long bytes, double budget_s, int rank, int size, float *buf) {
    long count = bytes / 4;
    for (int w = 0; w < 3; w++) MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    fill(buf, count, rank);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double first = slowest(MPI_Wtime() - t0);
    float want = (float)size * (float)(size + 1) / 2.0f;
    int bad = 0;
    for (long i = 0; i < count; i++) bad += buf[i] != want;
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (any) {
        if (rank == 0) fprintf(stderr, "allreduce %ld bytes: %d wrong elements\n", bytes, any);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    int calls = (int)(budget_s / (first > 1e-6 ? first : 1e-6));
    calls = calls < 5 ? 5 : calls > 200 ? 200 : calls;
    double *t = malloc(sizeof(double) * (size_t)calls);
    for (int c = 0; c < calls; c++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double s = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        t[c] = slowest(MPI_Wtime() - s);
    }
    double med = median(t, calls);
    if (rank == 0) printf("allreduce %ld %.3f %.3f %.3f %d\n", bytes, med * 1e6, p25(t, calls) * 1e6, t[0] * 1e6, calls);
    fflush(stdout);
    free(t);
}

static void step_loop(long bytes, long bucket, int steps, int rank) {
    long count = bytes / 4, per = bucket / 4;
    float *param = malloc(sizeof(float) * (size_t)count), *grad = malloc(sizeof(float) * (size_t)count);
    fill(param, count, rank);
    double *t = malloc(sizeof(double) * (size_t)steps);
    for (int s = -1; s < steps; s++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < count; i++) grad[i] = param[i] * 0.5f + 1.0f; /* forward/backward stand-in */
        for (long i = 0; i < count; i++) grad[i] = grad[i] * grad[i] * 1e-3f;
        for (long off = 0; off < count; off += per) {
            long n = count - off < per ? count - off : per;
            MPI_Allreduce(MPI_IN_PLACE, grad + off, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        }
        for (long i = 0; i < count; i++) param[i] -= 1e-3f * grad[i];
        double took = slowest(MPI_Wtime() - t0);
        if (s >= 0) t[s] = took;
    }
    double med = median(t, steps);
    if (rank == 0) printf("step %ld %.3f %.3f %.3f %d\n", bytes, med * 1e6, p25(t, steps) * 1e6, t[0] * 1e6, steps);
    fflush(stdout);
    free(param);
    free(grad);
    free(t);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 6) {
        if (rank == 0) fprintf(stderr, "usage: %s BUDGET_S STEP_BYTES BUCKET_BYTES STEPS SIZE...\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double budget = atof(argv[1]);
    long step_bytes = atol(argv[2]), bucket = atol(argv[3]);
    int steps = atoi(argv[4]);
    long most = 4;
    for (int i = 5; i < argc; i++) most = atol(argv[i]) > most ? atol(argv[i]) : most;
    float *buf = malloc((size_t)most);
    for (int i = 5; i < argc; i++) allreduce_loop(atol(argv[i]), budget, rank, size, buf);
    if (step_bytes > 0 && steps > 0) step_loop(step_bytes, bucket, steps, rank);
    free(buf);
    MPI_Finalize();
    return 0;
}
