/*
 * collbench_reduce.h: the C launcher API of collbench's CUDA reduction kernels.
 *
 * What it does: dst[i] = op(sources[0][i], ..., sources[n-1][i]) for i in [0, count), on a CUDA stream,
 *   with float32 accumulation for every dtype. avg is the sum of the n inputs divided by n.
 * What it needs: device pointers on the current device; all buffers of one dtype and `count` elements;
 *   dst may be the very same pointer as one source ("reduce into") but must not partially overlap any.
 *   No torch headers: this header and reduce_kernels.cu build with nvcc alone.
 * When collbench uses it: through the torch binding (reduce_binding.cpp), for the reduce steps of
 *   collbench's own algorithms on GPUs (collbench/runtime/cuda_kernels.py).
 */
#ifndef COLLBENCH_REDUCE_H_
#define COLLBENCH_REDUCE_H_

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types. The numbers are part of the API (the binding passes them). */
enum cbDtype { CB_DTYPE_FLOAT32 = 0, CB_DTYPE_FLOAT16 = 1, CB_DTYPE_BFLOAT16 = 2 };

/* Reductions, in collbench's order (collbench.schedules.ops.REDOPS). */
enum cbRedOp { CB_REDOP_SUM = 0, CB_REDOP_PROD = 1, CB_REDOP_MIN = 2, CB_REDOP_MAX = 3, CB_REDOP_AVG = 4 };

/* Sources one kernel launch reads; more are reduced in passes of this many (see cbReduceMany). */
#define CB_MAX_SOURCES_PER_PASS 8

/* Return codes besides cudaError_t values (which are >= 0; 0 is success). */
#define CB_ERR_BAD_DTYPE (-1)
#define CB_ERR_BAD_REDOP (-2)
#define CB_ERR_BAD_NSOURCES (-3)
#define CB_ERR_BAD_COUNT (-4)
#define CB_ERR_OVERLAP (-5)

/*
 * Reduce `nsources` (>= 1) buffers of `count` elements into dst, asynchronously on `stream`.
 * With more than CB_MAX_SOURCES_PER_PASS sources the work runs in several passes over dst, each
 * rounding to the dtype (float16/bfloat16 then round more than once); the source that is dst (if any)
 * goes into the first pass, so reducing into dst stays correct.
 * Returns 0, a CB_ERR_* code (< 0) or a cudaError_t (> 0) from the launch.
 */
int cbReduceMany(void* dst, const void* const* sources, int nsources, long long count, int dtype, int redop,
                 cudaStream_t stream);

/* A static string for a return code of cbReduceMany. */
const char* cbReduceErrorString(int code);

#ifdef __cplusplus
}
#endif

#endif /* COLLBENCH_REDUCE_H_ */
