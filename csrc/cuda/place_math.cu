// The core's arithmetic on device memory (csrc/place_math.h): zeroing, and the in-order n-ary sum the recurrent
// step runner adds parameter gradients with (the same order as the CPU's SumInto, so the same bits).
#include "cuda/device.h"

namespace fl {
namespace cuda {

namespace {

template <typename T>
__global__ void AddTwo(int64_t n, const T* a, const T* b, T* out) {
  FL_CUDA_LOOP(i, n) { out[i] = a[i] + b[i]; }
}

template <typename T>
void Sum(int device, const void* const* srcs, int k, void* dst, int64_t n) {
  cudaStream_t s = Stream(device);
  T* out = static_cast<T*>(dst);
  if (k == 1) {
    if (srcs[0] != dst) FL_CUDA_CHECK(cudaMemcpyAsync(dst, srcs[0], n * sizeof(T), cudaMemcpyDeviceToDevice, s));
    return;
  }
  const int blocks = BlocksFor(n, device);
  // out = s0 + s1, then out += s_j: each step is elementwise, so out may alias a source.
  AddTwo<T><<<blocks, kThreads, 0, s>>>(n, static_cast<const T*>(srcs[0]), static_cast<const T*>(srcs[1]), out);
  for (int j = 2; j < k; ++j) AddTwo<T><<<blocks, kThreads, 0, s>>>(n, out, static_cast<const T*>(srcs[j]), out);
  CheckLaunch("sum (gradient aggregation)");
}

}  // namespace

void ZeroBytesOnDevice(int device, void* dst, size_t bytes) {
  FL_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, Stream(device)));
}

void SumArraysOnDevice(int device, DType dtype, const void* const* srcs, int k, void* dst, int64_t n) {
  if (dtype == DType::FP32) Sum<float>(device, srcs, k, dst, n);
  else Sum<double>(device, srcs, k, dst, n);
}

}  // namespace cuda
}  // namespace fl
