// mul: Out = flatten(X, x_num_col_dims) @ flatten(Y, y_num_col_dims), the matrix product behind fc.
#include "grad_accumulate.h"
#include "grad_op_maker.h"
#include "helpers/blas.h"
#include "op_context.h"

namespace fl {

namespace {

int64_t KnownProduct(const DDim& d, int begin, int end) {  // -1 if any dim in range is unknown
  int64_t n = 1;
  for (const int64_t* p = d.begin() + begin; p < d.begin() + end; ++p) {
    if (*p < 0) return -1;
    n *= *p;
  }
  return n;
}

void MulInferShape(InferShapeContext& ctx) {
  ctx.EnforceSameDType("X", "Y");
  const DDim x = ctx.InputDim("X"), y = ctx.InputDim("Y");
  const int xn = ctx.Attr<int32_t>("x_num_col_dims"), yn = ctx.Attr<int32_t>("y_num_col_dims");
  FL_ENFORCE(xn >= 1 && xn < x.size(), "mul: x_num_col_dims=", xn, " is out of range [1, ", x.size(), ") for ",
             ctx.Describe("X"));
  FL_ENFORCE(yn >= 1 && yn < y.size(), "mul: y_num_col_dims=", yn, " is out of range [1, ", y.size(), ") for ",
             ctx.Describe("Y"));
  const int64_t xk = KnownProduct(x, xn, x.size()), yk = KnownProduct(y, 0, yn);
  FL_ENFORCE(xk < 0 || yk < 0 || xk == yk, "mul: ", ctx.Describe("X"), " flattened at x_num_col_dims=", xn, " to [",
             KnownProduct(x, 0, xn), ", ", xk, "] and ", ctx.Describe("Y"), " flattened at y_num_col_dims=", yn,
             " to [", yk, ", ", KnownProduct(y, yn, y.size()), "]: inner dims ", xk, " and ", yk, " differ");
  DDim out;
  for (int i = 0; i < xn; ++i) out.push_back(x[i]);
  for (int i = yn; i < y.size(); ++i) out.push_back(y[i]);
  ctx.SetOutput("Out", out, ctx.InputDType("X"));
  ctx.ShareLoD("X", "Out");
}

// The three GEMM sizes of a mul: X is [M, K], Y is [K, N].
struct MulSizes {
  int64_t m, k, n;
};
MulSizes Sizes(const ExecutionContext& ctx, const DDim& x, const DDim& y) {
  const int xn = ctx.Attr<int32_t>("x_num_col_dims"), yn = ctx.Attr<int32_t>("y_num_col_dims");
  return {x.Product(0, xn), x.Product(xn, x.size()), y.Product(yn, y.size())};
}

}  // namespace

FL_REGISTER_OP(mul, op) {
  op.Doc(
        "Out = X' @ Y' where X' flattens X to 2-D at x_num_col_dims and Y' flattens Y at y_num_col_dims; "
        "Out's dims are X.dims[:x_num_col_dims] + Y.dims[y_num_col_dims:].")
      .Input("X", "left operand")
      .Input("Y", "right operand")
      .Output("Out", "the product")
      .Attr<int32_t>("x_num_col_dims", 1, "X's dims [0, x_num_col_dims) become rows, the rest columns")
      .Range(1, DDim::kMaxRank - 1)
      .Attr<int32_t>("y_num_col_dims", 1, "Y's dims [0, y_num_col_dims) become rows, the rest columns")
      .Range(1, DDim::kMaxRank - 1)
      .SetInferShape(MulInferShape)
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const Tensor& y = ctx.Input("Y");
        const MulSizes s = Sizes(ctx, x.dims(), y.dims());
        T* out = ctx.Alloc<T>("Out");
        blas::Gemm<T>(false, false, s.m, s.n, s.k, T(1), x.data<T>(), y.data<T>(), T(0), out);
      });
  op.GradOp({"X", "Y", "Out@GRAD"})
      .Doc("Gradients of mul: X@GRAD = Out@GRAD @ Y'^T, Y@GRAD = X'^T @ Out@GRAD (each optional).")
      .Grad(BilinearGradGrad)
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& x = ctx.Input("X");
        const Tensor& y = ctx.Input("Y");
        const Tensor& dout = ctx.Input("Out@GRAD");
        const MulSizes s = Sizes(ctx, x.dims(), y.dims());
        FL_ENFORCE(dout.numel() == s.m * s.n, "mul_grad: Out@GRAD '", ctx.InputName("Out@GRAD"), "' ", dout.dims(),
                   " does not hold [", s.m, ", ", s.n, "] elements");
        if (Tensor* dx = ctx.OutputOrNull("X@GRAD")) {  // [M, K] = [M, N] @ [K, N]^T
          dx->Resize(x.dims());
          blas::Gemm<T>(false, true, s.m, s.k, s.n, T(1), dout.data<T>(), y.data<T>(), T(0),
                        dx->mutable_data<T>(ctx.place()));
        }
        if (Tensor* dy = ctx.OutputOrNull("Y@GRAD")) {  // [K, N] = [M, K]^T @ [M, N]
          // A StaticRNN step adds its weight gradient into the running total it was lent (grad_accumulate.h).
          const bool add = AccumulateInto(dy);
          FL_ENFORCE(!add || (dy->IsInitialized() && dy->numel() == y.numel() && dy->dtype() == y.dtype()),
                     "mul_grad: the running total of Y@GRAD '", ctx.OutputName("Y@GRAD"), "' is ", dy->dims(),
                     ", Y is ", y.dims());
          dy->Resize(y.dims());
          blas::Gemm<T>(true, false, s.k, s.n, s.m, T(1), x.data<T>(), dout.data<T>(), add ? T(1) : T(0),
                        dy->mutable_data<T>(ctx.place()));
        }
      });
}

}  // namespace fl
