// matmul: Out = alpha * op(X) @ op(Y), batched over leading dims, with Fluid's (numpy's) 1-D rules.
#include "grad_op_maker.h"
#include "helpers/blas.h"
#include "helpers/matmul_plan.h"
#include "op_context.h"

namespace fl {

namespace {

using matmul::MatDesc;
using matmul::MatmulPlan;
using matmul::Plan;

template <typename T>
blas::BatchOperand<const T> Operand(const T* p, const MatDesc& m) {
  return {p, m.batch_dims.size() > 0 ? m.rows * m.cols : 0};
}

}  // namespace

FL_REGISTER_OP(matmul, op) {
  op.Doc(
        "Out = alpha * op(X) @ op(Y), op = transpose when transpose_X/transpose_Y. Rank > 2 operands are "
        "batches of matrices (a 2-D or 1-D operand is broadcast over the other's batch); a 1-D X is a row "
        "[1, K] and a 1-D Y a column [K, 1], and those dims are dropped from Out.")
      .Input("X", "left operand")
      .Input("Y", "right operand")
      .Output("Out", "the product")
      .Attr<bool>("transpose_X", false, "transpose the last two dims of X before multiplying")
      .Attr<bool>("transpose_Y", false, "transpose the last two dims of Y before multiplying")
      .Attr<float>("alpha", 1.0f, "scale of the product")
      .SetInferShape([](InferShapeContext& ctx) {
        ctx.EnforceSameDType("X", "Y");
        ctx.SetOutput("Out", Plan(ctx).out, ctx.InputDType("X"));
        ctx.ShareLoD("X", "Out");  // Fluid shares X's LoD whatever the product's shape
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const Tensor& y = ctx.Input("Y");
        const MatmulPlan p = Plan(ctx, x, y);
        Tensor* out = ctx.Output("Out");
        out->Resize(p.out);
        T* o = out->mutable_data<T>(ctx.place());
        const int64_t m = p.x.op_rows(), n = p.y.op_cols(), k = p.x.op_cols();
        blas::GemmBatched<T>(p.x.trans, p.y.trans, p.batch_dims.numel(), m, n, k, T(ctx.Attr<float>("alpha")),
                             Operand(x.data<T>(), p.x), Operand(y.data<T>(), p.y), T(0), {o, m * n});
      });
  // With Out = alpha * op(X) @ op(Y) and G = Out@GRAD (per batch entry):
  //   no transposes:  dX = alpha G @ Y^T      dY = alpha X^T @ G
  //   transpose_X:    dX = alpha Y @ G^T      dY = alpha X @ G
  //   transpose_Y:    dX = alpha G @ Y        dY = alpha G^T @ X
  //   both:           dX = alpha Y^T @ G^T    dY = alpha G^T @ X^T
  // A broadcast operand (no batch dims) gets the sum over the batch (a GEMM with C stride 0).
  op.GradOp({"X", "Y", "Out@GRAD"})
      .Doc("Gradients of matmul (each output optional).")
      .Grad(BilinearGradGrad)
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const Tensor& y = ctx.Input("Y");
        const Tensor& dout = ctx.Input("Out@GRAD");
        const MatmulPlan p = Plan(ctx, x, y);
        FL_ENFORCE(dout.numel() == p.out.numel(), "matmul_grad: Out@GRAD '", ctx.InputName("Out@GRAD"), "' ",
                   dout.dims(), " does not match Out ", p.out);
        const bool tx = p.x.trans, ty = p.y.trans;
        const int64_t batch = p.batch_dims.numel(), m = p.x.op_rows(), n = p.y.op_cols(), k = p.x.op_cols();
        const T alpha = T(ctx.Attr<float>("alpha"));
        const blas::BatchOperand<const T> g{dout.data<T>(), m * n}, xo = Operand(x.data<T>(), p.x),
                                                                    yo = Operand(y.data<T>(), p.y);
        if (Tensor* dx = ctx.OutputOrNull("X@GRAD")) {
          dx->Resize(x.dims());
          blas::BatchOperand<T> c{dx->mutable_data<T>(ctx.place()), xo.stride};
          if (!tx) blas::GemmBatched<T>(false, !ty, batch, m, k, n, alpha, g, yo, T(0), c);  // [M, K]
          else blas::GemmBatched<T>(ty, true, batch, k, m, n, alpha, yo, g, T(0), c);        // [K, M]
        }
        if (Tensor* dy = ctx.OutputOrNull("Y@GRAD")) {
          dy->Resize(y.dims());
          blas::BatchOperand<T> c{dy->mutable_data<T>(ctx.place()), yo.stride};
          if (!ty) blas::GemmBatched<T>(!tx, false, batch, k, n, m, alpha, xo, g, T(0), c);  // [K, N]
          else blas::GemmBatched<T>(true, tx, batch, n, k, m, alpha, g, xo, T(0), c);        // [N, K]
        }
      });
}

}  // namespace fl
