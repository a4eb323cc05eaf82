// sigmoid_cross_entropy_with_logits: elementwise binary cross entropy of sigmoid(X) against Label,
//   Out = max(X, 0) - X * Label + log(1 + exp(-|X|))   (finite for any logit),
// 0 where Label == ignore_index; with `normalize` every element is divided by the number of labels that are
// not ignore_index (at least 1e-5, as in Fluid). X@GRAD = (sigmoid(X) - Label) * Out@GRAD, same mask and scale.
#include <algorithm>
#include <cmath>

#include "op_context.h"
#include "thread_pool.h"

namespace fl {

namespace {

// 1 / (number of labels that are not ignore_index, at least 1e-5) when normalizing, else 1.
template <typename T>
T NormScale(const ExecutionContext& ctx, const T* label, int64_t n) {
  if (!ctx.Attr<bool>("normalize")) return T(1);
  const T ignore = static_cast<T>(ctx.Attr<int32_t>("ignore_index"));
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) kept += label[i] != ignore;
  return T(1) / std::max(static_cast<T>(kept), static_cast<T>(1e-5));
}

constexpr int64_t kGrain = 1 << 14;

}  // namespace

FL_REGISTER_OP(sigmoid_cross_entropy_with_logits, op) {
  op.Doc(
        "Out = max(X, 0) - X * Label + log(1 + exp(-|X|)) elementwise (0 where Label == ignore_index), divided "
        "by the count of labels not ignored when normalize is set.")
      .Input("X", "logits [N, D] (any shape)")
      .Input("Label", "targets in [0, 1], X's shape and dtype")
      .Output("Out", "the elementwise loss, X's shape")
      .NonDifferentiable({"Label"})
      .Attr<bool>("normalize", false, "divide by the number of labels that are not ignore_index")
      .Attr<int32_t>("ignore_index", -100, "label value whose loss (and gradient) is 0")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X"), label = ctx.InputDim("Label");
        FL_ENFORCE(x.size() == label.size(), "sigmoid_cross_entropy_with_logits: ", ctx.Describe("Label"),
                   " must have the shape of ", ctx.Describe("X"));
        for (int i = 0; i < x.size(); ++i)
          FL_ENFORCE(x[i] < 0 || label[i] < 0 || x[i] == label[i],
                     "sigmoid_cross_entropy_with_logits: ", ctx.Describe("Label"), " must have the shape of ",
                     ctx.Describe("X"), " (dim ", i, ")");
        ctx.EnforceSameDType("X", "Label");
        ctx.SetOutput("Out", x, ctx.InputDType("X"));
        ctx.ShareLoD("X", "Out");
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const T* x = xt.data<T>();
        const T* label = ctx.Input("Label").data<T>();
        const int64_t n = xt.numel();
        T* out = ctx.Alloc<T>("Out");
        const T ignore = static_cast<T>(ctx.Attr<int32_t>("ignore_index"));
        const T scale = NormScale(ctx, label, n);
        ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            const T v = x[i];
            out[i] = label[i] == ignore
                         ? T(0)
                         : (std::max(v, T(0)) - v * label[i] + std::log1p(std::exp(-std::abs(v)))) * scale;
          }
        });
      });
  op.GradOp({"X", "Label", "Out@GRAD"})
      .Doc("X@GRAD = (sigmoid(X) - Label) * Out@GRAD, 0 where Label == ignore_index, scaled as the forward.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dxt = ctx.OutputOrNull("X@GRAD");
        if (!dxt) return;
        const Tensor& xt = ctx.Input("X");
        const Tensor& dout = ctx.Input("Out@GRAD");
        FL_ENFORCE(dout.numel() == xt.numel(), "sigmoid_cross_entropy_with_logits_grad: Out@GRAD ", dout.dims(),
                   " must have the shape of X ", xt.dims());
        const T* x = xt.data<T>();
        const T* label = ctx.Input("Label").data<T>();
        const T* dy = dout.data<T>();
        const int64_t n = xt.numel();
        dxt->Resize(xt.dims());
        T* dx = dxt->mutable_data<T>(ctx.place());
        const T ignore = static_cast<T>(ctx.Attr<int32_t>("ignore_index"));
        const T scale = NormScale(ctx, label, n);
        ParallelFor(n, kGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i)
            dx[i] = label[i] == ignore ? T(0) : (T(1) / (T(1) + std::exp(-x[i])) - label[i]) * dy[i] * scale;
        });
      });
}

}  // namespace fl
