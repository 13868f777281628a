/* Prints where each rank runs: "rank R host H cpus C..." (its hostname and the CPUs it is bound to).
 * The rankfile tests read it to see where mpirun put each MPI_COMM_WORLD rank. */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    char host[256] = "?";
    gethostname(host, sizeof host);
    char line[4096];
    int used = snprintf(line, sizeof line, "rank %d host %s cpus", rank, host);
    for (int c = 0; c < CPU_SETSIZE && used < (int)sizeof line - 16; c++)
        if (CPU_ISSET(c, &set)) used += snprintf(line + used, sizeof line - used, " %d", c);
    printf("%s\n", line);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
