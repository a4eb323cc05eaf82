// matmul and matmul_grad on the GPU: the CPU kernel's batched products (kernels/matmul.cc, shapes from
// kernels/helpers/matmul_plan.h) as cuBLAS strided-batched GEMMs, folded into one GEMM where the layout allows; the
// gradient of a broadcast operand sums the batch's products (nn::GemmBatched with a C stride of 0).
#include "../helpers/matmul_plan.h"
#include "nn_common.cuh"

namespace fl {
namespace {

using cuda::nn::GemmBatched;
using cuda::nn::Operand;

template <typename T>
Operand<const T> Of(const T* p, const matmul::MatDesc& m) {
  return {p, m.batch_dims.size() > 0 ? m.rows * m.cols : 0};
}

const auto kMatmul = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  const matmul::MatmulPlan p = matmul::Plan(ctx, x, y);
  Tensor* out = ctx.Output("Out");
  out->Resize(p.out);
  T* o = out->mutable_data<T>(ctx.place());
  const int64_t m = p.x.op_rows(), n = p.y.op_cols(), k = p.x.op_cols();
  GemmBatched<T>(ctx, p.x.trans, p.y.trans, p.batch_dims.numel(), m, n, k, T(ctx.Attr<float>("alpha")),
                 Of(x.data<T>(), p.x), Of(y.data<T>(), p.y), T(0), Operand<T>{o, m * n});
};

// The CPU kernel's table (kernels/matmul.cc) of dX and dY for each pair of transposes.
const auto kMatmulGrad = [](const ExecutionContext& ctx, auto tag) {
  using T = typename decltype(tag)::type;
  const Tensor& x = ctx.Input("X");
  const Tensor& y = ctx.Input("Y");
  const Tensor& dout = ctx.Input("Out@GRAD");
  const matmul::MatmulPlan p = matmul::Plan(ctx, x, y);
  FL_ENFORCE(dout.numel() == p.out.numel(), "matmul_grad: Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dout.dims(),
             " does not match Out ", p.out);
  const bool tx = p.x.trans, ty = p.y.trans;
  const int64_t batch = p.batch_dims.numel(), m = p.x.op_rows(), n = p.y.op_cols(), k = p.x.op_cols();
  const T alpha = T(ctx.Attr<float>("alpha"));
  const Operand<const T> g{dout.data<T>(), m * n}, xo = Of(x.data<T>(), p.x), yo = Of(y.data<T>(), p.y);
  if (Tensor* dx = ctx.OutputOrNull("X@GRAD")) {
    dx->Resize(x.dims());
    Operand<T> c{dx->mutable_data<T>(ctx.place()), xo.stride};
    if (!tx) GemmBatched<T>(ctx, false, !ty, batch, m, k, n, alpha, g, yo, T(0), c);  // [M, K]
    else GemmBatched<T>(ctx, ty, true, batch, k, m, n, alpha, yo, g, T(0), c);        // [K, M]
  }
  if (Tensor* dy = ctx.OutputOrNull("Y@GRAD")) {
    dy->Resize(y.dims());
    Operand<T> c{dy->mutable_data<T>(ctx.place()), yo.stride};
    if (!ty) GemmBatched<T>(ctx, !tx, false, batch, k, n, m, alpha, xo, g, T(0), c);  // [K, N]
    else GemmBatched<T>(ctx, true, tx, batch, n, k, m, alpha, g, xo, T(0), c);        // [N, K]
  }
};

}  // namespace

FL_REGISTER_CUDA_KERNELS(matmul) { ops.Kernel<float, double>(kMatmul); }
FL_REGISTER_CUDA_KERNELS(matmul_grad) { ops.Kernel<float, double>(kMatmulGrad); }

}  // namespace fl
