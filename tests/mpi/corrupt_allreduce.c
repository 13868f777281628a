/* A broken MPI_Allreduce for the data check's test: the real one (PMPI_Allreduce, the MPI standard's
 * profiling interface), then rank 1 adds 1 to the last float of its result. Preloaded, it replaces
 * libmpi's MPI_Allreduce for the program; every other call is Open MPI's own. */
#include <mpi.h>

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype dtype, MPI_Op op, MPI_Comm comm) {
    int rc = PMPI_Allreduce(sbuf, rbuf, count, dtype, op, comm), rank;
    PMPI_Comm_rank(comm, &rank);
    if (rc == MPI_SUCCESS && rank == 1 && count > 0 && dtype == MPI_FLOAT) ((float *)rbuf)[count - 1] += 1.0f;
    return rc;
}
