/* Counts the messages an MPICH rank sends, for tests/mpi/test_mpich_mpi.py.
 *
 * MPICH's algorithms are internal (libmpich exports no MPIR_* function to interpose), but under
 * MPICH's ch4:ucx device (Debian's build: `mpichversion` says "ch4:ucx") every point-to-point message
 * an algorithm sends, on one node too, is one ucp_tag_send_nbx (src/mpid/ch4/netmod/ucx/ucx_send.h,
 * v4.0.2), a call into libucp through the PLT. So the number and the bytes of a rank's sends tell the
 * algorithm apart without timing anything: an allreduce of B bytes on 4 ranks is 2 sends of B bytes
 * under recursive doubling and 4 sends of B/2 + B/4 + B/4 + B/2 under reduce_scatter_allgather
 * (allreduce_intra_recursive_doubling.c, allreduce_intra_reduce_scatter_allgather.c).
 * Preloaded (LD_PRELOAD); at exit each rank writes "spy <sends> <bytes>" to standard error. No UCX
 * header is needed: the arguments are passed on untouched.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef void *(*send_fn)(void *, const void *, size_t, uint64_t, const void *);
static long sends, bytes;

void *ucp_tag_send_nbx(void *ep, const void *buffer, size_t count, uint64_t tag, const void *param) {
    static send_fn real;
    if (!real) real = (send_fn)dlsym(RTLD_NEXT, "ucp_tag_send_nbx");
    sends++;
    bytes += (long)count;
    return real(ep, buffer, count, tag, param);
}

__attribute__((destructor)) static void report(void) { fprintf(stderr, "spy %ld %ld\n", sends, bytes); }
