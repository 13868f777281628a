/*
 * reduce_kernels.cu: reduce k device buffers into one, elementwise (collbench's reduction kernels).
 *
 * What it does: dst = op(src_0, ..., src_{k-1}) for k = 1..8 per launch (more in passes), for
 *   sum, prod, min, max and avg, in float32, float16 and bfloat16, accumulating in float32 and rounding
 *   once per pass. min and max propagate NaN as torch.minimum/maximum do.
 * What it needs: CUDA 11+ (cuda_fp16.h, cuda_bf16.h), sm_70 or newer for useful bfloat16 speed; no
 *   torch headers (nvcc alone builds it). Buffers of one dtype and count; dst may be one of the sources.
 *   When every pointer has the same offset from a 16-byte boundary, the body moves 16 bytes per load
 *   (4 floats, 8 halves) after a short scalar head; otherwise, and for the tail, one element at a time.
 * When collbench uses it: the reduce steps of collbench's own algorithms on GPUs (ring: 2 inputs;
 *   trees: two children and the local data in one pass), through cbReduceMany and the torch binding.
 *   Built with -DCB_HOST_EMULATION (tests only) the launches run every thread on the host instead,
 *   so that machines without a GPU check the indexing and the arithmetic (tests/unit/csrc_host_check.cu).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "collbench_reduce.h"

namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 4;  // 1024 resident threads per SM, each with several 16-byte loads in flight
constexpr int kSum = 0, kProd = 1, kMin = 2, kMax = 3;

struct ReduceArgs {
  const void* src[CB_MAX_SOURCES_PER_PASS];
  void* dst;
  long long count;
  long long head;  // elements before the first 16-byte boundary; == count when the body cannot vectorise
  float divisor;   // 1 except for the last pass of avg
};

template <typename T>
struct Traits;
template <>
struct Traits<float> {
  static constexpr int kVec = 4;
  __host__ __device__ static float toFloat(float x) { return x; }
  __host__ __device__ static float fromFloat(float x) { return x; }
};
template <>
struct Traits<__half> {
  static constexpr int kVec = 8;
  __host__ __device__ static float toFloat(__half x) { return __half2float(x); }
  __host__ __device__ static __half fromFloat(float x) { return __float2half_rn(x); }
};
template <>
struct Traits<__nv_bfloat16> {
  static constexpr int kVec = 8;
  __host__ __device__ static float toFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
  __host__ __device__ static __nv_bfloat16 fromFloat(float x) { return __float2bfloat16_rn(x); }
};

// Bytes move between the 16-byte vector and its lanes through memcpy: reinterpret_cast between uint4
// and float4/__half2 breaks C++'s aliasing rules (the host compiler does miscompile it); nvcc turns
// these copies into register moves.
__host__ __device__ __forceinline__ void unpack(const uint4& v, float (&out)[4], float) {
  memcpy(out, &v, sizeof(v));
}
__host__ __device__ __forceinline__ void unpack(const uint4& v, float (&out)[8], __half) {
  __half2 h[4];
  memcpy(h, &v, sizeof(v));
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __half22float2(h[j]);
    out[2 * j] = f.x;
    out[2 * j + 1] = f.y;
  }
}
__host__ __device__ __forceinline__ void unpack(const uint4& v, float (&out)[8], __nv_bfloat16) {
  __nv_bfloat162 h[4];
  memcpy(h, &v, sizeof(v));
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __bfloat1622float2(h[j]);
    out[2 * j] = f.x;
    out[2 * j + 1] = f.y;
  }
}

__host__ __device__ __forceinline__ uint4 pack(const float (&in)[4], float) {
  uint4 r;
  memcpy(&r, in, sizeof(r));
  return r;
}
__host__ __device__ __forceinline__ uint4 pack(const float (&in)[8], __half) {
  __half2 h[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) h[j] = __floats2half2_rn(in[2 * j], in[2 * j + 1]);
  uint4 r;
  memcpy(&r, h, sizeof(r));
  return r;
}
__host__ __device__ __forceinline__ uint4 pack(const float (&in)[8], __nv_bfloat16) {
  __nv_bfloat162 h[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) h[j] = __floats2bfloat162_rn(in[2 * j], in[2 * j + 1]);
  uint4 r;
  memcpy(&r, h, sizeof(r));
  return r;
}

template <int OP>
__host__ __device__ __forceinline__ float combine(float a, float b) {
  if (OP == kSum) return a + b;
  if (OP == kProd) return a * b;
  // a != a is a NaN test: NaN wins, as in torch.minimum/maximum (fminf/fmaxf would drop it).
  if (OP == kMin) return (a != a || a < b) ? a : b;
  return (a != a || a > b) ? a : b;
}

// More independent 16-byte loads in flight per thread when there are few sources.
template <int K>
__host__ __device__ constexpr int unrollFor() {
  return K <= 2 ? 4 : (K <= 4 ? 2 : 1);
}

// One thread's share of the grid-stride loops: thread `tid` of `stride` threads.
template <typename T, int K, int OP>
__host__ __device__ __forceinline__ void reduceThread(const ReduceArgs& a, const long long tid, const long long stride) {
  constexpr int V = Traits<T>::kVec;
  constexpr int U = unrollFor<K>();
  const long long nvec = (a.count - a.head) / V;
  const long long tailStart = a.head + nvec * V;
  const bool divide = (OP == kSum) && a.divisor != 1.0f;

  const uint4* vsrc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) vsrc[k] = reinterpret_cast<const uint4*>(static_cast<const T*>(a.src[k]) + a.head);
  uint4* vdst = reinterpret_cast<uint4*>(static_cast<T*>(a.dst) + a.head);

  for (long long base = tid; base < nvec; base += stride * U) {
    uint4 in[U][K];
    // All loads of this thread are issued before the first is used.
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long i = base + u * stride;
      if (i < nvec) {
#pragma unroll
        for (int k = 0; k < K; ++k) in[u][k] = vsrc[k][i];
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const long long i = base + u * stride;
      if (i < nvec) {
        float acc[V];
        unpack(in[u][0], acc, T());
#pragma unroll
        for (int k = 1; k < K; ++k) {
          float x[V];
          unpack(in[u][k], x, T());
#pragma unroll
          for (int j = 0; j < V; ++j) acc[j] = combine<OP>(acc[j], x[j]);
        }
        if (divide) {
#pragma unroll
          for (int j = 0; j < V; ++j) acc[j] = acc[j] / a.divisor;
        }
        vdst[i] = pack(acc, T());
      }
    }
  }

  // The scalar head (up to the first 16-byte boundary) and tail (after the last full vector).
  const T* src[K];
#pragma unroll
  for (int k = 0; k < K; ++k) src[k] = static_cast<const T*>(a.src[k]);
  T* dst = static_cast<T*>(a.dst);
  for (long long i = tid; i < a.count; i += stride) {
    long long e = i;
    if (e >= a.head) {
      e = tailStart + (i - a.head);
      if (e >= a.count) break;
    }
    float acc = Traits<T>::toFloat(src[0][e]);
#pragma unroll
    for (int k = 1; k < K; ++k) acc = combine<OP>(acc, Traits<T>::toFloat(src[k][e]));
    if (divide) acc = acc / a.divisor;
    dst[e] = Traits<T>::fromFloat(acc);
  }
}

#ifndef CB_HOST_EMULATION
template <typename T, int K, int OP>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) reduceKernel(const ReduceArgs a) {
  reduceThread<T, K, OP>(a, static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x,
                         static_cast<long long>(gridDim.x) * blockDim.x);
}
#endif

template <typename T, int K, int OP>
cudaError_t launchOne(const ReduceArgs& a, cudaStream_t stream) {
  constexpr int V = Traits<T>::kVec;
  constexpr int U = unrollFor<K>();
  const long long nvec = (a.count - a.head) / V;
  const long long scalar = a.count - nvec * V;
  long long items = (nvec + U - 1) / U;
  if (scalar > items) items = scalar;
  int sms = 1;
#ifndef CB_HOST_EMULATION
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return err;
#endif
  // A grid that fills every SM once (grid-stride loops do the rest): no tail wave of idle blocks.
  const long long maxBlocks = static_cast<long long>(sms) * kBlocksPerSm;
  long long blocks = (items + kThreads - 1) / kThreads;
  if (blocks > maxBlocks) blocks = maxBlocks;
  if (blocks < 1) blocks = 1;
#ifdef CB_HOST_EMULATION
  // Tests without a GPU run every thread of the grid on the host, one after another: each element
  // belongs to exactly one thread, so any order gives the kernel's result (and exposes a lost or
  // doubly handled element).
  (void)stream;
  for (long long t = 0; t < blocks * kThreads; ++t) reduceThread<T, K, OP>(a, t, blocks * kThreads);
  return cudaSuccess;
#else
  reduceKernel<T, K, OP><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
#endif
}

template <typename T, int OP>
cudaError_t dispatchK(int k, const ReduceArgs& a, cudaStream_t stream) {
  switch (k) {
    case 1: return launchOne<T, 1, OP>(a, stream);
    case 2: return launchOne<T, 2, OP>(a, stream);
    case 3: return launchOne<T, 3, OP>(a, stream);
    case 4: return launchOne<T, 4, OP>(a, stream);
    case 5: return launchOne<T, 5, OP>(a, stream);
    case 6: return launchOne<T, 6, OP>(a, stream);
    case 7: return launchOne<T, 7, OP>(a, stream);
    case 8: return launchOne<T, 8, OP>(a, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T>
cudaError_t dispatchOp(int redop, int k, const ReduceArgs& a, cudaStream_t stream) {
  switch (redop) {
    case CB_REDOP_SUM:
    case CB_REDOP_AVG: return dispatchK<T, kSum>(k, a, stream);
    case CB_REDOP_PROD: return dispatchK<T, kProd>(k, a, stream);
    case CB_REDOP_MIN: return dispatchK<T, kMin>(k, a, stream);
    case CB_REDOP_MAX: return dispatchK<T, kMax>(k, a, stream);
    default: return cudaErrorInvalidValue;
  }
}

int elementSize(int dtype) {
  switch (dtype) {
    case CB_DTYPE_FLOAT32: return 4;
    case CB_DTYPE_FLOAT16:
    case CB_DTYPE_BFLOAT16: return 2;
    default: return 0;
  }
}

// One launch over k <= 8 sources.
int reducePass(void* dst, const void* const* srcs, int k, long long count, int dtype, int redop, float divisor,
               cudaStream_t stream) {
  ReduceArgs a{};
  a.dst = dst;
  a.count = count;
  a.divisor = divisor;
  const uintptr_t offset = reinterpret_cast<uintptr_t>(dst) % 16;
  bool vectorise = true;
  for (int i = 0; i < k; ++i) {
    a.src[i] = srcs[i];
    vectorise = vectorise && reinterpret_cast<uintptr_t>(srcs[i]) % 16 == offset;
  }
  const int size = elementSize(dtype);
  vectorise = vectorise && offset % size == 0;
  long long head = vectorise ? static_cast<long long>((16 - offset) % 16) / size : count;
  a.head = head < count ? head : count;
  cudaError_t err;
  switch (dtype) {
    case CB_DTYPE_FLOAT32: err = dispatchOp<float>(redop, k, a, stream); break;
    case CB_DTYPE_FLOAT16: err = dispatchOp<__half>(redop, k, a, stream); break;
    default: err = dispatchOp<__nv_bfloat16>(redop, k, a, stream); break;
  }
  return static_cast<int>(err);
}

}  // namespace

extern "C" int cbReduceMany(void* dst, const void* const* sources, int nsources, long long count, int dtype,
                            int redop, cudaStream_t stream) {
  const int size = elementSize(dtype);
  if (size == 0) return CB_ERR_BAD_DTYPE;
  if (redop < CB_REDOP_SUM || redop > CB_REDOP_AVG) return CB_ERR_BAD_REDOP;
  if (nsources < 1 || sources == nullptr) return CB_ERR_BAD_NSOURCES;
  if (count < 0) return CB_ERR_BAD_COUNT;
  if (count == 0) return 0;

  // Sources that share memory with dst without being dst would be overwritten before they are read.
  const uintptr_t bytes = static_cast<uintptr_t>(count) * size;
  const uintptr_t d = reinterpret_cast<uintptr_t>(dst);
  int aliased = -1;
  for (int i = 0; i < nsources; ++i) {
    const uintptr_t s = reinterpret_cast<uintptr_t>(sources[i]);
    if (s == d) {
      if (aliased < 0) aliased = i;
    } else if (s < d + bytes && d < s + bytes) {
      return CB_ERR_OVERLAP;
    }
  }

  const float avgDivisor = static_cast<float>(nsources);
  if (nsources <= CB_MAX_SOURCES_PER_PASS) {
    return reducePass(dst, sources, nsources, count, dtype, redop, redop == CB_REDOP_AVG ? avgDivisor : 1.0f,
                      stream);
  }

  // Several passes: the first reads 8 sources (dst's own, if any, among them), each later one reads dst
  // and up to 7 more. Every op here is commutative, so moving dst's source to the front is allowed.
  const void* order[CB_MAX_SOURCES_PER_PASS];
  int next = 0;
  int taken = 0;
  if (aliased >= 0) order[taken++] = sources[aliased];
  while (taken < CB_MAX_SOURCES_PER_PASS) {
    if (next != aliased) order[taken++] = sources[next];
    ++next;
  }
  int done = CB_MAX_SOURCES_PER_PASS;
  const int passRedop = redop == CB_REDOP_AVG ? CB_REDOP_SUM : redop;
  int rc = reducePass(dst, order, CB_MAX_SOURCES_PER_PASS, count, dtype, passRedop, 1.0f, stream);
  while (rc == 0 && done < nsources) {
    taken = 0;
    order[taken++] = dst;
    while (taken < CB_MAX_SOURCES_PER_PASS && next < nsources) {
      if (next != aliased) order[taken++] = sources[next];
      ++next;
    }
    done += taken - 1;
    const bool last = done >= nsources;
    rc = reducePass(dst, order, taken, count, dtype, passRedop,
                    (last && redop == CB_REDOP_AVG) ? avgDivisor : 1.0f, stream);
  }
  return rc;
}

extern "C" const char* cbReduceErrorString(int code) {
  switch (code) {
    case 0: return "success";
    case CB_ERR_BAD_DTYPE: return "unsupported dtype (float32, float16 and bfloat16 are supported)";
    case CB_ERR_BAD_REDOP: return "unsupported reduction (sum, prod, min, max, avg)";
    case CB_ERR_BAD_NSOURCES: return "at least one source is needed";
    case CB_ERR_BAD_COUNT: return "negative element count";
    case CB_ERR_OVERLAP: return "a source partially overlaps dst (only dst itself may be a source)";
    default: return code > 0 ? cudaGetErrorString(static_cast<cudaError_t>(code)) : "unknown error";
  }
}
