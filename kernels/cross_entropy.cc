// cross_entropy: Y = -log(X[label]) per row for hard labels, -sum(Label * log(X)) for soft labels.
// X holds probabilities over the last axis.
#include "helpers/loss.h"
#include "helpers/reduce.h"

namespace fl {

namespace {

struct CrossEntropyArgs {
  int64_t rows, classes, ignore_index;
  bool soft;
};

CrossEntropyArgs Args(const ExecutionContext& ctx) {
  const DDim& x = ctx.Input("X").dims();
  const int64_t classes = x.size() ? x[x.size() - 1] : 1;
  return CrossEntropyArgs{classes ? x.numel() / classes : 0, classes, ctx.Attr<int32_t>("ignore_index"),
                          ctx.Attr<bool>("soft_label")};
}

}  // namespace

FL_REGISTER_OP(cross_entropy, op) {
  op.Doc("Y = -log(X[Label]) (hard labels) or -sum(Label * log(X)) (soft labels) over the last axis.")
      .Input("X", "probabilities [.., D]")
      .Input("Label", "int64 class ids [.., 1], or soft labels [.., D] of X's dtype")
      .Output("Y", "the loss [.., 1]")
      .NonDifferentiable({"Label"})
      .Attr<bool>("soft_label", false, "Label holds a distribution per row instead of a class id")
      .Attr<int32_t>("ignore_index", -100, "hard label value whose loss (and gradient) is 0")
      .SetInferShape([](InferShapeContext& ctx) {
        const int rank = ctx.InputDim("X").size();
        FL_ENFORCE(rank >= 1, "cross_entropy: ", ctx.Describe("X"), " must have at least one dim");
        ctx.SetOutput("Y", CheckLabelShape(ctx, "X", rank - 1, ctx.Attr<bool>("soft_label")), ctx.InputDType("X"));
        ctx.ShareLoD("X", "Y");
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const CrossEntropyArgs a = Args(ctx);
        const T* x = ctx.Input("X").data<T>();
        T* y = ctx.Alloc<T>("Y");
        if (a.soft) {
          const T* label = ctx.Input("Label").data<T>();
          ReduceRuns<SumReducer, T>(
              a.rows, a.classes, 1, [x, label](int64_t k) { return label[k] * TolerableLog(x[k]); }, y);
          for (int64_t n = 0; n < a.rows; ++n) y[n] = -y[n];
          return;
        }
        const int64_t* label = ctx.Input("Label").data<int64_t>();
        for (int64_t n = 0; n < a.rows; ++n) {
          const int64_t l = label[n];
          y[n] = LabelIgnored(ctx, "X", l, n, a.classes, a.ignore_index) ? T(0) : -TolerableLog(x[n * a.classes + l]);
        }
      });
  op.GradOp({"X", "Label", "Y@GRAD"})
      .Doc("X@GRAD = -Y@GRAD / X at the label (hard) or -Y@GRAD * Label / X (soft).")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        Tensor* dx = ctx.OutputOrNull("X@GRAD");
        if (!dx) return;
        const CrossEntropyArgs a = Args(ctx);
        const T* x = ctx.Input("X").data<T>();
        const Tensor& dy_t = ctx.Input("Y@GRAD");
        FL_ENFORCE(dy_t.numel() == a.rows, "cross_entropy_grad: Y@GRAD ", dy_t.dims(),
                   " must hold one value per row of X ", ctx.Input("X").dims());
        const T* dy = dy_t.data<T>();
        T* g = dx->mutable_data<T>(ctx.place());
        const ReduceLayout rows = AxisLayout(AxisView{a.rows, a.classes, 1});
        if (a.soft) {
          const T* label = ctx.Input("Label").data<T>();
          ForEachReduced(rows, [g, x, dy, label](int64_t i, int64_t n) { g[i] = -dy[n] * label[i] / x[i]; });
          return;
        }
        std::fill(g, g + a.rows * a.classes, T(0));
        const int64_t* label = ctx.Input("Label").data<int64_t>();
        for (int64_t n = 0; n < a.rows; ++n) {
          const int64_t l = label[n];
          if (!LabelIgnored(ctx, "X", l, n, a.classes, a.ignore_index))
            g[n * a.classes + l] = -dy[n] / x[n * a.classes + l];
        }
      });
}

}  // namespace fl
