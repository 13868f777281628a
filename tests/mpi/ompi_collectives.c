/* Runs MPI collectives and reports, per call, which Open MPI algorithm ran (through the preloaded shim).
 *
 * usage: ompi_collectives OUT_DIR COMM_SIZES SIZE... (COMM_SIZES like 2,3,4; SIZE like allreduce:1500)
 * For each communicator size k (ranks 0..k-1 of MPI_COMM_WORLD, split off), each collective at each
 * size in bytes (nccl-tests' size: the whole gathered or scattered buffer), rank r writes
 * "k collective bytes function" to OUT_DIR/rank<r>.txt (allgather, reduce_scatter_block, alltoall, gather
 * and scatter only at multiples of k: their bytes are k equal blocks). Bytes are MPI_UINT8_T elements, so
 * the size coll/tuned compares with its rules is exactly the bytes asked for (barrier: it ignores them,
 * Open MPI looks its rules up at 0). Gather and scatter are rooted at 0, and every rank passes both
 * sides' counts and types: coll/tuned sizes the call from the send side on every rank.
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef const char *(*take_fn)(char *, size_t);

static void run(const char *coll, long bytes, MPI_Comm comm, unsigned char *a, unsigned char *b, int *counts) {
    int p, rank;
    MPI_Comm_size(comm, &p);
    MPI_Comm_rank(comm, &rank);
    int n = (int)bytes;
    if (!strcmp(coll, "allreduce")) {
        MPI_Allreduce(a, b, n, MPI_UINT8_T, MPI_SUM, comm);
    } else if (!strcmp(coll, "allgather")) {
        MPI_Allgather(a, n / p, MPI_UINT8_T, b, n / p, MPI_UINT8_T, comm);
    } else if (!strcmp(coll, "bcast")) {
        MPI_Bcast(a, n, MPI_UINT8_T, 0, comm);
    } else if (!strcmp(coll, "reduce")) {
        MPI_Reduce(a, b, n, MPI_UINT8_T, MPI_SUM, 0, comm);
    } else if (!strcmp(coll, "reduce_scatter")) {
        for (int i = 0; i < p; i++) counts[i] = n / p + (i < n % p);
        MPI_Reduce_scatter(a, b, counts, MPI_UINT8_T, MPI_SUM, comm);
    } else if (!strcmp(coll, "reduce_scatter_block")) {
        MPI_Reduce_scatter_block(a, b, n / p, MPI_UINT8_T, MPI_SUM, comm);
    } else if (!strcmp(coll, "alltoall")) {
        MPI_Alltoall(a, n / p, MPI_UINT8_T, b, n / p, MPI_UINT8_T, comm);
    } else if (!strcmp(coll, "gather")) {
        MPI_Gather(a, n / p, MPI_UINT8_T, b, n / p, MPI_UINT8_T, 0, comm);
    } else if (!strcmp(coll, "scatter")) {
        MPI_Scatter(a, n / p, MPI_UINT8_T, b, n / p, MPI_UINT8_T, 0, comm);
    } else if (!strcmp(coll, "barrier")) {
        MPI_Barrier(comm);
    } else {
        fprintf(stderr, "unknown collective %s\n", coll);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    take_fn take = (take_fn)dlsym(RTLD_DEFAULT, "collbench_shim_take");
    if (argc < 3 || !take) {
        fprintf(stderr, argc < 3 ? "usage: %s OUT_DIR COMM_SIZES COLL:BYTES...\n" : "%s: the shim is not preloaded\n",
                argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long most = 1;
    for (int i = 3; i < argc; i++) {
        long v = atol(strchr(argv[i], ':') + 1);
        if (v > most) most = v;
    }
    unsigned char *a = calloc((size_t)most, 1), *b = calloc((size_t)most, 1);
    int *counts = calloc((size_t)world, sizeof(int));
    char path[4096], seen[512];
    snprintf(path, sizeof path, "%s/rank%d.txt", argv[1], rank);
    FILE *out = fopen(path, "w");
    char sizes[1024];
    snprintf(sizes, sizeof sizes, "%s", argv[2]);
    for (char *tok = strtok(sizes, ","); tok; tok = strtok(NULL, ",")) {
        int k = atoi(tok);
        MPI_Comm comm;
        MPI_Comm_split(MPI_COMM_WORLD, rank < k ? 0 : MPI_UNDEFINED, rank, &comm);
        if (comm == MPI_COMM_NULL) continue;
        for (int i = 3; i < argc; i++) {
            char coll[64];
            snprintf(coll, sizeof coll, "%.*s", (int)(strchr(argv[i], ':') - argv[i]), argv[i]);
            long bytes = atol(strchr(argv[i], ':') + 1);
            int blocks = !strcmp(coll, "allgather") || !strcmp(coll, "reduce_scatter_block") ||
                         !strcmp(coll, "alltoall") || !strcmp(coll, "gather") || !strcmp(coll, "scatter");
            if (blocks && (bytes < k || bytes % k)) continue; /* not a size these k ranks can have */
            take(seen, sizeof seen);
            run(coll, bytes, comm, a, b, counts);
            fprintf(out, "%d %s %ld %s\n", k, coll, bytes, take(seen, sizeof seen));
        }
        MPI_Comm_free(&comm);
    }
    fclose(out);
    free(a);
    free(b);
    free(counts);
    MPI_Finalize();
    return 0;
}
