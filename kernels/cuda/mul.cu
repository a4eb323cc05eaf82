// mul and mul_grad on the GPU: the CPU kernel's three GEMMs (kernels/mul.cc) through cuBLAS, row-major and packed,
// including the StaticRNN accumulation of Y@GRAD (beta = 1 into the running total).
#include "grad_accumulate.h"
#include "nn_common.cuh"

namespace fl {
namespace {

struct MulSizes {
  int64_t m, k, n;
};
MulSizes Sizes(const ExecutionContext& ctx, const DDim& x, const DDim& y) {
  const int xn = ctx.Attr<int32_t>("x_num_col_dims"), yn = ctx.Attr<int32_t>("y_num_col_dims");
  return {x.Product(0, xn), x.Product(xn, x.size()), y.Product(yn, y.size())};
}

const auto kMul = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  const MulSizes s = Sizes(ctx, x.dims(), y.dims());
  T* out = ctx.Alloc<T>("Out");
  cuda::nn::Gemm<T>(ctx, false, false, s.m, s.n, s.k, T(1), x.data<T>(), y.data<T>(), T(0), out);
};

const auto kMulGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const MulSizes s = Sizes(ctx, x.dims(), y.dims());
  FL_ENFORCE(dout.numel() == s.m * s.n, "mul_grad: Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dout.dims(),
             " does not hold [", s.m, ", ", s.n, "] elements");
  if (Tensor* dx = ctx.OutputOrNull("X@GRAD")) {  // [M, K] = [M, N] @ [K, N]^T
    dx->Resize(x.dims());
    cuda::nn::Gemm<T>(ctx, false, true, s.m, s.k, s.n, T(1), dout.data<T>(), y.data<T>(), T(0),
                      dx->mutable_data<T>(ctx.place()));
  }
  if (Tensor* dy = ctx.OutputOrNull("Y@GRAD")) {  // [K, N] = [M, K]^T @ [M, N]
    const bool add = AccumulateInto(dy);
    FL_ENFORCE(!add || (dy->IsInitialized() && dy->numel() == y.numel() && dy->dtype() == y.dtype()),
               "mul_grad: the running total of Y@GRAD '", ctx.OutputName("Y@GRAD"), "' is ", dy->dims(), ", Y is ",
               y.dims());
    dy->Resize(y.dims());
    cuda::nn::Gemm<T>(ctx, true, false, s.k, s.n, s.m, T(1), x.data<T>(), dout.data<T>(), add ? T(1) : T(0),
                      dy->mutable_data<T>(ctx.place()));
  }
};

}  // namespace

FL_REGISTER_CUDA_KERNELS(mul) { ops.Kernel<float, double>(kMul); }
FL_REGISTER_CUDA_KERNELS(mul_grad) { ops.Kernel<float, double>(kMulGrad); }

}  // namespace fl
