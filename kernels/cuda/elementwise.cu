// CUDA kernels of the binary elementwise ops (kernels/elementwise.cc defines them), scale and sum (dense).
//
// Shapes and axis rules are the CPU's: the host builds the CPU's BroadcastPlan (helpers/broadcast.h) and the
// kernels walk it through a BroadcastIndex (helpers.cuh); the per-element math is the CPU's functors
// (helpers/elementwise_functors.h, FL_HD). Gradients: an operand with the output's size is an elementwise map;
// one that was broadcast is a gather reduction over the dims it was broadcast along (LaunchReduce, no atomics).
#include <type_traits>
#include <vector>

#include "../helpers/broadcast.h"
#include "../helpers/elementwise_functors.h"
#include "../helpers/elementwise_plan.h"
#include "../helpers/sum_inputs.h"
#include "cuda/device.h"
#include "helpers.cuh"

namespace fl {
namespace cuda {
namespace {

using namespace binary_fn;  // NOLINT: the table of functors

template <typename Op, typename T>
__global__ void SameShapeKernel(int64_t n, const T* x, const T* y, T* out) {
  FL_CUDA_LOOP(i, n) { out[i] = Op::template Fwd<T>(x[i], y[i]); }
}
template <typename Op, typename T>
__global__ void BroadcastKernel(int64_t n, BroadcastIndex b, const T* x, const T* y, T* out) {
  FL_CUDA_LOOP(i, n) {
    int64_t xo, yo;
    b.Offsets(i, &xo, &yo);
    out[i] = Op::template Fwd<T>(x[xo], y[yo]);
  }
}
template <typename T>
__global__ void CheckNonZeroKernel(int64_t n, const T* y, DeviceErrorSink err) {
  FL_CUDA_LOOP(i, n) {
    if (y[i] == T(0)) RaiseDeviceError(err, i, 0, 0);
  }
}

bool SameShape(const BroadcastPlan& p) { return p.rank == 1 && p.xs[0] == 1 && p.ys[0] == 1; }

template <typename Op, typename T>
void ForwardKernel(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  BroadcastPlan plan = ElementwisePlan(ctx, x, y);
  if constexpr (Divides<Op>::value && std::is_integral_v<T>) {
    // The CPU says "Y 'y' has a zero at flat index i (integer division by zero)"; the sink names the element.
    Launch(ctx, y.numel(), CheckNonZeroKernel<T>, y.data<T>(),
           ErrorSink(ctx, "Y", "a divisor in Y (integer division by zero)"));
  }
  Tensor* out = ctx.Output("Out");
  FL_ENFORCE((out != &x || x.numel() == plan.numel) && (out != &y || y.numel() == plan.numel), ctx.Type(), ": Out '",
             ctx.OutputName("Out"), "' aliases an input that is smaller than the output ", plan.out_dims);
  out->Resize(plan.out_dims);
  T* o = out->mutable_data<T>(ctx.place());
  if (plan.numel == 0) return;
  if (SameShape(plan)) Launch(ctx, plan.numel, SameShapeKernel<Op, T>, x.data<T>(), y.data<T>(), o);
  else Launch(ctx, plan.numel, BroadcastKernel<Op, T>, MakeBroadcastIndex(plan), x.data<T>(), y.data<T>(), o);
}

// d[k] = G(x, y, dout) of output element k (the operand has the output's size).
template <typename Op, bool kX, typename T>
__global__ void GradMapKernel(int64_t n, BroadcastIndex b, const T* x, const T* y, const T* g, T* d) {
  FL_CUDA_LOOP(i, n) {
    int64_t xo, yo;
    b.Offsets(i, &xo, &yo);
    d[i] = kX ? Op::template Dx<T>(x[xo], y[yo], g[i]) : Op::template Dy<T>(x[xo], y[yo], g[i]);
  }
}

// The per-element partial of output element `flat`, for LaunchReduce.
template <typename Op, bool kX, typename T>
struct GradLoad {
  BroadcastIndex b;
  const T *x, *y, *g;
  __device__ T operator()(int64_t flat) const {
    int64_t xo, yo;
    b.Offsets(flat, &xo, &yo);
    return kX ? Op::template Dx<T>(x[xo], y[yo], g[flat]) : Op::template Dy<T>(x[xo], y[yo], g[flat]);
  }
};
template <typename T>
struct StoreTo {
  T* d;
  __device__ void operator()(int64_t o, T v) const { d[o] = v; }
};
template <typename T>
__global__ void FillKernel(int64_t n, T* d, T v) {
  FL_CUDA_LOOP(i, n) { d[i] = v; }
}

template <typename Op, bool kX, typename T>
void OperandGrad(const ExecutionContext& ctx, const BroadcastPlan& plan, const T* x, const T* y, const T* g, T* d,
                 int64_t d_numel) {
  if (plan.numel == 0) {  // nothing read it: zeros (the CPU fills a reduced gradient with 0)
    Launch(ctx, d_numel, FillKernel<T>, d, T(0));
    return;
  }
  const BroadcastIndex b = MakeBroadcastIndex(plan);
  if (d_numel == plan.numel) {
    Launch(ctx, plan.numel, GradMapKernel<Op, kX, T>, b, x, y, g, d);
    return;
  }
  LaunchReduce(ctx, MakeBroadcastGradIndex(plan, kX), T(0), GradLoad<Op, kX, T>{b, x, y, g}, SumOp{}, StoreTo<T>{d});
}

template <typename Op, typename T>
void GradKernel(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  const Tensor& dout = ctx.Input("Out@GRAD");
  BroadcastPlan plan = ElementwiseGradPlan(ctx, x, y, dout);
  const T* xp = x.data<T>();
  const T* yp = y.data<T>();
  const T* gp = dout.data<T>();
  if (Tensor* dx = ctx.OutputOrNull("X@GRAD")) {
    dx->Resize(x.dims());
    OperandGrad<Op, true>(ctx, plan, xp, yp, gp, dx->mutable_data<T>(ctx.place()), x.numel());
  }
  if (Tensor* dy = ctx.OutputOrNull("Y@GRAD")) {
    dy->Resize(y.dims());
    OperandGrad<Op, false>(ctx, plan, xp, yp, gp, dy->mutable_data<T>(ctx.place()), y.numel());
  }
}

template <typename Op>
void RegisterForward(CudaKernelBuilder& ops) {
  ops.Kernel<float, double, int32_t, int64_t>(
      [](const ExecutionContext& ctx, auto tag) { ForwardKernel<Op, typename decltype(tag)::type>(ctx); });
}
template <typename Op>
void RegisterGrad(CudaKernelBuilder& ops) {
  ops.Kernel<float, double, int32_t, int64_t>(
      [](const ExecutionContext& ctx, auto tag) { GradKernel<Op, typename decltype(tag)::type>(ctx); });
}

// ------------------------------------------------------------------ scale

template <typename T>
__global__ void ScaleKernel(int64_t n, ScaleFn<T> f, const T* x, T* out) {
  FL_CUDA_LOOP(i, n) { out[i] = f(x[i]); }
}

// ------------------------------------------------------------------ sum (dense inputs)

constexpr int kSumArity = 8;
template <typename T>
struct SumPtrs {
  const T* p[kSumArity];
};
// out[i] = (accumulate ? out[i] : 0) + p[0][i] + ... + p[k-1][i]; out may be p[0] (each element is read first).
template <typename T>
__global__ void SumKernel(int64_t n, SumPtrs<T> in, int k, bool accumulate, T* out) {
  FL_CUDA_LOOP(i, n) {
    T s = accumulate ? out[i] + in.p[0][i] : in.p[0][i];
    for (int j = 1; j < k; ++j) s += in.p[j][i];
    out[i] = s;
  }
}

template <typename T>
void SumKernelHost(const ExecutionContext& ctx) {
  const int n = ctx.InputSize("X");
  FL_ENFORCE(!ctx.OutputVar("Out")->IsTensorList(), "sum: LoDTensorArray inputs are not supported on ",
             ctx.place().ToString(), " (run the program on CPUPlace)");
  for (int i = 0; i < n; ++i) {
    FL_ENFORCE(!ctx.InputVar("X", i)->IsTensorList(), "sum: LoDTensorArray X[", i, "] '", ctx.InputName("X", i),
               "' is not supported on ", ctx.place().ToString(), " (run the program on CPUPlace)");
    FL_ENFORCE(!ctx.InputRowsOrNull("X", i), "sum: SelectedRows X[", i, "] '", ctx.InputName("X", i),
               "' (a sparse gradient) is not supported on ", ctx.place().ToString(),
               " (use is_sparse=False or run the program on CPUPlace)");
  }
  Tensor* out = ctx.Output("Out");
  SumInputs<T> in(ctx);
  if (in.WriteEmptyOut(ctx, out)) return;
  std::vector<const T*>& ptrs = in.ptrs;
  const Tensor* first = in.first;
  const bool out_is_input = in.out_is_input;
  // The inputs' buffers stay alive while the kernels read them (stream order: a freed block is reused only by
  // work queued later on the same stream).
  std::shared_ptr<Allocation> keep = out_is_input ? out->holder() : nullptr;
  const DDim dims = first->dims();
  LoD lod = first->lod();
  out->Resize(dims);
  T* o = out->mutable_data<T>(ctx.place());
  const int64_t numel = dims.numel();
  // In place: Out's buffer must be read in the first pass (before any partial sum is written into it).
  for (size_t j = 1; j < ptrs.size(); ++j)
    if (ptrs[j] == o) std::swap(ptrs[0], ptrs[j]);
  if (ptrs.size() == 1) {
    if (o != ptrs[0]) MemCopy(ctx.place(), o, ctx.place(), ptrs[0], numel * sizeof(T));
  } else {
    for (size_t b = 0; b < ptrs.size(); b += kSumArity) {
      SumPtrs<T> s{};
      const int k = static_cast<int>(std::min<size_t>(kSumArity, ptrs.size() - b));
      for (int j = 0; j < k; ++j) s.p[j] = ptrs[b + j];
      Launch(ctx, numel, SumKernel<T>, s, k, b > 0, o);
    }
  }
  if (out->lod() != lod) out->set_lod(lod);
}

}  // namespace
}  // namespace cuda
}  // namespace fl

FL_REGISTER_CUDA_KERNELS(elementwise_add) { fl::cuda::RegisterForward<fl::binary_fn::AddOp>(ops); }
FL_REGISTER_CUDA_KERNELS(elementwise_sub) { fl::cuda::RegisterForward<fl::binary_fn::SubOp>(ops); }
FL_REGISTER_CUDA_KERNELS(elementwise_mul) { fl::cuda::RegisterForward<fl::binary_fn::MulOp>(ops); }
FL_REGISTER_CUDA_KERNELS(elementwise_div) { fl::cuda::RegisterForward<fl::binary_fn::DivOp>(ops); }
FL_REGISTER_CUDA_KERNELS(elementwise_max) { fl::cuda::RegisterForward<fl::binary_fn::MaxOp>(ops); }
FL_REGISTER_CUDA_KERNELS(elementwise_min) { fl::cuda::RegisterForward<fl::binary_fn::MinOp>(ops); }
FL_REGISTER_CUDA_KERNELS(elementwise_pow) { fl::cuda::RegisterForward<fl::binary_fn::PowOp>(ops); }
FL_REGISTER_CUDA_KERNELS(elementwise_floordiv) { fl::cuda::RegisterForward<fl::binary_fn::FloorDivOp>(ops); }
FL_REGISTER_CUDA_KERNELS(elementwise_mod) { fl::cuda::RegisterForward<fl::binary_fn::ModOp>(ops); }
FL_REGISTER_CUDA_KERNELS(elementwise_add_grad) { fl::cuda::RegisterGrad<fl::binary_fn::AddOp>(ops); }
FL_REGISTER_CUDA_KERNELS(elementwise_sub_grad) { fl::cuda::RegisterGrad<fl::binary_fn::SubOp>(ops); }
FL_REGISTER_CUDA_KERNELS(elementwise_mul_grad) { fl::cuda::RegisterGrad<fl::binary_fn::MulOp>(ops); }
FL_REGISTER_CUDA_KERNELS(elementwise_pow_grad) {
  ops.Kernel<float, double>([](const fl::ExecutionContext& ctx, auto tag) {
    fl::cuda::GradKernel<fl::binary_fn::PowOp, typename decltype(tag)::type>(ctx);
  });
}

FL_REGISTER_CUDA_KERNELS(scale) {
  ops.Kernel<float, double, int32_t, int64_t>([](const fl::ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    const fl::ScaleFn<T> f(ctx.Attr<float>("scale"), ctx.Attr<float>("bias"), ctx.Attr<bool>("bias_after_scale"));
    const fl::Tensor& x = ctx.Input("X");
    fl::Tensor* o = ctx.Output("Out");
    o->Resize(x.dims());
    T* op = o->mutable_data<T>(ctx.place());
    fl::cuda::Launch(ctx, x.numel(), fl::cuda::ScaleKernel<T>, f, x.data<T>(), op);
  });
}

FL_REGISTER_CUDA_KERNELS(sum) {
  ops.Kernel<float, double, int32_t, int64_t>(
      [](const fl::ExecutionContext& ctx, auto tag) { fl::cuda::SumKernelHost<typename decltype(tag)::type>(ctx); });
}
