/* One MPI_Allreduce of COUNT floats (sum) on MPI_COMM_WORLD, checked, for tests/mpi/test_mpich_mpi.py:
 * the messages it sends (mpich_ucx_spy.c) say which algorithm MPICH ran. usage: mpich_allreduce COUNT */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world, count = argc > 1 ? atoi(argv[1]) : 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    float *in = malloc(sizeof(float) * (size_t)count), *out = malloc(sizeof(float) * (size_t)count);
    for (int i = 0; i < count; i++) in[i] = (float)(rank + i % 7);
    int rc = MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), wrong = 0;
    for (int i = 0; i < count; i++) wrong += out[i] != (float)(world * (world - 1) / 2 + world * (i % 7));
    if (rc != MPI_SUCCESS || wrong) fprintf(stderr, "rank %d: rc %d, %d wrong\n", rank, rc, wrong);
    MPI_Finalize();
    return rc != MPI_SUCCESS || wrong;
}
