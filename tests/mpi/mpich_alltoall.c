/* One MPI_Alltoall of COUNT floats per rank (COUNT/ranks a block), in place when asked, checked, for
 * tests/mpi/test_mpich_mpi.py. usage: mpich_alltoall COUNT IN_PLACE(0|1) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, world, count = argc > 1 ? atoi(argv[1]) : 0, in_place = argc > 2 && atoi(argv[2]);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    int block = count / world, wrong = 0;
    float *in = malloc(sizeof(float) * (size_t)count), *out = malloc(sizeof(float) * (size_t)count);
    for (int i = 0; i < count; i++) in[i] = out[i] = (float)(rank * 1000 + i / block);
    int rc = in_place ? MPI_Alltoall(MPI_IN_PLACE, block, MPI_FLOAT, out, block, MPI_FLOAT, MPI_COMM_WORLD)
                      : MPI_Alltoall(in, block, MPI_FLOAT, out, block, MPI_FLOAT, MPI_COMM_WORLD);
    /* block r of rank s goes to rank r at place s: out[s * block + j] = s * 1000 + rank */
    for (int i = 0; i < count; i++) wrong += out[i] != (float)((i / block) * 1000 + rank);
    if (rc != MPI_SUCCESS || wrong) fprintf(stderr, "rank %d: rc %d, %d wrong\n", rank, rc, wrong);
    MPI_Finalize();
    return rc != MPI_SUCCESS || wrong;
}
