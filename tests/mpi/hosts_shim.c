/* Preloaded into collbench's MPI harness by tests/mpi/test_mpi_nodes.py: each rank says it runs on
 * "node<rank % N>" (N from COLLBENCH_TEST_NODES), so one host stands for a job over N of them. Open MPI
 * sets OMPI_COMM_WORLD_RANK in every rank's environment; MPI_Get_processor_name fills at most
 * MPI_MAX_PROCESSOR_NAME (256 in Open MPI) characters and returns MPI_SUCCESS (0). */
#include <stdio.h>
#include <stdlib.h>

int MPI_Get_processor_name(char *name, int *resultlen) {
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    const char *nodes = getenv("COLLBENCH_TEST_NODES");
    int n = nodes ? atoi(nodes) : 1;
    *resultlen = snprintf(name, 64, "node%d", (rank ? atoi(rank) : 0) % (n > 0 ? n : 1));
    return 0;
}
