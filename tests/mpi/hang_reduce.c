/* A hung MPI_Reduce for the timeout's test: on rank 1, a float reduce never returns (the harness's
 * own reduces, of counts and times, are of other types and go through). Everything else is Open MPI's. */
#include <mpi.h>
#include <unistd.h>

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype, MPI_Op op, int root, MPI_Comm comm) {
    int rank;
    PMPI_Comm_rank(comm, &rank);
    if (rank == 1 && dtype == MPI_FLOAT)
        for (;;) pause();
    return PMPI_Reduce(sbuf, rbuf, count, dtype, op, root, comm);
}
