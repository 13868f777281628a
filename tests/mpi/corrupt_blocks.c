/* A broken MPI_Alltoall, MPI_Gather, MPI_Scatter and MPI_Sendrecv(_replace) for the data check's test:
 * each calls the real one (PMPI_*, the MPI standard's profiling interface), then one rank adds 1 to the
 * last float of what it received (rank 1; the root for gather, whose output is the only one checked).
 * Preloaded, they replace libmpi's for the program; every other call is Open MPI's own. */
#include <mpi.h>

static void spoil(void *buf, long last, MPI_Datatype type, int who, MPI_Comm comm) {
    int rank;
    PMPI_Comm_rank(comm, &rank);
    if (rank == who && last >= 0 && type == MPI_FLOAT) ((float *)buf)[last] += 1.0f;
}

int MPI_Alltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, MPI_Comm comm) {
    int size, rc = PMPI_Alltoall(s, sc, st, r, rc_, rt, comm);
    PMPI_Comm_size(comm, &size);
    if (rc == MPI_SUCCESS) spoil(r, (long)size * rc_ - 1, rt, 1, comm);
    return rc;
}

int MPI_Gather(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, int root, MPI_Comm comm) {
    int size, rc = PMPI_Gather(s, sc, st, r, rc_, rt, root, comm);
    PMPI_Comm_size(comm, &size);
    if (rc == MPI_SUCCESS) spoil(r, (long)size * rc_ - 1, rt, root, comm);
    return rc;
}

int MPI_Scatter(const void *s, int sc, MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, int root, MPI_Comm comm) {
    int rc = PMPI_Scatter(s, sc, st, r, rc_, rt, root, comm);
    if (rc == MPI_SUCCESS && r != MPI_IN_PLACE) spoil(r, rc_ - 1, rt, 1 == root ? 2 : 1, comm);
    return rc;
}

int MPI_Sendrecv(const void *s, int sc, MPI_Datatype st, int dest, int stag, void *r, int rc_, MPI_Datatype rt,
                 int source, int rtag, MPI_Comm comm, MPI_Status *status) {
    int rc = PMPI_Sendrecv(s, sc, st, dest, stag, r, rc_, rt, source, rtag, comm, status);
    if (rc == MPI_SUCCESS) spoil(r, rc_ - 1, rt, 1, comm);
    return rc;
}

int MPI_Sendrecv_replace(void *b, int c, MPI_Datatype t, int dest, int stag, int source, int rtag, MPI_Comm comm,
                         MPI_Status *status) {
    int rc = PMPI_Sendrecv_replace(b, c, t, dest, stag, source, rtag, comm, status);
    if (rc == MPI_SUCCESS) spoil(b, c - 1, t, 1, comm);
    return rc;
}
