// CUDA kernels of sgd, momentum, adam and adagrad (kernels/optimizer_ops.cc defines them), dense gradients only: the
// per-element formulas are the CPU's (helpers/optimizer_update.h, FL_HD). LearningRate, Beta1Pow and Beta2Pow are
// read by the kernel from device memory (float32 or float64, as ReadFloatScalarInput accepts), never on the host.
// A SelectedRows Grad (lookup_table is_sparse=True) raises: the executor would not fall back to the CPU kernel for
// a dtype that has a CUDA one.
#include "../helpers/optimizer_update.h"
#include "cuda/device.h"
#include "helpers.cuh"

namespace fl {
namespace cuda {
namespace {

// A one-element float32/float64 input on the device.
struct Scalar {
  const void* p;
  bool is_double;
  template <typename T>
  __device__ T Get() const {
    return is_double ? static_cast<T>(*static_cast<const double*>(p)) : static_cast<T>(*static_cast<const float*>(p));
  }
};

Scalar ScalarInput(const ExecutionContext& ctx, const char* slot) {
  const Tensor& t = ctx.Input(slot);
  FL_ENFORCE(t.numel() == 1, ctx.Type(), ": ", slot, " '", ctx.InputName(slot), "' must hold one element, has dims ",
             t.dims());
  FL_ENFORCE(t.dtype() == DType::FP32 || t.dtype() == DType::FP64, ctx.Type(), ": ", slot, " '", ctx.InputName(slot),
             "' must be float32/float64, got ", DTypeName(t.dtype()));
  return Scalar{t.raw_data(), t.dtype() == DType::FP64};
}

void RejectSparseGrad(const ExecutionContext& ctx) {
  FL_ENFORCE(ctx.InputRowsOrNull("Grad") == nullptr, ctx.Type(), ": Grad '", ctx.InputName("Grad"),
             "' is a SelectedRows (a sparse gradient, e.g. from lookup_table with is_sparse=True), which the ",
             ctx.place().ToString(), " kernel does not support; use is_sparse=False or run on CPUPlace");
}

// Output `out` with input `in`'s dims; its values copied from `in` unless it is `in`'s buffer (in-place updates).
template <typename T>
T* CopiedOutput(const ExecutionContext& ctx, const char* out, const char* in) {
  const Tensor& src = ctx.Input(in);
  T* o = UpdateOutput<T>(ctx, out, in);
  if (o != src.data<T>()) MemCopy(ctx.place(), o, ctx.place(), src.data<T>(), src.numel() * sizeof(T));
  return o;
}

template <typename T>
__global__ void SgdKernel(int64_t n, const T* p, const T* g, Scalar lr, T* pout) {
  const T r = lr.Get<T>();
  FL_CUDA_LOOP(i, n) { pout[i] = SgdElement(p[i], g[i], r); }
}

template <typename T>
__global__ void MomentumKernel(int64_t n, const T* p, const T* g, const T* v, T mu, Scalar lr, bool nesterov, T* pout,
                               T* vout) {
  const T r = lr.Get<T>();
  FL_CUDA_LOOP(i, n) {
    const T vn = MomentumVelocity(v[i], g[i], mu);
    const T pn = MomentumParam(p[i], g[i], vn, mu, r, nesterov);
    vout[i] = vn;
    pout[i] = pn;
  }
}

template <typename T>
__global__ void AdamKernel(int64_t n, const T* g, T b1, T b2, T eps, Scalar lr, Scalar b1p, Scalar b2p, T* p, T* m1,
                           T* m2) {
  const T lr_t = AdamStepSize<T>(lr.Get<T>(), b1p.Get<T>(), b2p.Get<T>());
  FL_CUDA_LOOP(i, n) {
    T pi = p[i], a = m1[i], b = m2[i];
    AdamElement(g[i], b1, b2, eps, lr_t, pi, a, b);
    m1[i] = a;
    m2[i] = b;
    p[i] = pi;
  }
}

template <typename T>
__global__ void AdagradKernel(int64_t n, const T* p, const T* g, const T* m, Scalar lr, T eps, T* pout, T* mout) {
  const T r = lr.Get<T>();
  FL_CUDA_LOOP(i, n) {
    const T mn = AdagradMoment(m[i], g[i]);
    const T pn = AdagradParam(p[i], g[i], mn, r, eps);
    mout[i] = mn;
    pout[i] = pn;
  }
}

template <typename T>
void CheckGradSize(const ExecutionContext& ctx) {
  FL_ENFORCE(ctx.Input("Grad").numel() == ctx.Input("Param").numel(), ctx.Type(), ": Grad '", ctx.InputName("Grad"),
             "' ", ctx.Input("Grad").dims(), " must have the shape of Param '", ctx.InputName("Param"), "' ",
             ctx.Input("Param").dims());
}

}  // namespace
}  // namespace cuda
}  // namespace fl

FL_REGISTER_CUDA_KERNELS(sgd) {
  ops.Kernel<float, double>([](const fl::ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    fl::cuda::RejectSparseGrad(ctx);
    fl::cuda::CheckGradSize<T>(ctx);
    const fl::cuda::Scalar lr = fl::cuda::ScalarInput(ctx, "LearningRate");
    const fl::Tensor& p = ctx.Input("Param");
    const T* pin = p.data<T>();
    const T* g = ctx.Input("Grad").data<T>();
    T* pout = fl::UpdateOutput<T>(ctx, "ParamOut", "Param");
    fl::cuda::Launch(ctx, p.numel(), fl::cuda::SgdKernel<T>, pin, g, lr, pout);
  });
}

FL_REGISTER_CUDA_KERNELS(momentum) {
  ops.Kernel<float, double>([](const fl::ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    fl::cuda::RejectSparseGrad(ctx);
    fl::cuda::CheckGradSize<T>(ctx);
    const fl::cuda::Scalar lr = fl::cuda::ScalarInput(ctx, "LearningRate");
    const T mu = static_cast<T>(ctx.Attr<float>("mu"));
    const bool nesterov = ctx.Attr<bool>("use_nesterov");
    const T* g = ctx.Input("Grad").data<T>();
    const T* v = ctx.Input("Velocity").data<T>();
    const T* p = ctx.Input("Param").data<T>();
    const int64_t n = ctx.Input("Param").numel();
    T* pout = fl::UpdateOutput<T>(ctx, "ParamOut", "Param");
    T* vout = fl::UpdateOutput<T>(ctx, "VelocityOut", "Velocity");
    fl::cuda::Launch(ctx, n, fl::cuda::MomentumKernel<T>, p, g, v, mu, lr, nesterov, pout, vout);
  });
}

FL_REGISTER_CUDA_KERNELS(adam) {
  ops.Kernel<float, double>([](const fl::ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    fl::cuda::RejectSparseGrad(ctx);
    fl::cuda::CheckGradSize<T>(ctx);
    const fl::cuda::Scalar lr = fl::cuda::ScalarInput(ctx, "LearningRate");
    const fl::cuda::Scalar b1p = fl::cuda::ScalarInput(ctx, "Beta1Pow");
    const fl::cuda::Scalar b2p = fl::cuda::ScalarInput(ctx, "Beta2Pow");
    const T b1 = static_cast<T>(ctx.Attr<float>("beta1"));
    const T b2 = static_cast<T>(ctx.Attr<float>("beta2"));
    const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
    const T* g = ctx.Input("Grad").data<T>();
    const int64_t n = ctx.Input("Param").numel();
    T* p = fl::cuda::CopiedOutput<T>(ctx, "ParamOut", "Param");
    T* m1 = fl::cuda::CopiedOutput<T>(ctx, "Moment1Out", "Moment1");
    T* m2 = fl::cuda::CopiedOutput<T>(ctx, "Moment2Out", "Moment2");
    fl::cuda::Launch(ctx, n, fl::cuda::AdamKernel<T>, g, b1, b2, eps, lr, b1p, b2p, p, m1, m2);
  });
}

FL_REGISTER_CUDA_KERNELS(adagrad) {
  ops.Kernel<float, double>([](const fl::ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    fl::cuda::RejectSparseGrad(ctx);
    fl::cuda::CheckGradSize<T>(ctx);
    const fl::cuda::Scalar lr = fl::cuda::ScalarInput(ctx, "LearningRate");
    const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
    const T* g = ctx.Input("Grad").data<T>();
    const T* m = ctx.Input("Moment").data<T>();
    const T* p = ctx.Input("Param").data<T>();
    const int64_t n = ctx.Input("Param").numel();
    T* pout = fl::UpdateOutput<T>(ctx, "ParamOut", "Param");
    T* mout = fl::UpdateOutput<T>(ctx, "MomentOut", "Moment");
    fl::cuda::Launch(ctx, n, fl::cuda::AdagradKernel<T>, p, g, m, lr, eps, pout, mout);
  });
}
