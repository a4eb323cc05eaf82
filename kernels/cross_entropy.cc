// The cross-entropy losses and what they share: the label rule (Label matches the scores except on the
// class axis, where hard labels have size 1) and the run-time range check of hard labels.
//   cross_entropy: Y = -log(X[label]) per row for hard labels, -sum(Label * log(X)) for soft labels; X holds
//     probabilities over the last axis.
//   softmax_with_cross_entropy: Softmax = softmax(Logits) along axis; Loss = cross entropy of Softmax with
//     Label, computed from log-sum-exp so it stays finite for large logits.
#include "helpers/reduce.h"

namespace fl {

namespace {

// Checks Label against the class-scores input `x_slot` for classes on `axis` (already normalised) and
// returns the loss shape: X's dims with the class axis set to 1. With `may_drop_class_axis` (cross_entropy, as in
// Fluid 1.8), hard labels may also be X's dims without the last (class) axis, e.g. [batch, time] ids for
// [batch, time, classes] scores; the loss then takes the labels' shape.
DDim CheckLabelShape(const InferShapeContext& ctx, const char* x_slot, int axis, bool soft_label,
                     bool may_drop_class_axis = false) {
  const DDim x = ctx.InputDim(x_slot);
  const DDim label = ctx.InputDim("Label");
  if (may_drop_class_axis && !soft_label && axis == x.size() - 1 && label.size() == x.size() - 1) {
    for (int i = 0; i < label.size(); ++i)
      FL_ENFORCE(x[i] < 0 || label[i] < 0 || label[i] == x[i], ctx.Type(), ": ", ctx.Describe("Label"),
                 " does not match ", ctx.Describe(x_slot), " at dim ", i, ": expected ", x[i],
                 " (hard labels without the class axis have X's other dims)");
    if (ctx.IsRuntime())
      FL_ENFORCE(ctx.InputDType("Label") == DType::INT64, ctx.Type(), ": hard Label '", ctx.InputName("Label"),
                 "' must be int64, got ", DTypeName(ctx.InputDType("Label")));
    return label;
  }
  FL_ENFORCE(label.size() == x.size(), ctx.Type(), ": ", ctx.Describe("Label"), " must have the same rank as ",
             ctx.Describe(x_slot), may_drop_class_axis ? " (or, for hard labels, one dim less)" : "");
  for (int i = 0; i < x.size(); ++i) {
    const int64_t want = (i == axis && !soft_label) ? 1 : x[i];
    if (want < 0 || label[i] < 0) continue;  // unknown at compile time
    FL_ENFORCE(label[i] == want, ctx.Type(), ": ", ctx.Describe("Label"), " does not match ", ctx.Describe(x_slot),
               " at dim ", i, ": expected ", want,
               soft_label ? " (soft labels have X's shape)" : " (hard labels have size 1 on the class axis)");
  }
  const DType lt = ctx.InputDType("Label");
  if (soft_label)
    FL_ENFORCE(lt == ctx.InputDType(x_slot), ctx.Type(), ": soft Label '", ctx.InputName("Label"), "' is ",
               DTypeName(lt), " but ", x_slot, " is ", DTypeName(ctx.InputDType(x_slot)));
  else if (ctx.IsRuntime())  // not at compile time, as in Fluid: programs declare float labels and feed int64
    FL_ENFORCE(lt == DType::INT64, ctx.Type(), ": hard Label '", ctx.InputName("Label"), "' must be int64, got ",
               DTypeName(lt), " (set soft_label=True for probabilities)");
  DDim out = x;
  out[axis] = 1;
  return out;
}

[[noreturn]] void ThrowBadLabel(const ExecutionContext& ctx, const char* x_slot, int64_t value, int64_t pos,
                                int64_t classes) {
  FL_THROW(ctx.Type(), ": Label '", ctx.InputName("Label"), "' holds ", value, " at position ", pos,
           ", out of range [0, ", classes, ") for ", x_slot, " '", ctx.InputName(x_slot), "' ",
           ctx.Input(x_slot).dims(), " (ignore_index=", ctx.Attr<int32_t>("ignore_index"), ")");
}

// True if the label at `pos` is ignored; throws if it is neither ignored nor a valid class.
bool LabelIgnored(const ExecutionContext& ctx, const char* x_slot, int64_t value, int64_t pos, int64_t classes,
                  int64_t ignore_index) {
  if (value == ignore_index) return true;
  if (__builtin_expect(value < 0 || value >= classes, 0)) ThrowBadLabel(ctx, x_slot, value, pos, classes);
  return false;
}

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

int ClassAxis(const InferShapeContext& ctx) { return NormalizeAxis(ctx, "Logits", ctx.Attr<int32_t>("axis")); }

}  // namespace

FL_REGISTER_OP(cross_entropy, op) {
  op.Doc("Y = -log(X[Label]) (hard labels) or -sum(Label * log(X)) (soft labels) over the last axis.")
      .Input("X", "probabilities [.., D]")
      .Input("Label", "int64 class ids [.., 1] (or [..]), or soft labels [.., D] of X's dtype")
      .Output("Y", "the loss [.., 1] (or [..], the shape of ids given without the class axis)")
      .NonDifferentiable({"Label"})
      .Attr<bool>("soft_label", false, "Label holds a distribution per row instead of a class id")
      .Attr<int32_t>("ignore_index", -100, "hard label value whose loss (and gradient) is 0")
      .SetInferShape([](InferShapeContext& ctx) {
        const int rank = ctx.InputDim("X").size();
        FL_ENFORCE(rank >= 1, "cross_entropy: ", ctx.Describe("X"), " must have at least one dim");
        ctx.SetOutput("Y", CheckLabelShape(ctx, "X", rank - 1, ctx.Attr<bool>("soft_label"), true),
                      ctx.InputDType("X"));
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
      .Axis()
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
          SoftmaxForward(x, sm, v, [&](int64_t o, const T* mx, const T* sum) {  // blocks run in parallel
            const T* xb = x + o * block;
            const T* lb = label + o * block;
            T* out = loss + o * v.inner;
            ReduceRuns<SumReducer, T>(1, v.axis, v.inner, [xb, lb](int64_t k) { return lb[k] * xb[k]; }, out);
            for (int64_t i = 0; i < v.inner; ++i) {
              T lsum = T(0);
              for (int64_t c = 0; c < v.axis; ++c) lsum += lb[c * v.inner + i];
              out[i] = (mx[i] + std::log(sum[i])) * lsum - out[i];
            }
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
        const int64_t* label = ctx.Input("Label").data<int64_t>();
        const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
        const int64_t block = v.axis * v.inner;
        // Blocks (rows, for the last axis) are independent: split over the pool.
        ParallelFor(v.outer, std::max<int64_t>(1, kMinParallelElements / std::max<int64_t>(1, block)),
                    [&](int64_t o0, int64_t o1) {
                      for (int64_t o = o0; o < o1; ++o) {
                        const T* sb = sm + o * block;
                        T* gb = g + o * block;
                        const T* db = dl + o * v.inner;
                        if (v.inner == 1) {
                          for (int64_t c = 0; c < v.axis; ++c) gb[c] = sb[c] * db[0];
                        } else {
                          for (int64_t c = 0; c < v.axis; ++c)
                            for (int64_t i = 0; i < v.inner; ++i) gb[c * v.inner + i] = sb[c * v.inner + i] * db[i];
                        }
                        for (int64_t i = 0; i < v.inner; ++i) {
                          const int64_t p = o * v.inner + i;
                          if (LabelIgnored(ctx, "Softmax", label[p], p, v.axis, ignore)) {
                            for (int64_t c = 0; c < v.axis; ++c) gb[c * v.inner + i] = T(0);
                          } else {
                            gb[label[p] * v.inner + i] -= db[i];
                          }
                        }
                      }
                    });
      });
}

}  // namespace fl
