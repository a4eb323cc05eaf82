// CUDA kernels of the fill ops (kernels/fill.cc: fill_constant, fill_any_like, fill_zeros_like,
// fill_constant_batch_size_like), cast, increment, and uniform_random / gaussian_random (kernels/random.cc).
// assign's CUDA kernel is in assign.cc (TensorCopy copies on the device); fill_constant with force_cpu runs its CPU
// kernel (the executor's rule).
//
// The random ops generate on the host with the CPU kernel's own compiled code (UniformRandomValues /
// GaussianRandomValues, helpers/random.h) and copy once to the device, so a GPU startup program gives the CPU's
// parameters bit for bit.
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "../helpers/random.h"
#include "cuda/device.h"
#include "helpers.cuh"

namespace fl {
namespace cuda {
namespace {

template <typename T>
__global__ void FillKernel(int64_t n, T* p, T v) {
  FL_CUDA_LOOP(i, n) { p[i] = v; }
}

template <typename T>
void FillOut(const ExecutionContext& ctx, T value) {
  Tensor* out = ctx.Output("Out");
  T* p = out->mutable_data<T>(ctx.place());
  Launch(ctx, out->numel(), FillKernel<T>, p, value);
}

template <typename In, typename O>
__global__ void CastKernel(int64_t n, const In* x, O* out) {
  FL_CUDA_LOOP(i, n) { out[i] = static_cast<O>(x[i]); }
}

template <typename T>
__global__ void IncrementKernel(int64_t n, const T* x, T step, T* out) {
  FL_CUDA_LOOP(i, n) { out[i] = x[i] + step; }
}

template <typename T, typename Gen>
void RandomOut(const ExecutionContext& ctx, Gen gen) {
  Tensor* out = ctx.Output("Out");
  const int64_t n = out->numel();
  std::vector<T> host(static_cast<size_t>(std::max<int64_t>(n, 0)));
  gen(ctx, host.data(), n);
  T* p = out->mutable_data<T>(ctx.place());
  if (n > 0) CopyToDevice(ctx.place(), p, host.data(), n * sizeof(T));
}

}  // namespace
}  // namespace cuda
}  // namespace fl

FL_REGISTER_CUDA_KERNELS(fill_constant) {
  ops.op.KernelAnyDType(fl::PlaceKind::CUDA, [](const fl::ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    const std::string& s = ctx.Attr<std::string>("str_value");
    if (s.empty()) return fl::cuda::FillOut<T>(ctx, static_cast<T>(ctx.Attr<float>("value")));
    if constexpr (std::is_floating_point_v<T>) fl::cuda::FillOut<T>(ctx, static_cast<T>(std::stod(s)));
    else fl::cuda::FillOut<T>(ctx, static_cast<T>(std::stoll(s)));
  });
}

FL_REGISTER_CUDA_KERNELS(fill_any_like) {
  ops.Kernel<float, double, int32_t, int64_t, bool>([](const fl::ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    ctx.Output("Out")->Resize(ctx.Input("X").dims());
    fl::cuda::FillOut<T>(ctx, static_cast<T>(ctx.Attr<float>("value")));
  });
}

FL_REGISTER_CUDA_KERNELS(fill_zeros_like) {
  ops.op.KernelAnyDType(fl::PlaceKind::CUDA, [](const fl::ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    fl::Tensor* out = ctx.Output("Out");
    T* p = out->mutable_data<T>(ctx.place());
    if (out->numel() > 0)  // all-zero bytes are 0 for every T
      FL_CUDA_CHECK(cudaMemsetAsync(p, 0, out->numel() * sizeof(T), fl::cuda::Stream(ctx)));
  });
}

FL_REGISTER_CUDA_KERNELS(fill_constant_batch_size_like) {
  ops.Kernel<float, double, int32_t, int64_t, bool>([](const fl::ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    fl::cuda::FillOut<T>(ctx, static_cast<T>(ctx.Attr<float>("value")));
  });
}

FL_REGISTER_CUDA_KERNELS(cast) {
  ops.op.KernelAnyDType(fl::PlaceKind::CUDA, [](const fl::ExecutionContext& ctx, auto in_tag) {
    using In = typename decltype(in_tag)::type;
    const fl::Tensor& x = ctx.Input("X");
    fl::Tensor* out = ctx.Output("Out");
    // Out may be X itself: keep X's buffer alive (and unreused) until the kernel has read it.
    std::shared_ptr<fl::Allocation> keep = x.holder();
    const In* xp = x.data<In>();
    const int64_t n = x.numel();
    fl::VisitDType(static_cast<fl::DType>(ctx.Attr<int32_t>("out_dtype")), [&](auto out_tag) {
      using O = typename decltype(out_tag)::type;
      O* op = out->mutable_data<O>(ctx.place());
      fl::cuda::Launch(ctx, n, fl::cuda::CastKernel<In, O>, xp, op);
    });
  });
}

FL_REGISTER_CUDA_KERNELS(increment) {
  ops.Kernel<float, double, int32_t, int64_t>([](const fl::ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    const fl::Tensor& x = ctx.Input("X");
    FL_ENFORCE(x.numel() == 1, "increment: X '", ctx.InputName("X"), "' ", x.dims(), " must have exactly one element");
    std::shared_ptr<fl::Allocation> keep = x.holder();  // Out may be X: read it before any reallocation is reused
    const T* xp = x.data<T>();
    fl::Tensor* out = ctx.Output("Out");
    out->Resize(x.dims());
    T* op = out->mutable_data<T>(ctx.place());
    fl::cuda::Launch(ctx, 1, fl::cuda::IncrementKernel<T>, xp, static_cast<T>(ctx.Attr<float>("step")), op);
  });
}

FL_REGISTER_CUDA_KERNELS(uniform_random) {
  ops.Kernel<float, double>([](const fl::ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    fl::cuda::RandomOut<T>(ctx, fl::UniformRandomValues<T>);
  });
}

FL_REGISTER_CUDA_KERNELS(gaussian_random) {
  ops.Kernel<float, double>([](const fl::ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    fl::cuda::RandomOut<T>(ctx, fl::GaussianRandomValues<T>);
  });
}
