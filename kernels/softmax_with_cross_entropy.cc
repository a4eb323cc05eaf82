// softmax_with_cross_entropy: Softmax = softmax(Logits) along axis; Loss = cross entropy of Softmax with
// Label, computed from log-sum-exp so it stays finite for large logits.
#include "helpers/loss.h"
#include "helpers/reduce.h"

namespace fl {

namespace {

int ClassAxis(const InferShapeContext& ctx) { return NormalizeAxis(ctx, "Logits", ctx.Attr<int32_t>("axis")); }

}  // namespace

FL_REGISTER_OP(softmax_with_cross_entropy, op) {
  op.Doc("Softmax = softmax(Logits); Loss = -log(Softmax[Label]) (hard) or -sum(Label * log(Softmax)) (soft).")
      .Input("Logits", "unnormalised scores, classes on `axis`")
      .Input("Label", "int64 class ids (Logits' shape with 1 on axis), or soft labels of Logits' shape")
      .Output("Softmax", "softmax of Logits, same shape")
      .Output("Loss", "the loss: Logits' shape with 1 on axis")
      .NonDifferentiable({"Label"})
      .Attr<bool>("soft_label", false, "Label holds a distribution instead of a class id")
      .Attr<int32_t>("ignore_index", -100, "hard label value whose loss (and gradient) is 0")
      .Attr<bool>("numeric_stable_mode", true, "accepted for Fluid compatibility; the CPU kernel is always stable")
      .Attr<int32_t>("axis", -1, "the class axis; negative counts from the end")
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim loss = CheckLabelShape(ctx, "Logits", ClassAxis(ctx), ctx.Attr<bool>("soft_label"));
        ctx.SetOutput("Softmax", ctx.InputDim("Logits"), ctx.InputDType("Logits"));
        ctx.SetOutput("Loss", loss, ctx.InputDType("Logits"));
        ctx.ShareLoD("Logits", "Softmax");
        ctx.ShareLoD("Logits", "Loss");
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& logits = ctx.Input("Logits");
        const AxisView v = ViewAroundAxis(logits.dims(), ctx.Attr<int32_t>("axis"));
        const T* x = logits.data<T>();
        T* sm = ctx.Alloc<T>("Softmax");
        T* loss = ctx.Alloc<T>("Loss");
        const int64_t block = v.axis * v.inner;
        if (ctx.Attr<bool>("soft_label")) {
          // loss = sum_c label_c * (lse - x_c) = lse * sum(label) - sum(label * x)
          const T* label = ctx.Input("Label").data<T>();
          std::vector<T> lsum(v.inner);
          SoftmaxForward(x, sm, v, [&](int64_t o, const T* mx, const T* sum) {
            const T* xb = x + o * block;
            const T* lb = label + o * block;
            T* out = loss + o * v.inner;
            ReduceRuns<SumReducer, T>(1, v.axis, v.inner, [xb, lb](int64_t k) { return lb[k] * xb[k]; }, out);
            ReduceRuns<SumReducer, T>(1, v.axis, v.inner, [lb](int64_t k) { return lb[k]; }, lsum.data());
            for (int64_t i = 0; i < v.inner; ++i) out[i] = (mx[i] + std::log(sum[i])) * lsum[i] - out[i];
          });
          return;
        }
        const int64_t* label = ctx.Input("Label").data<int64_t>();
        const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
        SoftmaxForward(x, sm, v, [&](int64_t o, const T* mx, const T* sum) {
          for (int64_t i = 0; i < v.inner; ++i) {
            const int64_t p = o * v.inner + i;
            const int64_t l = label[p];
            loss[p] = LabelIgnored(ctx, "Logits", l, p, v.axis, ignore)
                          ? T(0)
                          : std::log(sum[i]) - (x[o * block + l * v.inner + i] - mx[i]);
          }
        });
      });
  // The gradient is (Softmax - onehot(Label)) * Loss@GRAD: Logits and Loss are not needed.
  op.GradOp({"Label", "Softmax", "Loss@GRAD"})
      .Doc("Logits@GRAD = (Softmax - Label as one-hot or distribution) * Loss@GRAD.")
      .ShapeLike("Logits", "Softmax")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dx = ctx.OutputOrNull("Logits@GRAD");
        if (!dx) return;
        const Tensor& softmax = ctx.Input("Softmax");
        const AxisView v = ViewAroundAxis(softmax.dims(), ctx.Attr<int32_t>("axis"));
        const Tensor& dloss_t = ctx.Input("Loss@GRAD");
        FL_ENFORCE(dloss_t.numel() == v.outer * v.inner, "softmax_with_cross_entropy_grad: Loss@GRAD ", dloss_t.dims(),
                   " does not match Softmax ", softmax.dims());
        const T* sm = softmax.data<T>();
        const T* dl = dloss_t.data<T>();
        T* g = dx->mutable_data<T>(ctx.place());
        const ReduceLayout l = AxisLayout(v);
        if (ctx.Attr<bool>("soft_label")) {
          const T* label = ctx.Input("Label").data<T>();
          ForEachReduced(l, [g, sm, dl, label](int64_t i, int64_t p) { g[i] = (sm[i] - label[i]) * dl[p]; });
          return;
        }
        ForEachReduced(l, [g, sm, dl](int64_t i, int64_t p) { g[i] = sm[i] * dl[p]; });
        const int64_t* label = ctx.Input("Label").data<int64_t>();
        const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
        for (int64_t o = 0; o < v.outer; ++o)
          for (int64_t i = 0; i < v.inner; ++i) {
            const int64_t p = o * v.inner + i;
            T* col = g + o * v.axis * v.inner + i;
            if (LabelIgnored(ctx, "Softmax", label[p], p, v.axis, ignore)) {
              for (int64_t c = 0; c < v.axis; ++c) col[c * v.inner] = T(0);
            } else {
              col[label[p] * v.inner] -= dl[p];
            }
          }
      });
}

}  // namespace fl
