// Device helpers of the GEMM-based and normalisation kernels (mul, matmul, conv2d, pool2d, batch_norm,
// layer_norm, lstm_unit, sequence ops): zero fills, row-major packed GEMMs with the CPU helpers' edge cases
// (kernels/helpers/blas.h: an empty contraction gives beta * C; a batch whose C stride is 0 sums its products) and
// the fused ops' bias + activation epilogue, and pinned host-to-device staging. Block reductions come from
// kernels/cuda/helpers.cuh.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "cuda/device.h"
#include "helpers.cuh"

namespace fl {
namespace cuda {
namespace nn {

// p[0, n) = 0 on the op's stream.
template <typename T>
void Zero(const ExecutionContext& ctx, T* p, int64_t n) {
  if (n > 0) FL_CUDA_CHECK(cudaMemsetAsync(p, 0, static_cast<size_t>(n) * sizeof(T), Stream(ctx)));
}

template <typename T>
__global__ void ScaleInPlace(int64_t n, T* c, T beta) {
  FL_CUDA_LOOP(i, n) c[i] = beta == T(0) ? T(0) : beta * c[i];
}

// c[i] = sum over b of parts[b * n + i] (+ beta * c[i] unless beta is 0), summed in batch order.
template <typename T>
__global__ void SumParts(int64_t n, const T* parts, int64_t batch, T beta, T* c) {
  FL_CUDA_LOOP(i, n) {
    T s = beta == T(0) ? T(0) : beta * c[i];
    for (int64_t b = 0; b < batch; ++b) s += parts[b * n + i];
    c[i] = s;
  }
}

// C[M, N] = alpha * op(A) @ op(B) + beta * C, packed row-major operands (blas::Gemm's packed form).
template <typename T>
void Gemm(const ExecutionContext& ctx, bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          const T* b, T beta, T* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    Launch(ctx, m * n, ScaleInPlace<T>, c, beta);
    return;
  }
  cuda::Gemm<T>(ctx.place().device, ta, tb, m, n, k, alpha, a, ta ? m : k, b, tb ? k : n, beta, c, n);
}

template <typename T>
struct Operand {
  T* data;
  int64_t stride;  // elements between batch entries; 0: the same matrix for every entry
};

// For b in [0, batch): C_b = alpha * op(A_b) @ op(B_b) + beta * C_b, packed; a C stride of 0 sums the products
// into one C (the gradient of a broadcast operand). Folds into one GEMM where the layout allows, as the CPU helper.
template <typename T>
void GemmBatched(const ExecutionContext& ctx, bool ta, bool tb, int64_t batch, int64_t m, int64_t n, int64_t k, T alpha,
                 Operand<const T> a, Operand<const T> b, T beta, Operand<T> c) {
  if (batch == 0 || m == 0 || n == 0) return;
  if (batch == 1) return Gemm<T>(ctx, ta, tb, m, n, k, alpha, a.data, b.data, beta, c.data);
  const int64_t mk = m * k, kn = k * n, mn = m * n;
  if (c.stride == mn && b.stride == 0 && !ta && a.stride == mk)
    return Gemm<T>(ctx, false, tb, batch * m, n, k, alpha, a.data, b.data, beta, c.data);
  if (c.stride == 0 && ta && !tb && a.stride == mk && b.stride == kn)
    return Gemm<T>(ctx, true, false, m, n, batch * k, alpha, a.data, b.data, beta, c.data);
  if (k == 0) {
    Launch(ctx, c.stride == 0 ? mn : batch * c.stride, ScaleInPlace<T>, c.data, beta);
    return;
  }
  const int device = ctx.place().device;
  if (c.stride == 0) {  // products into scratch, then summed in batch order
    std::shared_ptr<Allocation> parts = Scratch(ctx.place(), static_cast<size_t>(batch * mn) * sizeof(T));
    T* p = static_cast<T*>(parts->ptr());
    GemmStridedBatched<T>(device, ta, tb, m, n, k, alpha, a.data, ta ? m : k, a.stride, b.data, tb ? k : n, b.stride,
                          T(0), p, n, mn, batch);
    Launch(ctx, mn, SumParts<T>, static_cast<const T*>(p), batch, beta, c.data);
    return;
  }
  GemmStridedBatched<T>(device, ta, tb, m, n, k, alpha, a.data, ta ? m : k, a.stride, b.data, tb ? k : n, b.stride,
                        beta, c.data, n, c.stride, batch);
}

// A fused op's epilogue activation (kernels/helpers/bias_act.h's EpilogueAct, passed as its int value).
template <typename T>
__device__ inline T EpilogueOne(int act, T v, T threshold) {
  switch (act) {
    case 1: return v > T(0) ? v : T(0);  // relu
    case 2: {                            // relu6
      const T r = v > T(0) ? v : T(0);
      return r < threshold ? r : threshold;
    }
    case 3: return T(1) / (T(1) + exp(-v));  // sigmoid
    case 4: return tanh(v);
    default: return v;
  }
}

// y[i] = act(y[i] + bias[(i / inner) % channels] (when given) + residual[i] (when given)).
template <typename T>
__global__ void BiasActResidual(int64_t n, T* y, const T* bias, int64_t channels, int64_t inner, const T* residual,
                                int act, T threshold) {
  FL_CUDA_LOOP(i, n) {
    T v = y[i];
    if (bias) v = v + bias[(i / inner) % channels];
    if (residual) v = v + residual[i];
    y[i] = EpilogueOne(act, v, threshold);
  }
}

// Host values (LoD offsets, row maps) copied into new device scratch, staged through pinned memory: the copy is
// queued on the op's stream without the host waiting for the stream (a pageable source may make the driver wait).
// The pinned block goes back to its allocator, which reuses it only after the copy has run.
template <typename V>
std::shared_ptr<Allocation> ToDevice(const ExecutionContext& ctx, const V* host, size_t n) {
  const size_t bytes = std::max<size_t>(1, n) * sizeof(V);
  std::shared_ptr<Allocation> dev = Scratch(ctx.place(), bytes);
  if (n == 0) return dev;
  std::shared_ptr<Allocation> staging = AllocateShared(Place::CUDAPinned(), bytes);
  std::memcpy(staging->ptr(), host, n * sizeof(V));
  MemCopy(ctx.place(), dev->ptr(), Place::CUDAPinned(), staging->ptr(), n * sizeof(V));
  return dev;
}

// Blocks for a 2-D launch of `per` threads per item over `items`, capped to fill the device.
inline unsigned GridFor(int64_t items, const ExecutionContext& ctx) {
  const int64_t cap = int64_t(MultiprocessorCount(ctx.place().device)) * 32;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(items, cap)));
}

}  // namespace nn
}  // namespace cuda
}  // namespace fl
