/* LD_PRELOAD shim: which ompi_coll_base_* algorithm did Open MPI's coll/tuned run?
 *
 * Debian's Open MPI 4.1 prints nothing about coll/tuned's decisions, at any verbosity. But
 * mca_coll_tuned.so calls the algorithms it picks, ompi_coll_base_<coll>_intra_<alg>, which libmpi
 * exports, through its PLT (`nm -D --undefined-only mca_coll_tuned.so` lists them), so a preloaded
 * definition of the same name is the one it reaches. Each wrapper notes its name and calls the real
 * function (dlsym(RTLD_NEXT)). Algorithms call one another (nonoverlapping allreduce runs a reduce and
 * a bcast through the communicator's own collectives): only the outermost call is what coll/tuned
 * chose, so nested calls are not noted.
 *
 * Prototypes: Open MPI v4.1.4 ompi/mca/coll/base/coll_base_functions.h, with the opaque structs as void *.
 * alltoall, barrier, gather and scatter: the functions `nm -D --undefined-only mca_coll_tuned.so` lists
 * for Debian 12's openmpi-bin 4.1.4 (ALLTOALL_ARGS, BARRIER_ARGS, GATHER_ARGS, SCATTER_ARGS there, and
 * the extra int of linear_sync and linear_nb). scan and exscan: SCAN_ARGS and EXSCAN_ARGS, the same
 * arguments as allreduce's; Debian 12's mca_coll_tuned.so lists their linear and recursivedoubling.
 * The program asks what ran since its last question through collbench_shim_take().
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __thread int depth;
static __thread char taken[512];

const char *collbench_shim_take(char *out, size_t n) {
    snprintf(out, n, "%s", taken[0] ? taken : "none");
    taken[0] = '\0';
    return out;
}

static void note(const char *name) {
    if (depth > 0) return;
    size_t used = strlen(taken);
    snprintf(taken + used, sizeof taken - used, "%s%s", used ? "+" : "", name);
}

static void *real(const char *name) {
    void *fn = dlsym(RTLD_NEXT, name);
    if (!fn) {
        fprintf(stderr, "collbench shim: %s not found after the shim\n", name);
        abort();
    }
    return fn;
}

#define WRAP(NAME, PARAMS, ARGS)                                                   \
    int NAME PARAMS {                                                              \
        static int(*next) PARAMS;                                                  \
        if (!next) next = (int(*) PARAMS)real(#NAME);                              \
        note(#NAME);                                                               \
        depth++;                                                                   \
        int rc = next ARGS;                                                        \
        depth--;                                                                   \
        return rc;                                                                 \
    }

#define AG_P (const void *s, int sc, void *st, void *r, int rc_, void *rt, void *comm, void *m)
#define AG_A (s, sc, st, r, rc_, rt, comm, m)
WRAP(ompi_coll_base_allgather_intra_basic_linear, AG_P, AG_A)
WRAP(ompi_coll_base_allgather_intra_bruck, AG_P, AG_A)
WRAP(ompi_coll_base_allgather_intra_recursivedoubling, AG_P, AG_A)
WRAP(ompi_coll_base_allgather_intra_ring, AG_P, AG_A)
WRAP(ompi_coll_base_allgather_intra_neighborexchange, AG_P, AG_A)
WRAP(ompi_coll_base_allgather_intra_two_procs, AG_P, AG_A)

#define AR_P (const void *s, void *r, int c, void *d, void *o, void *comm, void *m)
#define AR_A (s, r, c, d, o, comm, m)
WRAP(ompi_coll_base_allreduce_intra_basic_linear, AR_P, AR_A)
WRAP(ompi_coll_base_allreduce_intra_nonoverlapping, AR_P, AR_A)
WRAP(ompi_coll_base_allreduce_intra_recursivedoubling, AR_P, AR_A)
WRAP(ompi_coll_base_allreduce_intra_ring, AR_P, AR_A)
WRAP(ompi_coll_base_allreduce_intra_redscat_allgather, AR_P, AR_A)
WRAP(ompi_coll_base_scan_intra_linear, AR_P, AR_A)
WRAP(ompi_coll_base_scan_intra_recursivedoubling, AR_P, AR_A)
WRAP(ompi_coll_base_exscan_intra_linear, AR_P, AR_A)
WRAP(ompi_coll_base_exscan_intra_recursivedoubling, AR_P, AR_A)
WRAP(ompi_coll_base_allreduce_intra_ring_segmented,
     (const void *s, void *r, int c, void *d, void *o, void *comm, void *m, uint32_t seg), (s, r, c, d, o, comm, m, seg))

#define BC_P(...) (void *b, int c, void *d, int root, void *comm, void *m, ##__VA_ARGS__)
WRAP(ompi_coll_base_bcast_intra_basic_linear, BC_P(), (b, c, d, root, comm, m))
WRAP(ompi_coll_base_bcast_intra_chain, BC_P(uint32_t seg, int32_t chains), (b, c, d, root, comm, m, seg, chains))
WRAP(ompi_coll_base_bcast_intra_pipeline, BC_P(uint32_t seg), (b, c, d, root, comm, m, seg))
WRAP(ompi_coll_base_bcast_intra_split_bintree, BC_P(uint32_t seg), (b, c, d, root, comm, m, seg))
WRAP(ompi_coll_base_bcast_intra_bintree, BC_P(uint32_t seg), (b, c, d, root, comm, m, seg))
WRAP(ompi_coll_base_bcast_intra_binomial, BC_P(uint32_t seg), (b, c, d, root, comm, m, seg))
WRAP(ompi_coll_base_bcast_intra_knomial, BC_P(uint32_t seg, int radix), (b, c, d, root, comm, m, seg, radix))
WRAP(ompi_coll_base_bcast_intra_scatter_allgather, BC_P(uint32_t seg), (b, c, d, root, comm, m, seg))
WRAP(ompi_coll_base_bcast_intra_scatter_allgather_ring, BC_P(uint32_t seg), (b, c, d, root, comm, m, seg))

#define RD_P(...) (const void *s, void *r, int c, void *d, void *o, int root, void *comm, void *m, ##__VA_ARGS__)
#define RD_A s, r, c, d, o, root, comm, m
WRAP(ompi_coll_base_reduce_intra_basic_linear, RD_P(), (RD_A))
WRAP(ompi_coll_base_reduce_intra_chain, RD_P(uint32_t seg, int fanout, int mor), (RD_A, seg, fanout, mor))
WRAP(ompi_coll_base_reduce_intra_pipeline, RD_P(uint32_t seg, int mor), (RD_A, seg, mor))
WRAP(ompi_coll_base_reduce_intra_binary, RD_P(uint32_t seg, int mor), (RD_A, seg, mor))
WRAP(ompi_coll_base_reduce_intra_binomial, RD_P(uint32_t seg, int mor), (RD_A, seg, mor))
WRAP(ompi_coll_base_reduce_intra_in_order_binary, RD_P(uint32_t seg, int mor), (RD_A, seg, mor))
WRAP(ompi_coll_base_reduce_intra_redscat_gather, RD_P(), (RD_A))

#define RS_P (const void *s, void *r, const int *rcounts, void *d, void *o, void *comm, void *m)
#define RS_A (s, r, rcounts, d, o, comm, m)
WRAP(ompi_coll_base_reduce_scatter_intra_nonoverlapping, RS_P, RS_A)
WRAP(ompi_coll_base_reduce_scatter_intra_basic_recursivehalving, RS_P, RS_A)
WRAP(ompi_coll_base_reduce_scatter_intra_ring, RS_P, RS_A)
WRAP(ompi_coll_base_reduce_scatter_intra_butterfly, RS_P, RS_A)

#define RSB_P (const void *s, void *r, int rcount, void *d, void *o, void *comm, void *m)
#define RSB_A (s, r, rcount, d, o, comm, m)
WRAP(ompi_coll_base_reduce_scatter_block_basic_linear, RSB_P, RSB_A)
WRAP(ompi_coll_base_reduce_scatter_block_intra_recursivedoubling, RSB_P, RSB_A)
WRAP(ompi_coll_base_reduce_scatter_block_intra_recursivehalving, RSB_P, RSB_A)
WRAP(ompi_coll_base_reduce_scatter_block_intra_butterfly, RSB_P, RSB_A)

#define A2A_P(...) (const void *s, int sc, void *st, void *r, int rc_, void *rt, void *comm, void *m, ##__VA_ARGS__)
#define A2A_A s, sc, st, r, rc_, rt, comm, m
WRAP(ompi_coll_base_alltoall_intra_basic_linear, A2A_P(), (A2A_A))
WRAP(ompi_coll_base_alltoall_intra_pairwise, A2A_P(), (A2A_A))
WRAP(ompi_coll_base_alltoall_intra_bruck, A2A_P(), (A2A_A))
WRAP(ompi_coll_base_alltoall_intra_linear_sync, A2A_P(int max_requests), (A2A_A, max_requests))
WRAP(ompi_coll_base_alltoall_intra_two_procs, A2A_P(), (A2A_A))

#define BAR_P (void *comm, void *m)
#define BAR_A (comm, m)
WRAP(ompi_coll_base_barrier_intra_basic_linear, BAR_P, BAR_A)
WRAP(ompi_coll_base_barrier_intra_doublering, BAR_P, BAR_A)
WRAP(ompi_coll_base_barrier_intra_recursivedoubling, BAR_P, BAR_A)
WRAP(ompi_coll_base_barrier_intra_bruck, BAR_P, BAR_A)
WRAP(ompi_coll_base_barrier_intra_two_procs, BAR_P, BAR_A)
WRAP(ompi_coll_base_barrier_intra_tree, BAR_P, BAR_A)

/* Gather and scatter share their prototype (GATHER_ARGS and SCATTER_ARGS). */
#define GS_P(...) \
    (const void *s, int sc, void *st, void *r, int rc_, void *rt, int root, void *comm, void *m, ##__VA_ARGS__)
#define GS_A s, sc, st, r, rc_, rt, root, comm, m
WRAP(ompi_coll_base_gather_intra_basic_linear, GS_P(), (GS_A))
WRAP(ompi_coll_base_gather_intra_binomial, GS_P(), (GS_A))
WRAP(ompi_coll_base_gather_intra_linear_sync, GS_P(int first_segment_size), (GS_A, first_segment_size))
WRAP(ompi_coll_base_scatter_intra_basic_linear, GS_P(), (GS_A))
WRAP(ompi_coll_base_scatter_intra_binomial, GS_P(), (GS_A))
WRAP(ompi_coll_base_scatter_intra_linear_nb, GS_P(int max_reqs), (GS_A, max_reqs))
