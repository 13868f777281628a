/*
 * csrc_host_check.cu: checks cbReduceMany (csrc/reduce_kernels.cu built with -DCB_HOST_EMULATION) on the host.
 *
 * What it does: runs every thread of each launch's grid on the CPU, for every dtype, reduction, k from 1
 *   to 17 (several passes past 8), odd sizes, aligned, equally unaligned and mixed offsets, and dst
 *   being one of the sources; compares bit for bit with float32 arithmetic done left to right and
 *   rounded once per pass of 8, which is what the kernels promise. Prints the first failures.
 * What it needs: nvcc (host code only runs; no GPU, no CUDA driver).
 * When collbench uses it: tests/unit/test_csrc_compile.py, on machines without a GPU.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "collbench_reduce.h"

namespace {

int gFailures = 0;
long gCases = 0;

struct Lcg {
  uint64_t s;
  float next() {  // in [0, 1)
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>((s >> 40) & 0xFFFFFF) / 16777216.0f;
  }
};

template <typename T>
float toF(T x);
template <>
float toF(float x) { return x; }
template <>
float toF(__half x) { return __half2float(x); }
template <>
float toF(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
T fromF(float x);
template <>
float fromF(float x) { return x; }
template <>
__half fromF(float x) { return __float2half_rn(x); }
template <>
__nv_bfloat16 fromF(float x) { return __float2bfloat16_rn(x); }

template <typename T>
int dtypeOf();
template <>
int dtypeOf<float>() { return CB_DTYPE_FLOAT32; }
template <>
int dtypeOf<__half>() { return CB_DTYPE_FLOAT16; }
template <>
int dtypeOf<__nv_bfloat16>() { return CB_DTYPE_BFLOAT16; }

float combine(int op, float a, float b) {
  switch (op) {
    case CB_REDOP_SUM:
    case CB_REDOP_AVG: return a + b;
    case CB_REDOP_PROD: return a * b;
    case CB_REDOP_MIN: return (a != a || a < b) ? a : b;
    default: return (a != a || a > b) ? a : b;
  }
}

// The promised result: left to right in float32, passes of 8 with dst's source first, rounding per pass.
template <typename T>
std::vector<T> reference(const std::vector<std::vector<T>>& in, int op, int alias) {
  std::vector<int> order;
  if (in.size() > CB_MAX_SOURCES_PER_PASS && alias >= 0) order.push_back(alias);
  for (int i = 0; i < static_cast<int>(in.size()); ++i)
    if (!(in.size() > CB_MAX_SOURCES_PER_PASS && i == alias)) order.push_back(i);
  const size_t n = in[0].size();
  std::vector<T> out(n);
  for (size_t e = 0; e < n; ++e) {
    float acc = toF(in[order[0]][e]);
    size_t used = 1;
    for (; used < order.size() && used < CB_MAX_SOURCES_PER_PASS; ++used) acc = combine(op, acc, toF(in[order[used]][e]));
    while (used < order.size()) {
      acc = toF(fromF<T>(acc));
      for (size_t j = 0; j < CB_MAX_SOURCES_PER_PASS - 1 && used < order.size(); ++j, ++used)
        acc = combine(op, acc, toF(in[order[used]][e]));
    }
    if (op == CB_REDOP_AVG) acc = acc / static_cast<float>(in.size());
    out[e] = fromF<T>(acc);
  }
  return out;
}

template <typename T>
bool sameBits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// offsets: element offsets from a 64-byte boundary, per source (cycled); dstOffset for dst.
template <typename T>
void runCase(int op, int k, int n, const std::vector<int>& offsets, int dstOffset, int alias, const char* what) {
  ++gCases;
  Lcg rng{static_cast<uint64_t>(op * 7919 + k * 131 + n * 17 + dstOffset + alias * 3 + 1)};
  const int pad = 64;
  std::vector<std::vector<unsigned char>> storage(k + 1, std::vector<unsigned char>((n + pad) * sizeof(T) + 128));
  auto place = [&](int i, int off) {
    uintptr_t p = reinterpret_cast<uintptr_t>(storage[i].data());
    p = (p + 63) / 64 * 64;
    return reinterpret_cast<T*>(p) + off;
  };
  std::vector<T*> ptrs(k);
  std::vector<std::vector<T>> values(k, std::vector<T>(n));
  for (int i = 0; i < k; ++i) {
    ptrs[i] = place(i, offsets[i % offsets.size()]);
    for (int e = 0; e < n; ++e) {
      const float r = rng.next();
      const float v = op == CB_REDOP_PROD ? 0.75f + 0.5f * r : 8.0f * r - 4.0f;
      values[i][e] = fromF<T>(v);
      ptrs[i][e] = values[i][e];
    }
  }
  T* dst = alias >= 0 ? ptrs[alias] : place(k, dstOffset);
  if (alias < 0)
    for (int e = 0; e < n + 8; ++e) dst[e] = fromF<T>(NAN);  // untouched elements stay NaN: caught
  const T guard = alias < 0 ? dst[n] : fromF<T>(0.0f);
  std::vector<const void*> srcs(ptrs.begin(), ptrs.end());
  const int rc = cbReduceMany(dst, srcs.data(), k, n, dtypeOf<T>(), op, nullptr);
  if (rc != 0) {
    if (gFailures++ < 20) std::printf("FAIL %s op=%d k=%d n=%d: rc=%d (%s)\n", what, op, k, n, rc, cbReduceErrorString(rc));
    return;
  }
  const std::vector<T> want = reference(values, op, alias);
  int bad = 0;
  int first = -1;
  for (int e = 0; e < n; ++e) {
    if (!sameBits(dst[e], want[e])) {
      if (first < 0) first = e;
      ++bad;
    }
  }
  if (alias < 0 && !sameBits(dst[n], guard)) ++bad;  // wrote past the end
  if (bad && gFailures++ < 20)
    std::printf("FAIL %s op=%d k=%d n=%d dstOffset=%d alias=%d: %d wrong, first at %d (%g, want %g)\n", what, op, k,
                n, dstOffset, alias, bad, first, first >= 0 ? toF(dst[first]) : 0.0, first >= 0 ? toF(want[first]) : 0.0);
}

template <typename T>
void runAll(const char* name) {
  const int ks[] = {1, 2, 3, 4, 5, 7, 8, 9, 11, 17};
  const int sizes[] = {0, 1, 3, 7, 8, 9, 15, 31, 33, 257, 1029, 4099};
  for (int op = CB_REDOP_SUM; op <= CB_REDOP_AVG; ++op) {
    for (int k : ks) {
      for (int n : sizes) {
        runCase<T>(op, k, n, {0}, 0, -1, name);
        runCase<T>(op, k, n, {1}, 1, -1, name);
        runCase<T>(op, k, n, {3}, 3, -1, name);
        runCase<T>(op, k, n, {0, 1, 2, 3}, 0, -1, name);
        runCase<T>(op, k, n, {0}, 1, -1, name);
        runCase<T>(op, k, n, {0}, 0, 0, name);
        runCase<T>(op, k, n, {1}, 1, k - 1, name);
        runCase<T>(op, k, n, {0}, 0, k / 2, name);
      }
    }
  }
}

void runErrors() {
  float buf[64] = {};
  const void* srcs[2] = {buf + 1, buf + 40};
  ++gCases;
  if (cbReduceMany(buf, srcs, 2, 16, CB_DTYPE_FLOAT32, CB_REDOP_SUM, nullptr) != CB_ERR_OVERLAP) {
    ++gFailures;
    std::printf("FAIL a partially overlapping source was accepted\n");
  }
  const int bad[][3] = {{7, CB_REDOP_SUM, 2}, {CB_DTYPE_FLOAT32, 9, 2}, {CB_DTYPE_FLOAT32, CB_REDOP_SUM, 0}};
  const int want[] = {CB_ERR_BAD_DTYPE, CB_ERR_BAD_REDOP, CB_ERR_BAD_NSOURCES};
  for (int i = 0; i < 3; ++i) {
    ++gCases;
    if (cbReduceMany(buf + 48, srcs, bad[i][2], 4, bad[i][0], bad[i][1], nullptr) != want[i]) {
      ++gFailures;
      std::printf("FAIL bad argument set %d was not refused with %d\n", i, want[i]);
    }
  }
}

}  // namespace

int main() {
  runAll<float>("float32");
  runAll<__half>("float16");
  runAll<__nv_bfloat16>("bfloat16");
  runErrors();
  std::printf("%s: %ld cases, %d failed\n", gFailures ? "FAILED" : "OK", gCases, gFailures);
  return gFailures ? 1 : 0;
}
