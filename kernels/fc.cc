// fc: Fluid 1.8's fused fully connected op, Out = act(flatten(Input, in_num_col_dims) @ W + Bias), one GEMM
// with the bias and the activation applied to each block of output rows right after the GEMM wrote it. The
// inference pass fuse_fc (kernels/passes/fuse_fc.cc) makes it from mul + elementwise_add (+ an activation);
// it has no gradient (inference programs only).
#include <algorithm>

#include "helpers/bias_act.h"
#include "helpers/blas.h"
#include "op_context.h"
#include "thread_pool.h"

namespace fl {

namespace {

void FcInferShape(InferShapeContext& ctx) {
  ctx.EnforceSameDType("Input", "W");
  const DDim x = ctx.InputDim("Input"), w = ctx.InputDim("W");
  const int n = ctx.Attr<int32_t>("in_num_col_dims");
  FL_ENFORCE(w.size() == 2, "fc: ", ctx.Describe("W"), " must be 2-D [K, N]");
  FL_ENFORCE(n >= 1 && n < x.size(), "fc: in_num_col_dims=", n, " is out of range [1, ", x.size(), ") for ",
             ctx.Describe("Input"));
  int64_t k = 1;
  for (int i = n; i < x.size() && k >= 0; ++i) k = x[i] < 0 ? -1 : k * x[i];
  FL_ENFORCE(k < 0 || w[0] < 0 || k == w[0], "fc: ", ctx.Describe("Input"), " flattened at in_num_col_dims=", n,
             " has ", k, " columns but ", ctx.Describe("W"), " has ", w[0], " rows");
  if (ctx.HasInput("Bias")) {
    ctx.EnforceSameDType("Input", "Bias");
    const DDim b = ctx.InputDim("Bias");
    const int64_t bn = b.numel();
    FL_ENFORCE(bn < 0 || w[1] < 0 || bn == w[1], "fc: ", ctx.Describe("Bias"), " must hold N = ", w[1],
               " values (the columns of ", ctx.Describe("W"), ")");
  }
  DDim out;
  for (int i = 0; i < n; ++i) out.push_back(x[i]);
  out.push_back(w[1]);
  ctx.SetOutput("Out", out, ctx.InputDType("Input"));
  ctx.ShareLoD("Input", "Out");
}

template <typename T>
void FcKernel(const ExecutionContext& ctx) {
  const Tensor& x = ctx.Input("Input");
  const Tensor& w = ctx.Input("W");
  const Tensor* bias = ctx.InputOrNull("Bias");
  const int n_col = ctx.Attr<int32_t>("in_num_col_dims");
  const int64_t m = x.dims().Product(0, n_col), k = x.dims().Product(n_col, x.dims().size()), n = w.dims()[1];
  BiasAct<T> epi;
  epi.act = EpilogueActByName(ctx.Attr<std::string>("activation_type"));
  T* out = ctx.Alloc<T>("Out");
  const T* b = bias ? bias->data<T>() : nullptr;
  // Row blocks of ~64K outputs: each block's bias + activation runs while the GEMM's output is in cache. A
  // small product (batch 1) is one block.
  const int64_t rows = std::max<int64_t>(1, (int64_t(1) << 16) / std::max<int64_t>(1, n));
  if (rows >= m) {
    blas::Gemm<T>(false, false, m, n, k, T(1), x.data<T>(), w.data<T>(), T(0), out);
    epi.Rows(out, m, n, n, b);
    return;
  }
  for (int64_t r0 = 0; r0 < m; r0 += rows) {
    const int64_t r = std::min(rows, m - r0);
    blas::Gemm<T>(false, false, r, n, k, T(1), x.data<T>() + r0 * k, w.data<T>(), T(0), out + r0 * n);
    epi.Rows(out + r0 * n, r, n, n, b);
  }
}

}  // namespace

FL_REGISTER_OP(fc, op) {
  op.Doc(
        "Out = act(Input' @ W + Bias) where Input' flattens Input to 2-D at in_num_col_dims; Out's dims are "
        "Input.dims[:in_num_col_dims] + [N]. Fluid 1.8's fused fc op (made by the fuse_fc inference pass from mul + "
        "elementwise_add + activation); no gradient.")
      .Input("Input", "input, flattened to [M, K] at in_num_col_dims")
      .Input("W", "weights [K, N]")
      .DispensableInput("Bias", "bias of N values (added to every row)")
      .Output("Out", "act(Input' @ W + Bias), [M, N] unflattened")
      .Attr<int32_t>("in_num_col_dims", 1, "Input's dims [0, in_num_col_dims) become rows, the rest columns")
      .Range(1, DDim::kMaxRank - 1)
      .Attr("activation_type", "", "activation applied after the bias: '' (none), relu, relu6, sigmoid or tanh")
      .OneOf(EpilogueActNames())
      .Attr<bool>("padding_weights", false, "accepted for Fluid compatibility (W is never padded here)")
      .Attr<bool>("use_mkldnn", false, "accepted for Fluid compatibility; ignored")
      .Attr("fused_ops", std::vector<std::string>{}, "the ops a pass replaced by this one (shown by the profiler)")
      .SetInferShape(FcInferShape)
      .CPUKernel<float, double>(
          [](const ExecutionContext& ctx, auto tag) { FcKernel<typename decltype(tag)::type>(ctx); });
}

}  // namespace fl
