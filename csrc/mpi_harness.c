/* collbench's measuring harness for an MPI library's own collectives (`collbench sweep --backend mpi`
 * for Open MPI, `--backend mpich` for MPICH): one source, built with each library's compiler wrapper.
 *
 * Purpose: time MPI collectives with each of the library's algorithms forced in turn, with no interpreter
 * between the timer and the call, and check every result the way collbench checks its other backends.
 * Requires: Open MPI 4.1 or later, built with mpicc at run time and cached (runtime/mpi/ompi_tools.py,
 * runtime/mpi/harness.py); or MPICH 4.0 or later (mpicc.mpich, runtime/mpi/mpich_sweep.py), given only
 * algorithm 0 variants: an MPICH job's algorithm is forced by its environment
 * (MPIR_CVAR_<COLL>_INTRA_ALGORITHM). What follows on coll/tuned is Open MPI's.
 *
 * Collectives: allreduce, bcast, reduce, allgather, reduce_scatter (MPI_Reduce_scatter), alltoall,
 * gather, scatter, barrier, scan, exscan, and sendrecv: collbench's ring shift (MPI_Sendrecv to rank+1 from rank-1),
 * which is point-to-point, so nothing of coll/tuned is set for it (only algorithm 0 is taken). Barrier
 * has no coll_tuned_barrier_algorithm_segmentsize (coll_tuned_barrier_decision.c), nor have scan and
 * exscan (coll_tuned_{scan,exscan}_decision.c), so only their algorithm is set. Exscan's rank 0 output,
 * which MPI leaves undefined, is not checked. Buffers follow collbench's ops (schedules/ops.py, nccl-tests' counting): COUNT is
 * the whole per-rank buffer; alltoall, gather and scatter move COUNT/ranks elements per block (COUNT a
 * multiple of the ranks); barrier ignores COUNT (0 allowed). In place: alltoall's output replaces its
 * input (MPI_IN_PLACE); scatter's rank r ends with block r at its place in a COUNT buffer, gather's
 * rank r starts with it there (the root passes MPI_IN_PLACE); sendrecv uses MPI_Sendrecv_replace.
 * Every rank passes the block count and datatype of both sides, even where MPI ignores them (the
 * root's in-place gather send, a non-root's scatter send): coll/tuned's dynamic rules size a gather or
 * scatter from them (sdtype x scount x ranks, coll_tuned_decision_dynamic.c), and ranks that size the
 * call differently would pick different algorithms.
 *
 * How each algorithm is forced: the job starts with OMPI_MCA_coll_tuned_use_dynamic_rules=1 (a
 * read-only MCA variable, MCA_BASE_VAR_SCOPE_READONLY in coll_tuned_component.c: set before MPI_Init
 * or never). coll_tuned_<coll>_algorithm and _segmentsize are MCA_BASE_VAR_SCOPE_ALL
 * (coll_tuned_<coll>_decision.c), so MPI_T_cvar_write may set them while running, and coll/tuned reads
 * them again for every new communicator (tuned_module_enable -> ompi_coll_tuned_forced_getvalues,
 * coll_tuned_module.c). So, for each variant given on the command line, the harness writes the
 * variables and duplicates MPI_COMM_WORLD: each duplicate keeps its own forced algorithm, and one job
 * measures every algorithm, interleaved if asked, on the same processes and memory.
 *
 * usage: mpi_harness DTYPE REDOP ROOT SEED REALTIME VARIANT...
 *   VARIANT is COLL:ALGORITHM:SEGMENT_BYTES (allreduce:5:65536; algorithm 0 is the library's own choice)
 *   REALTIME 1: each rank's measuring thread runs at SCHED_RR priority 1 once its communicators are made
 *   (an MPI rank spins while it waits for a peer: on a busy host, a peer that lost its core to
 *   another process is waited for a whole time slice, on calls of a few microseconds; collbench runs
 *   its gloo ranks the same way, runtime/host/rank_priority.py). 0: the normal scheduler.
 * Rank 0 reads commands on standard input (mpirun forwards it to rank 0) and answers on standard
 * output, each answer one line starting with "@cb ":
 *   P VARIANT COUNT IN_PLACE WARMUP CHECK   fill, run once, check (CHECK 1), then WARMUP untimed calls
 *       -> "@cb P <mpi error code or 0> <wrong elements over all ranks> <what ran, or -> <error text>"
 *       (what ran: the preloaded observing shim's answer, tests/mpi/ompi_observe_shim.c; - without it)
 *   T ITERS                           time ITERS calls, each on its own (MPI_Wtime around the call)
 *       -> "@cb T <us> <us> ..."     per iteration, the slowest rank's microseconds (MPI_MAX over ranks)
 *   Q                                 finish
 * At start it says "@cb H <the library's version> <nodes> <1: every rank at real-time priority>" (nodes:
 * distinct MPI_Get_processor_name).
 * Data: the pattern of collbench/runtime/executor/buffers.py (small integers, exact in every dtype
 * whatever the order of reduction), outputs preset to 77, compared exactly.
 */
#include <dlfcn.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SENTINEL 77
#define LINE 256

typedef const char *(*take_fn)(char *, size_t);

enum coll { ALLREDUCE, BCAST, REDUCE, ALLGATHER, REDUCE_SCATTER, ALLTOALL, GATHER, SCATTER, BARRIER, SENDRECV,
            SCAN, EXSCAN };
static const char *COLL_NAMES[] = {"allreduce", "bcast", "reduce", "allgather", "reduce_scatter", "alltoall",
                                   "gather", "scatter", "barrier", "sendrecv", "scan", "exscan"};
#define NCOLLS 12

typedef struct {
    enum coll coll;
    int algorithm, segment_bytes;
    MPI_Comm comm;
} variant_t;

static int rank, world;
static MPI_Datatype dtype;
static int elem_bytes, is_float, redop_kind; /* redop_kind: 0 sum, 1 prod, 2 min, 3 max */
static MPI_Op mpi_op;
static int root, seed;

/* The current point. */
static variant_t *cur;
static long count;
static int in_place;
static unsigned char *in_buf, *out_buf;
static int *counts;

static long mod(long a, long m) { return ((a % m) + m) % m; }

/* buffers.py's prod_spacing(world, dtype): one rank in so many holds a 2, at least 32 and more where the
 * twos of the whole world would pass the type's largest power of two (2^30 int32, 2^62 int64, 2^127
 * float32, 2^1023 float64: int32 past 960 ranks); prime to 5. buffers.py's sum_period stays 5 for
 * these four types below 2^20 ranks (float32's 2^24 exact integers hold 3 per 5 ranks), so sums keep it. */
static long prod_spacing = 32;
static long spacing_for(int ranks) {
    long top = is_float ? (elem_bytes == 4 ? 127 : 1023) : (elem_bytes == 4 ? 30 : 62);
    long q = (ranks + top - 1) / top;
    if (q < 32) q = 32;
    while (q % 5 == 0) q++;
    return q;
}

/* buffers.py's pattern(rank, index) for the reduction (or none: ops that do not reduce). */
static long pattern(int r, long idx, int reducing) {
    if (reducing && redop_kind == 0) return mod(idx * 7 + (r * 13 + seed * 3), 5) - 2;
    if (reducing && redop_kind == 1) {
        long two = mod(idx * 5 + (r + seed), prod_spacing) == 0 ? 2 : 1;
        long minus = mod(idx + (2 * r + seed), 3) == 0 ? -1 : 1;
        return two * minus;
    }
    return mod(idx * 31 + (r * 17 + seed * 7), 101) - 50;
}

static void store(unsigned char *buf, long i, double v) {
    switch (elem_bytes * 2 + is_float) {
        case 9: ((float *)buf)[i] = (float)v; break;
        case 17: ((double *)buf)[i] = v; break;
        case 8: ((int32_t *)buf)[i] = (int32_t)(int64_t)v; break;
        default: ((int64_t *)buf)[i] = (int64_t)v; break;
    }
}

static double load(const unsigned char *buf, long i) {
    switch (elem_bytes * 2 + is_float) {
        case 9: return ((const float *)buf)[i];
        case 17: return ((const double *)buf)[i];
        case 8: return ((const int32_t *)buf)[i];
        default: return (double)((const int64_t *)buf)[i];
    }
}

/* The exact reduction over ranks 0..upto-1 at element idx, cast to the dtype as buffers.py casts it. */
static double expected_prefix(long idx, int upto) {
    double acc = (double)pattern(0, idx, 1);
    for (int r = 1; r < upto; r++) {
        double v = (double)pattern(r, idx, 1);
        if (redop_kind == 0) acc += v;
        else if (redop_kind == 1) acc *= v;
        else if (redop_kind == 2) acc = v < acc ? v : acc;
        else acc = v > acc ? v : acc;
    }
    unsigned char one[8];
    store(one, 0, acc);
    return load(one, 0);
}

/* The exact reduction over every rank at element idx. */
static double expected_reduced(long idx) { return expected_prefix(idx, world); }

static int reduces(enum coll c) {
    return c == ALLREDUCE || c == REDUCE || c == REDUCE_SCATTER || c == SCAN || c == EXSCAN;
}

static long chunk(void) { return count / world; }

/* Whether COUNT is n equal blocks, one per rank. */
static int blocked(enum coll c) {
    return c == ALLGATHER || c == REDUCE_SCATTER || c == ALLTOALL || c == GATHER || c == SCATTER;
}

static unsigned char *at(unsigned char *buf, long i) { return buf + (size_t)i * (size_t)elem_bytes; }

static int call(void) {
    MPI_Comm comm = cur->comm;
    long n = count, k = chunk();
    switch (cur->coll) {
        case ALLREDUCE:
            return in_place ? MPI_Allreduce(MPI_IN_PLACE, in_buf, (int)n, dtype, mpi_op, comm)
                            : MPI_Allreduce(in_buf, out_buf, (int)n, dtype, mpi_op, comm);
        case BCAST:
            /* MPI_Bcast has one buffer: out of place, the root first copies its input into it, as
               collbench's torch backends do. */
            if (!in_place && rank == root) memcpy(out_buf, in_buf, (size_t)n * elem_bytes);
            return MPI_Bcast(in_place ? in_buf : out_buf, (int)n, dtype, root, comm);
        case REDUCE:
            if (in_place && rank == root) return MPI_Reduce(MPI_IN_PLACE, in_buf, (int)n, dtype, mpi_op, root, comm);
            return MPI_Reduce(in_buf, in_place ? NULL : out_buf, (int)n, dtype, mpi_op, root, comm);
        case ALLGATHER:
            return in_place ? MPI_Allgather(MPI_IN_PLACE, 0, dtype, out_buf, (int)k, dtype, comm)
                            : MPI_Allgather(in_buf, (int)k, dtype, out_buf, (int)k, dtype, comm);
        case REDUCE_SCATTER:
            for (int i = 0; i < world; i++) counts[i] = (int)k;
            return in_place ? MPI_Reduce_scatter(MPI_IN_PLACE, in_buf, counts, dtype, mpi_op, comm)
                            : MPI_Reduce_scatter(in_buf, out_buf, counts, dtype, mpi_op, comm);
        case ALLTOALL:
            return in_place ? MPI_Alltoall(MPI_IN_PLACE, (int)k, dtype, in_buf, (int)k, dtype, comm)
                            : MPI_Alltoall(in_buf, (int)k, dtype, out_buf, (int)k, dtype, comm);
        case GATHER:
            if (!in_place) return MPI_Gather(in_buf, (int)k, dtype, out_buf, (int)k, dtype, root, comm);
            if (rank == root) return MPI_Gather(MPI_IN_PLACE, (int)k, dtype, in_buf, (int)k, dtype, root, comm);
            return MPI_Gather(at(in_buf, rank * k), (int)k, dtype, out_buf, (int)k, dtype, root, comm);
        case SCATTER:
            if (!in_place) return MPI_Scatter(in_buf, (int)k, dtype, out_buf, (int)k, dtype, root, comm);
            if (rank == root) return MPI_Scatter(in_buf, (int)k, dtype, MPI_IN_PLACE, (int)k, dtype, root, comm);
            return MPI_Scatter(out_buf, (int)k, dtype, at(in_buf, rank * k), (int)k, dtype, root, comm);
        case BARRIER:
            return MPI_Barrier(comm);
        case SCAN:
            return in_place ? MPI_Scan(MPI_IN_PLACE, in_buf, (int)n, dtype, mpi_op, comm)
                            : MPI_Scan(in_buf, out_buf, (int)n, dtype, mpi_op, comm);
        case EXSCAN:
            return in_place ? MPI_Exscan(MPI_IN_PLACE, in_buf, (int)n, dtype, mpi_op, comm)
                            : MPI_Exscan(in_buf, out_buf, (int)n, dtype, mpi_op, comm);
        case SENDRECV: {
            int next = (rank + 1) % world, prev = (rank + world - 1) % world;
            if (in_place) return MPI_Sendrecv_replace(in_buf, (int)n, dtype, next, 0, prev, 0, comm, MPI_STATUS_IGNORE);
            return MPI_Sendrecv(in_buf, (int)n, dtype, next, 0, out_buf, (int)n, dtype, prev, 0, comm, MPI_STATUS_IGNORE);
        }
    }
    return MPI_ERR_OTHER;
}

/* Inputs from the pattern, outputs the op writes preset to the sentinel (buffers.fill). */
static void fill(void) {
    long k = chunk();
    int red = reduces(cur->coll);
    if (cur->coll == BARRIER) return;
    if (cur->coll == GATHER || cur->coll == SCATTER) {
        /* gather: every rank's own block; scatter: the root's whole buffer. Outputs: the sentinel. */
        int gather = cur->coll == GATHER;
        unsigned char *out = in_place ? in_buf : out_buf;
        long out_n = gather ? (rank == root ? count : 0) : (in_place ? count : k);
        for (long i = 0; i < out_n; i++) store(out, i, SENTINEL);
        if (gather) {
            unsigned char *mine = in_place ? at(in_buf, rank * k) : in_buf;
            for (long i = 0; i < k; i++) store(mine, i, (double)pattern(rank, rank * k + i, 0));
        } else if (rank == root) {
            for (long i = 0; i < count; i++) store(in_buf, i, (double)pattern(root, i, 0));
        }
        return;
    }
    if (cur->coll == ALLGATHER) {
        for (long i = 0; i < count; i++) store(out_buf, i, SENTINEL);
        unsigned char *mine = in_place ? out_buf + (size_t)(rank * k) * elem_bytes : in_buf;
        for (long i = 0; i < k; i++) store(mine, i, (double)pattern(rank, rank * k + i, 0));
        return;
    }
    for (long i = 0; i < count; i++) store(in_buf, i, (double)pattern(rank, i, red));
    long out_n = cur->coll == REDUCE_SCATTER ? k : count;
    if (!in_place)
        for (long i = 0; i < out_n; i++) store(out_buf, i, SENTINEL);
}

/* Elements of this rank's output that differ from the exact result (buffers.check_buffers). */
static int differs(const unsigned char *out, long i, int source) {
    unsigned char one[8];
    store(one, 0, (double)pattern(source, i, 0));
    return load(out, i) != load(one, 0);
}

static long check(void) {
    long k = chunk(), wrong = 0;
    const unsigned char *out = in_place && cur->coll != ALLGATHER ? in_buf : out_buf;
    switch (cur->coll) {
        case ALLTOALL: /* output block j = rank j's input block `rank` */
            for (long i = 0; i < count; i++) {
                unsigned char one[8];
                store(one, 0, (double)pattern((int)(i / k), rank * k + i % k, 0));
                wrong += load(out, i) != load(one, 0);
            }
            break;
        case GATHER:
            if (rank == root)
                for (long i = 0; i < count; i++) wrong += differs(out, i, (int)(i / k));
            break;
        case SCATTER: /* block `rank` of the root's buffer: at its place in place, else at the start */
            for (long i = 0; i < k; i++) {
                unsigned char one[8];
                store(one, 0, (double)pattern(root, rank * k + i, 0));
                wrong += load(out, in_place ? rank * k + i : i) != load(one, 0);
            }
            break;
        case SENDRECV:
            for (long i = 0; i < count; i++) wrong += differs(out, i, (rank + world - 1) % world);
            break;
        case BARRIER:
            break;
        case SCAN: /* ranks 0..rank, in that order */
            for (long i = 0; i < count; i++) wrong += load(out, i) != expected_prefix(i, rank + 1);
            break;
        case EXSCAN: /* ranks 0..rank-1; rank 0's output is undefined in MPI: not checked */
            if (rank > 0)
                for (long i = 0; i < count; i++) wrong += load(out, i) != expected_prefix(i, rank);
            break;
        case ALLREDUCE:
            for (long i = 0; i < count; i++) wrong += load(out, i) != expected_reduced(i);
            break;
        case REDUCE:
            if (rank == root)
                for (long i = 0; i < count; i++) wrong += load(out, i) != expected_reduced(i);
            break;
        case REDUCE_SCATTER: /* MPI puts the rank's block at the start of the receive buffer, in place too */
            for (long i = 0; i < k; i++) wrong += load(out, i) != expected_reduced(rank * k + i);
            break;
        case BCAST:
            for (long i = 0; i < count; i++) {
                unsigned char one[8];
                store(one, 0, (double)pattern(root, i, 0));
                wrong += load(out, i) != load(one, 0);
            }
            break;
        case ALLGATHER:
            for (long i = 0; i < count; i++) {
                unsigned char one[8];
                store(one, 0, (double)pattern((int)(i / k), i, 0));
                wrong += load(out, i) != load(one, 0);
            }
            break;
    }
    return wrong;
}

static void say(const char *fmt, const char *text) {
    if (rank == 0) {
        printf(fmt, text);
        fflush(stdout);
    }
}

/* The harness's own messages (commands, checks, times) between the measured calls. Under MPICH a forced
 * algorithm applies to every call of its collective on every communicator (MPIR_CVAR_<COLL>_INTRA_ALGORITHM
 * is read per call), and MPICH refuses one that cannot run a call (MPIR_CVAR_COLLECTIVE_FALLBACK=error):
 * reduce_scatter_allgather cannot reduce the harness's one int. So under MPICH they are point-to-point,
 * through rank 0 (O(ranks) messages per command, none O(ranks^2)); under Open MPI the collectives, whose
 * forced algorithms live on the measured communicators only. */
#ifdef MPICH_VERSION
#define CTL_TAG 7771
static void ctl_bcast(void *buf, int n, MPI_Datatype t) {
    if (rank == 0)
        for (int i = 1; i < world; i++) MPI_Send(buf, n, t, i, CTL_TAG, MPI_COMM_WORLD);
    else
        MPI_Recv(buf, n, t, 0, CTL_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}
static void ctl_reduce(const void *in, void *out, int n, MPI_Datatype t, MPI_Op op) {
    int size;
    MPI_Type_size(t, &size);
    if (rank != 0) {
        MPI_Send(in, n, t, 0, CTL_TAG, MPI_COMM_WORLD);
        return;
    }
    void *part = malloc((size_t)(n > 0 ? n : 1) * (size_t)size);
    memcpy(out, in, (size_t)n * (size_t)size);
    for (int i = 1; i < world; i++) {
        MPI_Recv(part, n, t, i, CTL_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Reduce_local(part, out, n, t, op);
    }
    free(part);
}
static void ctl_allreduce(const void *in, void *out, int n, MPI_Datatype t, MPI_Op op) {
    ctl_reduce(in, out, n, t, op);
    ctl_bcast(out, n, t);
}
static void ctl_barrier(void) {
    int one = 1, all;
    ctl_allreduce(&one, &all, 1, MPI_INT, MPI_MIN);
}
static void ctl_gather_names(const char *me, char *all) {
    if (rank != 0) {
        MPI_Send(me, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, CTL_TAG, MPI_COMM_WORLD);
        return;
    }
    memcpy(all, me, MPI_MAX_PROCESSOR_NAME);
    for (int i = 1; i < world; i++)
        MPI_Recv(all + (size_t)i * MPI_MAX_PROCESSOR_NAME, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, i, CTL_TAG, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
}
#else
static void ctl_bcast(void *buf, int n, MPI_Datatype t) { MPI_Bcast(buf, n, t, 0, MPI_COMM_WORLD); }
static void ctl_reduce(const void *in, void *out, int n, MPI_Datatype t, MPI_Op op) {
    MPI_Reduce(in, out, n, t, op, 0, MPI_COMM_WORLD);
}
static void ctl_allreduce(const void *in, void *out, int n, MPI_Datatype t, MPI_Op op) {
    MPI_Allreduce(in, out, n, t, op, MPI_COMM_WORLD);
}
static void ctl_barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }
static void ctl_gather_names(const char *me, char *all) {
    MPI_Gather(me, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
}
#endif

static int set_cvar(const char *name, int value) {
    int index, n;
    MPI_T_cvar_handle handle;
    if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) return -1;
    if (MPI_T_cvar_handle_alloc(index, NULL, &handle, &n) != MPI_SUCCESS) return -1;
    int rc = MPI_T_cvar_write(handle, &value);
    MPI_T_cvar_handle_free(&handle);
    return rc;
}

static int parse_variant(const char *text, variant_t *v) {
    char name[64];
    if (sscanf(text, "%63[a-z_]:%d:%d", name, &v->algorithm, &v->segment_bytes) != 3) return -1;
    for (int c = 0; c < NCOLLS; c++)
        if (!strcmp(name, COLL_NAMES[c])) {
            v->coll = (enum coll)c;
            return 0;
        }
    return -1;
}

/* Forces the variant's algorithm (and segment size) and makes its communicator. */
static int make_comm(variant_t *v) {
    char name[128];
    const char *coll = COLL_NAMES[v->coll];
    int tuned = v->coll != SENDRECV;
    int segmented = tuned && v->coll != BARRIER && v->coll != SCAN && v->coll != EXSCAN;
    if (!tuned && v->algorithm != 0) return -1;
    if (!segmented && v->segment_bytes != 0) return -2;
    /* Algorithm 0 with no segment size forces nothing: the library's own choice, set through no variable
     * (so the harness runs under MPICH too, whose algorithms are forced by the environment instead). */
    if (v->algorithm == 0 && v->segment_bytes == 0) tuned = segmented = 0;
    snprintf(name, sizeof name, "coll_tuned_%s_algorithm", coll);
    if (tuned && set_cvar(name, v->algorithm) != MPI_SUCCESS) return -1;
    snprintf(name, sizeof name, "coll_tuned_%s_algorithm_segmentsize", coll);
    if (segmented && set_cvar(name, v->segment_bytes) != MPI_SUCCESS) return -2;
    MPI_Comm_dup(MPI_COMM_WORLD, &v->comm);
    /* A forced algorithm that cannot run here (two_proc on more than 2 ranks) returns its error. */
    MPI_Comm_set_errhandler(v->comm, MPI_ERRORS_RETURN);
    if (segmented) set_cvar(name, 0);
    snprintf(name, sizeof name, "coll_tuned_%s_algorithm", coll);
    if (tuned) set_cvar(name, 0);
    return 0;
}

static int set_types(const char *dt, const char *op) {
    struct { const char *name; MPI_Datatype type; int bytes, is_float; } types[] = {
        {"float32", MPI_FLOAT, 4, 1}, {"float64", MPI_DOUBLE, 8, 1},
        {"int32", MPI_INT32_T, 4, 0}, {"int64", MPI_INT64_T, 8, 0},
    };
    int found = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcmp(dt, types[i].name)) {
            dtype = types[i].type;
            elem_bytes = types[i].bytes;
            is_float = types[i].is_float;
            found = 1;
        }
    const char *ops[] = {"sum", "prod", "min", "max"};
    MPI_Op mpi_ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
    redop_kind = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(op, ops[i])) {
            redop_kind = i;
            mpi_op = mpi_ops[i];
        }
    return found && redop_kind >= 0 ? 0 : -1;
}

static void grow(long n, size_t *have) {
    size_t want = (size_t)(n > 0 ? n : 1) * (size_t)elem_bytes;
    if (want <= *have) return;
    free(in_buf);
    free(out_buf);
    in_buf = malloc(want);
    out_buf = malloc(want);
    if (!in_buf || !out_buf) {
        fprintf(stderr, "collbench harness: rank %d cannot allocate %zu bytes\n", rank, want);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    *have = want;
}

static int compare_names(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

static void announce(int realtime) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING], me[MPI_MAX_PROCESSOR_NAME];
    int len;
    MPI_Get_library_version(version, &len);
    MPI_Get_processor_name(me, &len);
    char *all = rank == 0 ? calloc((size_t)world, MPI_MAX_PROCESSOR_NAME) : NULL;
    ctl_gather_names(me, all);
    if (rank != 0) return;
    /* Distinct names counted after sorting them: comparing every name with every earlier one was
     * O(world^2) on rank 0 (16,384 ranks: 134 million comparisons before the first point). */
    qsort(all, (size_t)world, MPI_MAX_PROCESSOR_NAME, compare_names);
    int nodes = world > 0;
    for (int i = 1; i < world; i++)
        nodes += strcmp(all + (size_t)i * MPI_MAX_PROCESSOR_NAME, all + (size_t)(i - 1) * MPI_MAX_PROCESSOR_NAME) != 0;
    free(all);
    /* "Open MPI v4.1.4, package: ..." -> 4.1.4; "MPICH Version:\t4.0.2\n..." -> 4.0.2 */
    char number[64] = "?";
    const char *v = strstr(version, "MPICH Version:");
    if (v) sscanf(v + strlen("MPICH Version:"), " %63[0-9.a-z]", number);
    else if ((v = strstr(version, " v"))) sscanf(v + 2, "%63[0-9.a-z]", number);
    printf("@cb H %s %d %d\n", number, nodes, realtime);
    fflush(stdout);
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init(&argc, &argv);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (argc < 7 || set_types(argv[1], argv[2]) != 0) {
        say("@cb E %s\n",
            "usage: mpi_harness DTYPE(float32|float64|int32|int64) REDOP(sum|prod|min|max) ROOT SEED REALTIME VARIANT...");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    prod_spacing = spacing_for(world);
    root = atoi(argv[3]);
    seed = atoi(argv[4]);
    int realtime = atoi(argv[5]);
    int nvariants = argc - 6;
    variant_t *variants = calloc((size_t)nvariants, sizeof *variants);
    for (int i = 0; i < nvariants; i++) {
        int rc = parse_variant(argv[6 + i], &variants[i]);
        if (rc == 0) rc = make_comm(&variants[i]);
        if (rc != 0) {
            char why[LINE];
            snprintf(why, sizeof why, "%s: %s", argv[6 + i],
                     rc == -1 ? "this Open MPI does not take that algorithm" : "this Open MPI does not take that segment size");
            say("@cb E %s\n", why);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (realtime) {
        struct sched_param param = {.sched_priority = 1};
        realtime = sched_setscheduler(0, SCHED_RR, &param) == 0;
    }
    int everywhere;
    ctl_allreduce(&realtime, &everywhere, 1, MPI_INT, MPI_MIN);
    announce(everywhere);
    take_fn take = (take_fn)dlsym(RTLD_DEFAULT, "collbench_shim_take");
    counts = calloc((size_t)world, sizeof(int));
    size_t have = 0;
    double *times = NULL, *slowest = NULL;
    long times_have = 0;
    char line[LINE];
    for (;;) {
        memset(line, 0, sizeof line);
        if (rank == 0 && !fgets(line, sizeof line, stdin)) snprintf(line, sizeof line, "Q\n");
        ctl_bcast(line, LINE, MPI_CHAR);
        if (line[0] == 'Q') break;
        if (line[0] == 'P') {
            int v, warmup, checking;
            if (sscanf(line + 1, "%d %ld %d %d %d", &v, &count, &in_place, &warmup, &checking) != 5 || v < 0 ||
                v >= nvariants || count < (variants[v].coll == BARRIER ? 0 : 1) ||
                (blocked(variants[v].coll) && count % world)) {
                say("@cb E bad command: %s", line);
                continue;
            }
            cur = &variants[v];
            grow(count, &have);
            fill();
            char seen[512] = "-";
            if (take) take(seen, sizeof seen);
            int rc = call(), worst;
            if (take) take(seen, sizeof seen);
            ctl_allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX);
            long wrong = worst == MPI_SUCCESS && checking ? check() : 0, total = 0;
            ctl_reduce(&wrong, &total, 1, MPI_LONG, MPI_SUM);
            for (int i = 0; worst == MPI_SUCCESS && i < warmup; i++) call();
            if (rank == 0) {
                char why[MPI_MAX_ERROR_STRING] = "";
                int len = 0;
                /* rank 0's own error where it has one: MPICH's string for another rank's code (the
                 * largest) has lost that rank's error stack, and says only which call failed */
                if (worst != MPI_SUCCESS) MPI_Error_string(rc != MPI_SUCCESS ? rc : worst, why, &len);
                /* one answer is one line: MPICH's error string is its whole error stack, a line a frame */
                for (char *c = why; *c; c++)
                    if (*c == '\n') *c = ' ';
                printf("@cb P %d %ld %s %s\n", worst, checking ? total : -1L, seen[0] ? seen : "-", why);
                fflush(stdout);
            }
        } else if (line[0] == 'T') {
            long iters = atol(line + 1);
            if (iters < 1 || !cur) {
                say("@cb E bad command: %s", line);
                continue;
            }
            if (iters > times_have) {
                free(times);
                free(slowest);
                times = malloc((size_t)iters * sizeof *times);
                slowest = malloc((size_t)iters * sizeof *slowest);
                times_have = iters;
            }
            ctl_barrier();
            for (long i = 0; i < iters; i++) {
                double t0 = MPI_Wtime();
                call();
                times[i] = (MPI_Wtime() - t0) * 1e6;
            }
            ctl_reduce(times, slowest, (int)iters, MPI_DOUBLE, MPI_MAX);
            if (rank == 0) {
                fputs("@cb T", stdout);
                for (long i = 0; i < iters; i++) printf(" %.4f", slowest[i]);
                fputc('\n', stdout);
                fflush(stdout);
            }
        } else {
            say("@cb E bad command: %s", line);
        }
    }
    for (int i = 0; i < nvariants; i++) MPI_Comm_free(&variants[i].comm);
    MPI_T_finalize();
    MPI_Finalize();
    return 0;
}
