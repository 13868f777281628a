/*
 * reduce_binding.cpp: the torch binding of collbench's reduction kernels (reduce_kernels.cu).
 *
 * What it does: reduce_many(dst, sources, redop) checks the tensors and calls cbReduceMany on the current
 *   CUDA stream of dst's device; redop is the index in collbench's REDOPS (sum, prod, min, max, avg).
 * What it needs: torch built with CUDA (CUDA headers and libraries), built by
 *   torch.utils.cpp_extension.load together with reduce_kernels.cu.
 * When collbench uses it: collbench.runtime.cuda_kernels.reduce_many_cuda builds it on first use.
 */
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>

#include <vector>

#include "collbench_reduce.h"

namespace {

int dtypeCode(const at::ScalarType t) {
  switch (t) {
    case at::kFloat: return CB_DTYPE_FLOAT32;
    case at::kHalf: return CB_DTYPE_FLOAT16;
    case at::kBFloat16: return CB_DTYPE_BFLOAT16;
    default: return -1;
  }
}

void reduceMany(at::Tensor dst, const std::vector<at::Tensor>& sources, int64_t redop) {
  TORCH_CHECK(dst.is_cuda(), "collbench reduce: dst must be a CUDA tensor");
  TORCH_CHECK(dst.is_contiguous(), "collbench reduce: dst must be contiguous");
  TORCH_CHECK(!sources.empty(), "collbench reduce: at least one source is needed");
  const int dtype = dtypeCode(dst.scalar_type());
  TORCH_CHECK(dtype >= 0, "collbench reduce: dtype ", dst.scalar_type(), " is not float32, float16 or bfloat16");
  std::vector<const void*> ptrs;
  ptrs.reserve(sources.size());
  for (const at::Tensor& s : sources) {
    TORCH_CHECK(s.device() == dst.device(), "collbench reduce: every source must be on ", dst.device());
    TORCH_CHECK(s.scalar_type() == dst.scalar_type(), "collbench reduce: every source must be ", dst.scalar_type());
    TORCH_CHECK(s.numel() == dst.numel(), "collbench reduce: every source must have ", dst.numel(), " elements");
    TORCH_CHECK(s.is_contiguous(), "collbench reduce: sources must be contiguous");
    ptrs.push_back(s.data_ptr());
  }
  const c10::cuda::CUDAGuard guard(dst.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(dst.device().index()).stream();
  const int rc = cbReduceMany(dst.data_ptr(), ptrs.data(), static_cast<int>(ptrs.size()),
                              static_cast<long long>(dst.numel()), dtype, static_cast<int>(redop), stream);
  TORCH_CHECK(rc == 0, "collbench reduce: ", cbReduceErrorString(rc));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "collbench's CUDA reduction kernels";
  m.def("reduce_many", &reduceMany, "dst = reduce(sources) elementwise on the current stream",
        pybind11::arg("dst"), pybind11::arg("sources"), pybind11::arg("redop"));
}
