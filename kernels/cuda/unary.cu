// CUDA kernels of the unary ops (kernels/unary.cc defines them), their _grad and _grad_grad ops: one template over
// the functor table of helpers/unary_functors.h (FL_HD), so each row's math is the one the CPU tests exercise. The
// functor is built on the host from the op's attributes and passed to the kernel by value. Rows with a kZero
// gradient (floor, ceil, sign, round) compose it from fill ops: only their forward is here.
#include "../helpers/unary_functors.h"
#include "cuda/device.h"
#include "helpers.cuh"

namespace fl {
namespace cuda {
namespace {

using namespace unary_fn;  // NOLINT: the table of functors

template <typename A, typename T>
__global__ void FwdKernel(int64_t n, A a, const T* x, T* out) {
  FL_CUDA_LOOP(i, n) { out[i] = a.template Fwd<T>(x[i]); }
}
template <typename A, typename T>
__global__ void GradKernel(int64_t n, A a, const T* v, const T* g, T* dx) {
  FL_CUDA_LOOP(i, n) { dx[i] = a.template Grad<T>(v[i], g[i]); }
}
template <typename A, typename T>
__global__ void GradGradKernel(int64_t n, A a, const T* v, const T* g, const T* dd, T* dv) {
  FL_CUDA_LOOP(i, n) { dv[i] = a.template GradGrad<T>(v[i], g[i], dd[i]); }
}

// The inputs' tensors, all with t0's element count (the CPU's MapSameShape check); the output shaped like t0.
template <typename T>
T* OutputLike(const ExecutionContext& ctx, const char* out, std::initializer_list<const char*> slots) {
  const char* first = *slots.begin();
  const Tensor& t0 = ctx.Input(first);
  for (const char* slot : slots) {
    const Tensor& t = ctx.Input(slot);
    FL_ENFORCE(t.numel() == t0.numel(), "op ", ctx.Type(), ": ", first, " '", ctx.InputName(first), "' ", t0.dims(),
               " and ", slot, " '", ctx.InputName(slot), "' ", t.dims(), " must have the same number of elements");
  }
  Tensor* o = ctx.Output(out);
  o->Resize(t0.dims());
  return o->mutable_data<T>(ctx.place());
}

template <typename A>
void RegisterFwd(CudaKernelBuilder& ops) {
  ops.Kernel<float, double>([](const ExecutionContext& ctx, auto tag) {
    using T = typename decltype(tag)::type;
    const A a(ctx);
    const Tensor& x = ctx.Input("X");
    T* out = OutputLike<T>(ctx, "Out", {"X"});
    Launch(ctx, x.numel(), FwdKernel<A, T>, a, x.data<T>(), out);
  });
}

template <typename A>
void RegisterGrad(CudaKernelBuilder& ops) {
  if constexpr (A::kGradFrom != GradFrom::kZero) {
    ops.Kernel<float, double>([](const ExecutionContext& ctx, auto tag) {
      using T = typename decltype(tag)::type;
      if (!ctx.HasOutput("X@GRAD")) return;
      const A a(ctx);
      const Tensor& v = ctx.Input(GradSource<A>());
      const Tensor& g = ctx.Input("Out@GRAD");
      const T* vp = v.data<T>();
      const T* gp = g.data<T>();
      T* dx = OutputLike<T>(ctx, "X@GRAD", {GradSource<A>(), "Out@GRAD"});  // may be Out@GRAD itself: read first
      Launch(ctx, v.numel(), GradKernel<A, T>, a, vp, gp, dx);
    });
  }
}

template <typename A>
void RegisterGradGrad(CudaKernelBuilder& ops) {
  if constexpr (HasGradGrad<A>::value) {
    ops.Kernel<float, double>([](const ExecutionContext& ctx, auto tag) {
      using T = typename decltype(tag)::type;
      const A a(ctx);
      const char* out = A::kGradFrom == GradFrom::kX ? "DX" : "DOutNew";
      const Tensor& v = ctx.Input(GradSource<A>());
      const T* vp = v.data<T>();
      const T* gp = ctx.Input("DOut").data<T>();
      const T* dd = ctx.Input("DDX").data<T>();
      T* dv = OutputLike<T>(ctx, out, {GradSource<A>(), "DOut", "DDX"});
      Launch(ctx, v.numel(), GradGradKernel<A, T>, a, vp, gp, dd, dv);
    });
  }
}

}  // namespace
}  // namespace cuda
}  // namespace fl

// Forward, grad (not for kZero rows) and grad_grad (rows with a second derivative) of one table row. The grad ops'
// kernels register only when the CPU side has that op (a row without GradGrad has no <op>_grad_grad).
#define FL_CUDA_UNARY_FWD(name, Functor) \
  FL_REGISTER_CUDA_KERNELS(name) { ::fl::cuda::RegisterFwd<::fl::unary_fn::Functor>(ops); }
#define FL_CUDA_UNARY(name, Functor) \
  FL_CUDA_UNARY_FWD(name, Functor)   \
  FL_REGISTER_CUDA_KERNELS(name##_grad) { ::fl::cuda::RegisterGrad<::fl::unary_fn::Functor>(ops); }
#define FL_CUDA_UNARY2(name, Functor) \
  FL_CUDA_UNARY(name, Functor)        \
  FL_REGISTER_CUDA_KERNELS(name##_grad_grad) { ::fl::cuda::RegisterGradGrad<::fl::unary_fn::Functor>(ops); }

FL_CUDA_UNARY(abs, Abs)
FL_CUDA_UNARY(relu, Relu)
FL_CUDA_UNARY2(sigmoid, Sigmoid)
FL_CUDA_UNARY2(tanh, Tanh)
FL_CUDA_UNARY2(exp, Exp)
FL_CUDA_UNARY2(log, Log)
FL_CUDA_UNARY2(sqrt, Sqrt)
FL_CUDA_UNARY2(square, Square)
FL_CUDA_UNARY_FWD(floor, Floor)
FL_CUDA_UNARY_FWD(ceil, Ceil)
FL_CUDA_UNARY2(cos, Cos)
FL_CUDA_UNARY_FWD(sign, Sign)
FL_CUDA_UNARY(leaky_relu, LeakyRelu)
FL_CUDA_UNARY(relu6, Relu6)
FL_CUDA_UNARY(clip, Clip)
FL_CUDA_UNARY2(gelu, Gelu)
FL_CUDA_UNARY2(elu, Elu)
FL_CUDA_UNARY2(selu, Selu)
FL_CUDA_UNARY2(swish, Swish)
FL_CUDA_UNARY2(hard_swish, HardSwish)
FL_CUDA_UNARY(hard_sigmoid, HardSigmoid)
FL_CUDA_UNARY2(softplus, Softplus)
FL_CUDA_UNARY2(softsign, Softsign)
FL_CUDA_UNARY2(rsqrt, Rsqrt)
FL_CUDA_UNARY2(reciprocal, Reciprocal)
FL_CUDA_UNARY2(sin, Sin)
FL_CUDA_UNARY2(pow, Pow)
FL_CUDA_UNARY_FWD(round, Round)
