// CUDA kernels of reduce_sum / reduce_mean / reduce_max / reduce_prod, mean (kernels/reduce.cc defines them) and the
// sum, mean, max and prod gradients (mean's gradient is reduce_mean_grad with reduce_all). The axes come from the CPU's
// ReduceMask; a forward is one LaunchReduce (helpers.cuh) over the kept and reduced axes, a gradient one thread per
// input element, which finds its output element through a Strided map with stride 0 along the reduced axes.
#include <limits>

#include "../helpers/reduce.h"
#include "cuda/device.h"
#include "helpers.cuh"

namespace fl {
namespace cuda {
namespace {

std::vector<bool> KernelMask(const ExecutionContext& ctx) {
  return ReduceMask(ctx.Input("X").rank(), ctx.Attr<std::vector<int32_t>>("dim"), ctx.Attr<bool>("reduce_all"));
}

struct ProdOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a * b;
  }
};

template <typename T>
struct LoadFrom {
  const T* x;
  __device__ T operator()(int64_t i) const { return x[i]; }
};
template <typename T>
struct StoreScaled {
  T* out;
  T scale;
  bool mean;
  __device__ void operator()(int64_t o, T v) const { out[o] = mean ? v * scale : v; }
};

enum class Kind { kSum, kMax, kProd };

template <Kind K, typename T>
void Forward(const ExecutionContext& ctx, const std::vector<bool>& mask, bool mean) {
  const Tensor& x = ctx.Input("X");
  const ReduceIndex ri = MakeReduceIndex(x.dims(), mask);
  Tensor* o = ctx.Output("Out");
  FL_ENFORCE(o->numel() == ri.out_numel, ctx.Type(), ": Out ", o->dims(), " does not hold the ", ri.out_numel,
             " results of reducing X ", x.dims());
  T* op = o->mutable_data<T>(ctx.place());
  const T scale = mean ? T(1) / static_cast<T>(ri.reduce_count) : T(1);  // (mean is float-only)
  const StoreScaled<T> store{op, scale, mean};
  const LoadFrom<T> load{x.data<T>()};
  if constexpr (K == Kind::kSum) {
    LaunchReduce(ctx, ri, T(0), load, SumOp{}, store);
  } else if constexpr (K == Kind::kProd) {
    LaunchReduce(ctx, ri, T(1), load, ProdOp{}, store);
  } else {
    T lowest;
    if constexpr (std::numeric_limits<T>::has_infinity) lowest = -std::numeric_limits<T>::infinity();
    else lowest = std::numeric_limits<T>::lowest();
    LaunchReduce(ctx, ri, lowest, load, MaxOp{}, store);
  }
}

// Input flat index -> the flat index of the output element it reduces into.
Strided OutputOf(const DDim& dims, const std::vector<bool>& mask) {
  std::vector<int64_t> d = dims.ToVector(), s(d.size());
  int64_t st = 1;
  for (int i = static_cast<int>(d.size()) - 1; i >= 0; --i) {
    s[i] = mask[i] ? 0 : st;
    if (!mask[i]) st *= d[i];
  }
  return MakeStrided(d, &s);
}

// kMax: g[i] = x[i] == y[o] ? d[o] : 0; else g[i] = d[o] * scale (scale 1 for sum).
template <bool kMax, typename T>
__global__ void GradKernel(int64_t n, Strided map, const T* x, const T* y, const T* d, T scale, T* g) {
  FL_CUDA_LOOP(i, n) {
    const int64_t o = map.Offset(i);
    if (kMax) g[i] = x[i] == y[o] ? d[o] : T(0);
    else g[i] = d[o] * scale;
  }
}

template <bool kMax, bool kMean, typename T>
void Grad(const ExecutionContext& ctx) {
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  const Tensor& x = ctx.Input("X");
  const Tensor& dy = ctx.Input("Out@GRAD");
  const std::vector<bool> mask = KernelMask(ctx);
  const ReduceIndex ri = MakeReduceIndex(x.dims(), mask);
  FL_ENFORCE(dy.numel() == ri.out_numel, ctx.Type(), ": Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dy.dims(),
             " does not match the reduction of X ", x.dims());
  const DDim dims = x.dims();
  const T* xp = kMax ? x.data<T>() : nullptr;
  const T* yp = kMax ? ctx.Input("Out").data<T>() : nullptr;
  const T* dp = dy.data<T>();
  dx->Resize(dims);
  T* g = dx->mutable_data<T>(ctx.place());
  const T scale = kMean ? T(1) / static_cast<T>(ri.reduce_count) : T(1);
  Launch(ctx, dims.numel(), GradKernel<kMax, T>, OutputOf(dims, mask), xp, yp, dp, scale, g);
}

// reduce_prod_grad, exact with zeros as on the CPU: per output, the count of zeros and the product of the non-zero
// elements (two reductions into scratch), then g[i] = d * nonzero / x[i] (no zero), d * nonzero at the one zero, else
// 0.
template <typename T>
struct LoadIsZero {
  const T* x;
  __device__ T operator()(int64_t i) const { return x[i] == T(0) ? T(1) : T(0); }
};
template <typename T>
struct LoadNonZero {
  const T* x;
  __device__ T operator()(int64_t i) const { return x[i] == T(0) ? T(1) : x[i]; }
};
template <typename T>
struct StoreAt {
  T* out;
  __device__ void operator()(int64_t o, T v) const { out[o] = v; }
};

template <typename T>
__global__ void ProdGradKernel(int64_t n, Strided map, const T* x, const T* d, const T* zeros, const T* nonzero, T* g) {
  FL_CUDA_LOOP(i, n) {
    const int64_t o = map.Offset(i);
    if (zeros[o] == T(0)) g[i] = d[o] * nonzero[o] / x[i];
    else if (zeros[o] == T(1) && x[i] == T(0)) g[i] = d[o] * nonzero[o];
    else g[i] = T(0);
  }
}

template <typename T>
void ProdGrad(const ExecutionContext& ctx) {
  Tensor* dx = ctx.OutputOrNull("X@GRAD");
  if (!dx) return;
  const Tensor& x = ctx.Input("X");
  const Tensor& dy = ctx.Input("Out@GRAD");
  const std::vector<bool> mask = KernelMask(ctx);
  const ReduceIndex ri = MakeReduceIndex(x.dims(), mask);
  FL_ENFORCE(dy.numel() == ri.out_numel, ctx.Type(), ": Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dy.dims(),
             " does not match the reduction of X ", x.dims());
  const DDim dims = x.dims();
  const T* xp = x.data<T>();
  const T* dp = dy.data<T>();
  dx->Resize(dims);
  T* g = dx->mutable_data<T>(ctx.place());
  if (ri.out_numel <= 0) return;
  auto scratch = Scratch(ctx.place(), 2 * ri.out_numel * sizeof(T));
  T* zeros = static_cast<T*>(scratch->ptr());  // zeros per output, as T (only 0, 1 or more matters)
  T* nonzero = zeros + ri.out_numel;
  LaunchReduce(ctx, ri, T(0), LoadIsZero<T>{xp}, SumOp{}, StoreAt<T>{zeros});
  LaunchReduce(ctx, ri, T(1), LoadNonZero<T>{xp}, ProdOp{}, StoreAt<T>{nonzero});
  Launch(ctx, dims.numel(), ProdGradKernel<T>, OutputOf(dims, mask), xp, dp, zeros, nonzero, g);
}

template <Kind K, bool kMean>
void RegisterForward(CudaKernelBuilder& ops) {
  auto f = [](const ExecutionContext& ctx, auto tag) {
    Forward<K, typename decltype(tag)::type>(ctx, KernelMask(ctx), kMean);
  };
  if constexpr (kMean) ops.Kernel<float, double>(f);
  else ops.Kernel<float, double, int32_t, int64_t>(f);
}

}  // namespace
}  // namespace cuda
}  // namespace fl

FL_REGISTER_CUDA_KERNELS(reduce_sum) { fl::cuda::RegisterForward<fl::cuda::Kind::kSum, false>(ops); }
FL_REGISTER_CUDA_KERNELS(reduce_mean) { fl::cuda::RegisterForward<fl::cuda::Kind::kSum, true>(ops); }
FL_REGISTER_CUDA_KERNELS(reduce_max) { fl::cuda::RegisterForward<fl::cuda::Kind::kMax, false>(ops); }
FL_REGISTER_CUDA_KERNELS(reduce_prod) { fl::cuda::RegisterForward<fl::cuda::Kind::kProd, false>(ops); }
FL_REGISTER_CUDA_KERNELS(reduce_sum_grad) {
  ops.Kernel<float, double, int32_t, int64_t>([](const fl::ExecutionContext& ctx, auto tag) {
    fl::cuda::Grad<false, false, typename decltype(tag)::type>(ctx);
  });
}
FL_REGISTER_CUDA_KERNELS(reduce_mean_grad) {
  ops.Kernel<float, double>([](const fl::ExecutionContext& ctx, auto tag) {
    fl::cuda::Grad<false, true, typename decltype(tag)::type>(ctx);
  });
}
FL_REGISTER_CUDA_KERNELS(reduce_max_grad) {
  ops.Kernel<float, double, int32_t, int64_t>([](const fl::ExecutionContext& ctx, auto tag) {
    fl::cuda::Grad<true, false, typename decltype(tag)::type>(ctx);
  });
}
FL_REGISTER_CUDA_KERNELS(reduce_prod_grad) {
  ops.Kernel<float, double>(
      [](const fl::ExecutionContext& ctx, auto tag) { fl::cuda::ProdGrad<typename decltype(tag)::type>(ctx); });
}
FL_REGISTER_CUDA_KERNELS(mean) {
  ops.Kernel<float, double>([](const fl::ExecutionContext& ctx, auto tag) {
    fl::cuda::Forward<fl::cuda::Kind::kSum, typename decltype(tag)::type>(
        ctx, std::vector<bool>(ctx.Input("X").rank(), true), true);
  });
}
