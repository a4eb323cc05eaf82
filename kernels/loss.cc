// The regression and ranking losses (Fluid's layers/loss.py and nn.py), each elementwise or per row:
//   huber_loss:       r = Y - X; Out = 0.5 r^2 if |r| <= delta else delta (|r| - 0.5 delta); Residual = r
//   smooth_l1_loss:   d = (X - Y) * InsideWeight; Out[n] = sum_row OutsideWeight * (0.5 (sigma d)^2 if
//                     |d| < 1 / sigma^2 else |d| - 0.5 / sigma^2); Diff = d
//   log_loss:         Loss = -Labels log(Predicted + eps) - (1 - Labels) log(1 - Predicted + eps)
//   kldiv_loss:       Target (log Target - X) where Target > 0 (0 elsewhere), reduced by `reduction`
//   margin_rank_loss: Out = max(0, -Label (X1 - X2) + margin); Activated = Out > 0
//   rank_loss:        Out = log(1 + exp(Left - Right)) - Label (Left - Right)
//   bpr_loss:         Y[n] = -sum_{j != Label[n]} log sigmoid(X[n, Label[n]] - X[n, j]) / (C - 1)
//   label_smooth:     Out = (1 - epsilon) X + epsilon PriorDist (or epsilon / K without PriorDist)
#include <algorithm>
#include <cmath>
#include <string>

#include "grad_op_maker.h"
#include "helpers/elementwise_loop.h"
#include "helpers/reduce.h"
#include "helpers/same_dims.h"
#include "op_context.h"

namespace fl {

namespace {

// log(1 + exp(x)) without overflow.
template <typename T>
inline T SoftPlus(T x) {
  return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

template <typename T>
inline T Sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// The gradient slot `slot`@GRAD of a grad op, or null when nobody needs it; sized like `like`.
template <typename T>
T* GradOut(const ExecutionContext& ctx, const std::string& slot, const Tensor& like) {
  Tensor* g = ctx.OutputOrNull((slot + kGradSuffix).c_str());
  if (!g) return nullptr;
  g->Resize(like.dims());
  return g->mutable_data<T>(ctx.place());
}

// Throws unless the gradient input `grad` holds as many values as `like`.
void EnforceGradNumel(const ExecutionContext& ctx, const char* grad, int64_t want, const char* what) {
  const Tensor& g = ctx.Input(grad);
  FL_ENFORCE(g.numel() == want, ctx.Type(), ": ", grad, " '", ctx.InputName(grad), "' ", g.dims(), " must hold ", want,
             " values (", what, ")");
}

}  // namespace

FL_REGISTER_OP(huber_loss, op) {
  op.Doc("Residual = Y - X; Out = 0.5 * Residual^2 where |Residual| <= delta, else delta * (|Residual| - 0.5 * delta).")
      .Input("X", "predictions, [N, 1] (any shape equal to Y's)")
      .Input("Y", "targets, X's shape")
      .Output("Residual", "Y - X, kept for the gradient")
      .Output("Out", "the loss, X's shape")
      .RequiredAttr<float>("delta", 1.0f, "where the loss turns from quadratic to linear")
      .Min(0)
      .SetInferShape([](InferShapeContext& ctx) {
        EnforceSameDims(ctx, "X", "Y");
        ctx.SetOutput("Residual", ctx.InputDim("X"), ctx.InputDType("X"));
        ctx.SetOutput("Out", ctx.InputDim("X"), ctx.InputDType("X"));
        ctx.ShareLoD("X", "Out");
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T delta = ctx.Attr<float>("delta");
        const Tensor& xt = ctx.Input("X");
        const T* x = xt.data<T>();
        const T* y = ctx.Input("Y").data<T>();
        T* res = ctx.Alloc<T>("Residual");
        T* out = ctx.Alloc<T>("Out");
        for (int64_t i = 0; i < xt.numel(); ++i) {
          const T r = y[i] - x[i], a = std::abs(r);
          res[i] = r;
          out[i] = a <= delta ? T(0.5) * r * r : delta * (a - T(0.5) * delta);
        }
      });
  op.GradOp({"Residual", "Out@GRAD"})
      .ShapeLike("X", "Residual")
      .ShapeLike("Y", "Residual")
      .Doc("Y@GRAD = Out@GRAD * clip(Residual, -delta, delta); X@GRAD = -Y@GRAD.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& r = ctx.Input("Residual");
        EnforceGradNumel(ctx, "Out@GRAD", r.numel(), "one per Residual element");
        const T delta = ctx.Attr<float>("delta");
        const T* rp = r.data<T>();
        const T* dout = ctx.Input("Out@GRAD").data<T>();
        T* dx = GradOut<T>(ctx, "X", r);
        T* dy = GradOut<T>(ctx, "Y", r);
        for (int64_t i = 0; i < r.numel(); ++i) {
          const T g = dout[i] * std::clamp(rp[i], -delta, delta);
          if (dx) dx[i] = -g;
          if (dy) dy[i] = g;
        }
      });
}

FL_REGISTER_OP(smooth_l1_loss, op) {
  op.Doc("Diff = (X - Y) * InsideWeight; Out[n] = sum over row n of OutsideWeight * smooth_l1(Diff, sigma).")
      .Input("X", "predictions [N, ...] (rank >= 2)")
      .Input("Y", "targets, X's shape")
      .DispensableInput("InsideWeight", "weights applied to X - Y, X's shape (given with OutsideWeight)")
      .DispensableInput("OutsideWeight", "weights applied to each element's loss, X's shape (given with InsideWeight)")
      .Output("Diff", "(X - Y) * InsideWeight, kept for the gradient")
      .Output("Out", "the loss per row [N, 1]")
      .NonDifferentiable({"InsideWeight", "OutsideWeight"})
      .Attr<float>("sigma", 1.0f, "the loss is quadratic where |Diff| < 1 / sigma^2")
      .Constrain("> 0", [](const Attribute& a) { return std::get<float>(a) > 0 ? "" : "a float > 0"; })
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        FL_ENFORCE(x.size() >= 2, "smooth_l1_loss: ", ctx.Describe("X"), " must have rank >= 2 ([N, ...])");
        EnforceSameDims(ctx, "X", "Y");
        const bool in_w = ctx.HasInput("InsideWeight"), out_w = ctx.HasInput("OutsideWeight");
        FL_ENFORCE(in_w == out_w, "smooth_l1_loss: InsideWeight and OutsideWeight must be given together (only ",
                   in_w ? "InsideWeight" : "OutsideWeight", " is)");
        if (in_w) {
          EnforceSameDims(ctx, "X", "InsideWeight");
          EnforceSameDims(ctx, "X", "OutsideWeight");
        }
        ctx.SetOutput("Diff", x, ctx.InputDType("X"));
        ctx.SetOutput("Out", DDim{x[0], 1}, ctx.InputDType("X"));
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const T sigma2 = T(ctx.Attr<float>("sigma")) * T(ctx.Attr<float>("sigma"));
        const T* x = xt.data<T>();
        const T* y = ctx.Input("Y").data<T>();
        const bool weighted = ctx.HasInput("InsideWeight");
        const T* iw = weighted ? ctx.Input("InsideWeight").data<T>() : nullptr;
        const T* ow = weighted ? ctx.Input("OutsideWeight").data<T>() : nullptr;
        T* diff = ctx.Alloc<T>("Diff");
        T* out = ctx.Alloc<T>("Out");
        const int64_t rows = xt.dims()[0], cols = rows ? xt.numel() / rows : 0;
        for (int64_t n = 0; n < rows; ++n) {
          T sum = 0;
          for (int64_t c = 0; c < cols; ++c) {
            const int64_t i = n * cols + c;
            const T d = weighted ? (x[i] - y[i]) * iw[i] : x[i] - y[i];
            diff[i] = d;
            const T a = std::abs(d);
            const T e = a < T(1) / sigma2 ? T(0.5) * d * d * sigma2 : a - T(0.5) / sigma2;
            sum += weighted ? e * ow[i] : e;
          }
          out[n] = sum;
        }
      });
  op.GradOp({"InsideWeight", "OutsideWeight", "Diff", "Out@GRAD"})
      .Optional({"InsideWeight", "OutsideWeight"})
      .ShapeLike("X", "Diff")
      .ShapeLike("Y", "Diff")
      .Doc("X@GRAD = Out@GRAD * InsideWeight * OutsideWeight * smooth_l1'(Diff); Y@GRAD = -X@GRAD.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& dt = ctx.Input("Diff");
        const int64_t rows = dt.dims()[0], cols = rows ? dt.numel() / rows : 0;
        EnforceGradNumel(ctx, "Out@GRAD", rows, "one per row of Diff");
        const T sigma2 = T(ctx.Attr<float>("sigma")) * T(ctx.Attr<float>("sigma"));
        const bool weighted = ctx.InputOrNull("InsideWeight") && ctx.InputOrNull("OutsideWeight");
        const T* iw = weighted ? ctx.Input("InsideWeight").data<T>() : nullptr;
        const T* ow = weighted ? ctx.Input("OutsideWeight").data<T>() : nullptr;
        const T* d = dt.data<T>();
        const T* dout = ctx.Input("Out@GRAD").data<T>();
        T* dx = GradOut<T>(ctx, "X", dt);
        T* dy = GradOut<T>(ctx, "Y", dt);
        for (int64_t n = 0; n < rows; ++n)
          for (int64_t c = 0; c < cols; ++c) {
            const int64_t i = n * cols + c;
            const T v = d[i];
            T g = std::abs(v) < T(1) / sigma2 ? sigma2 * v : T((v > 0) - (v < 0));
            g *= dout[n];
            if (weighted) g *= iw[i] * ow[i];
            if (dx) dx[i] = g;
            if (dy) dy[i] = -g;
          }
      });
}

FL_REGISTER_OP(log_loss, op) {
  op.Doc("Loss = -Labels * log(Predicted + epsilon) - (1 - Labels) * log(1 - Predicted + epsilon).")
      .Input("Predicted", "predicted probabilities [N, 1]")
      .Input("Labels", "targets in [0, 1], [N, 1]")
      .Output("Loss", "the loss [N, 1]")
      .NonDifferentiable({"Labels"})
      .Attr<float>("epsilon", 1e-4f, "added inside the logs")
      .Min(0)
      .SetInferShape([](InferShapeContext& ctx) {
        EnforceRank(ctx, "Predicted", 2, 1, " ([N, 1])");
        EnforceSameDims(ctx, "Predicted", "Labels");
        ctx.SetOutput("Loss", ctx.InputDim("Predicted"), ctx.InputDType("Predicted"));
        ctx.ShareLoD("Predicted", "Loss");
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T eps = ctx.Attr<float>("epsilon");
        BinaryMapSameShape<T>(ctx, "Predicted", "Labels", "Loss", [eps](T p, T l) {
          return -l * std::log(p + eps) - (T(1) - l) * std::log(T(1) - p + eps);
        });
      });
  op.GradOp({"Predicted", "Labels", "Loss@GRAD"})
      .Doc("Predicted@GRAD = Loss@GRAD * (-Labels / (Predicted + eps) + (1 - Labels) / (1 - Predicted + eps)).")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        if (!ctx.OutputOrNull("Predicted@GRAD")) return;
        const T eps = ctx.Attr<float>("epsilon");
        TernaryMapSameShape<T>(ctx, "Predicted", "Labels", "Loss@GRAD", "Predicted@GRAD",
                               [eps](T p, T l, T g) { return g * (-l / (p + eps) + (T(1) - l) / (T(1) - p + eps)); });
      });
}

FL_REGISTER_OP(kldiv_loss, op) {
  op.Doc("Loss = Target * (log(Target) - X) where Target > 0 (0 elsewhere), reduced by `reduction`.")
      .Input("X", "log-probabilities [N, ...]")
      .Input("Target", "probabilities, X's shape")
      .Output("Loss", "X's shape for reduction 'none', else [1]")
      .NonDifferentiable({"Target"})
      .Attr("reduction", "mean", "none (elementwise), batchmean (sum / N), mean (sum / numel) or sum")
      .OneOf({"none", "batchmean", "mean", "sum"})
      .SetInferShape([](InferShapeContext& ctx) {
        FL_ENFORCE(ctx.InputDim("X").size() >= 1, "kldiv_loss: ", ctx.Describe("X"), " must have rank >= 1");
        EnforceSameDims(ctx, "X", "Target");
        const bool none = ctx.Attr<std::string>("reduction") == "none";
        ctx.SetOutput("Loss", none ? ctx.InputDim("X") : DDim{1}, ctx.InputDType("X"));
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const std::string& red = ctx.Attr<std::string>("reduction");
        const T* x = xt.data<T>();
        const T* t = ctx.Input("Target").data<T>();
        T* loss = ctx.Alloc<T>("Loss");
        auto term = [x, t](int64_t i) { return t[i] > T(0) ? t[i] * (std::log(t[i]) - x[i]) : T(0); };
        const int64_t n = xt.numel();
        if (red == "none") {
          for (int64_t i = 0; i < n; ++i) loss[i] = term(i);
          return;
        }
        T sum = ReduceContiguous<SumReducer, T>(0, n, term);
        if (red == "mean") sum = n ? sum / T(n) : T(0);
        if (red == "batchmean") sum = xt.dims()[0] ? sum / T(xt.dims()[0]) : T(0);
        loss[0] = sum;
      });
  op.GradOp({"Target", "Loss@GRAD"})
      .ShapeLike("X", "Target")
      .Doc("X@GRAD = -Target * Loss@GRAD where Target > 0 (0 elsewhere), divided as the reduction divides.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& tt = ctx.Input("Target");
        const std::string& red = ctx.Attr<std::string>("reduction");
        const int64_t n = tt.numel();
        EnforceGradNumel(ctx, "Loss@GRAD", red == "none" ? n : 1, "as many as Loss");
        T* dx = GradOut<T>(ctx, "X", tt);
        if (!dx) return;
        const T* t = tt.data<T>();
        const T* g = ctx.Input("Loss@GRAD").data<T>();
        T scale = 1;
        if (red == "mean" && n) scale = T(1) / T(n);
        if (red == "batchmean" && tt.dims()[0]) scale = T(1) / T(tt.dims()[0]);
        const bool each = red == "none";
        for (int64_t i = 0; i < n; ++i) dx[i] = t[i] > T(0) ? -t[i] * g[each ? i : 0] * scale : T(0);
      });
}

FL_REGISTER_OP(margin_rank_loss, op) {
  op.Doc("Out = max(0, -Label * (X1 - X2) + margin); Activated = 1 where Out > 0, else 0.")
      .Input("X1", "scores of the first items [N, 1]")
      .Input("X2", "scores of the second items [N, 1]")
      .Input("Label", "1 where X1 should rank higher, -1 where X2 should, [N, 1]")
      .Output("Activated", "1 where the hinge is active, kept for the gradient")
      .Output("Out", "the loss [N, 1]")
      .NonDifferentiable({"Label"})
      .Attr<float>("margin", 0.0f, "the margin")
      .SetInferShape([](InferShapeContext& ctx) {
        EnforceSameDims(ctx, "X1", "X2");
        EnforceSameDims(ctx, "X1", "Label");
        ctx.SetOutput("Activated", ctx.InputDim("X1"), ctx.InputDType("X1"));
        ctx.SetOutput("Out", ctx.InputDim("X1"), ctx.InputDType("X1"));  // no LoD: Fluid's has none
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T margin = ctx.Attr<float>("margin");
        const Tensor& x1t = ctx.Input("X1");
        const T* x1 = x1t.data<T>();
        const T* x2 = ctx.Input("X2").data<T>();
        const T* l = ctx.Input("Label").data<T>();
        T* out = ctx.Alloc<T>("Out");
        T* act = ctx.Alloc<T>("Activated");
        for (int64_t i = 0; i < x1t.numel(); ++i) {
          out[i] = std::max(T(0), -l[i] * (x1[i] - x2[i]) + margin);
          act[i] = out[i] > T(0) ? T(1) : T(0);
        }
      });
  op.GradOp({"Label", "Activated", "Out@GRAD"})
      .ShapeLike("X1", "Activated")
      .ShapeLike("X2", "Activated")
      .Doc("X1@GRAD = -Out@GRAD * Activated * Label; X2@GRAD = -X1@GRAD.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& at = ctx.Input("Activated");
        EnforceGradNumel(ctx, "Out@GRAD", at.numel(), "one per element of Activated");
        EnforceGradNumel(ctx, "Label", at.numel(), "one per element of Activated");
        const T* a = at.data<T>();
        const T* l = ctx.Input("Label").data<T>();
        const T* g = ctx.Input("Out@GRAD").data<T>();
        T* d1 = GradOut<T>(ctx, "X1", at);
        T* d2 = GradOut<T>(ctx, "X2", at);
        for (int64_t i = 0; i < at.numel(); ++i) {
          const T v = -g[i] * a[i] * l[i];
          if (d1) d1[i] = v;
          if (d2) d2[i] = -v;
        }
      });
}

FL_REGISTER_OP(rank_loss, op) {
  op.Doc("Out = log(1 + exp(Left - Right)) - Label * (Left - Right) (RankNet).")
      .Input("Label", "1 where Left should rank higher, 0 where Right should (or a probability), [N, 1]")
      .Input("Left", "scores of the left items [N, 1]")
      .Input("Right", "scores of the right items [N, 1]")
      .Output("Out", "the loss [N, 1]")
      .NonDifferentiable({"Label"})
      .SetInferShape([](InferShapeContext& ctx) {
        EnforceSameDims(ctx, "Left", "Right");
        EnforceSameDims(ctx, "Left", "Label");
        ctx.SetOutput("Out", ctx.InputDim("Left"), ctx.InputDType("Left"));  // no LoD: Fluid's has none
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        TernaryMapSameShape<T>(ctx, "Left", "Right", "Label", "Out", [](T a, T b, T l) {
          const T o = a - b;
          return SoftPlus(o) - l * o;
        });
      });
  op.GradOp({"Label", "Left", "Right", "Out@GRAD"})
      .Doc("Left@GRAD = Out@GRAD * (sigmoid(Left - Right) - Label); Right@GRAD = -Left@GRAD.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& lt = ctx.Input("Left");
        EnforceGradNumel(ctx, "Out@GRAD", lt.numel(), "one per element of Left");
        const T* a = lt.data<T>();
        const T* b = ctx.Input("Right").data<T>();
        const T* l = ctx.Input("Label").data<T>();
        const T* g = ctx.Input("Out@GRAD").data<T>();
        T* dl = GradOut<T>(ctx, "Left", lt);
        T* dr = GradOut<T>(ctx, "Right", lt);
        for (int64_t i = 0; i < lt.numel(); ++i) {
          const T v = g[i] * (Sigmoid(a[i] - b[i]) - l[i]);
          if (dl) dl[i] = v;
          if (dr) dr[i] = -v;
        }
      });
}

namespace {

// bpr_loss's Label at row n, checked against the class count.
int64_t BprLabel(const ExecutionContext& ctx, const int64_t* label, int64_t n, int64_t classes) {
  const int64_t l = label[n];
  FL_ENFORCE(l >= 0 && l < classes, "bpr_loss: Label '", ctx.InputName("Label"), "' holds ", l, " at row ", n,
             ", out of range [0, ", classes, ") for X '", ctx.InputName("X"), "' ", ctx.Input("X").dims());
  return l;
}

}  // namespace

FL_REGISTER_OP(bpr_loss, op) {
  op.Doc(
        "Y[n] = -sum over j != Label[n] of log(sigmoid(X[n, Label[n]] - X[n, j])) / (C - 1) (Bayesian "
        "personalized ranking).")
      .Input("X", "scores [N, C], C >= 2")
      .Input("Label", "int64 positive class per row [N, 1]")
      .Output("Y", "the loss [N, 1]")
      .NonDifferentiable({"Label"})
      .SetInferShape([](InferShapeContext& ctx) {
        EnforceRank(ctx, "X", 2);
        const DDim x = ctx.InputDim("X");
        FL_ENFORCE(x[1] < 0 || x[1] >= 2, "bpr_loss: ", ctx.Describe("X"), " must have at least 2 classes");
        EnforceRank(ctx, "Label", 2, 1, " ([N, 1])");
        const DDim l = ctx.InputDim("Label");
        FL_ENFORCE(x[0] < 0 || l[0] < 0 || x[0] == l[0], "bpr_loss: ", ctx.Describe("Label"), " and ",
                   ctx.Describe("X"), " must have the same number of rows");
        const DType lt = ctx.InputDType("Label");
        FL_ENFORCE(lt == DType::INT64 || lt == DType::UNDEFINED, "bpr_loss: ", ctx.Describe("Label"),
                   " must be int64, got ", DTypeName(lt));
        ctx.SetOutput("Y", DDim{x[0], 1}, ctx.InputDType("X"));
        ctx.ShareLoD("X", "Y");
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const int64_t rows = xt.dims()[0], c = xt.dims()[1];
        const T* x = xt.data<T>();
        const int64_t* label = ctx.Input("Label").data<int64_t>();
        T* y = ctx.Alloc<T>("Y");
        for (int64_t n = 0; n < rows; ++n) {
          const int64_t l = BprLabel(ctx, label, n, c);
          const T* row = x + n * c;
          T sum = 0;
          for (int64_t j = 0; j < c; ++j)
            if (j != l) sum += SoftPlus(row[j] - row[l]);  // -log sigmoid(a - b) = softplus(b - a)
          y[n] = sum / T(c - 1);
        }
      });
  op.GradOp({"X", "Label", "Y@GRAD"})
      .Doc(
          "X@GRAD[n, j] = Y@GRAD[n] * sigmoid(X[n, j] - X[n, l]) / (C - 1) for j != l; X@GRAD[n, l] = minus "
          "their sum.")
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const int64_t rows = xt.dims()[0], c = xt.dims()[1];
        EnforceGradNumel(ctx, "Y@GRAD", rows, "one per row of X");
        T* dx = GradOut<T>(ctx, "X", xt);
        if (!dx) return;
        const T* x = xt.data<T>();
        const int64_t* label = ctx.Input("Label").data<int64_t>();
        const T* g = ctx.Input("Y@GRAD").data<T>();
        for (int64_t n = 0; n < rows; ++n) {
          const int64_t l = BprLabel(ctx, label, n, c);
          const T* row = x + n * c;
          T* d = dx + n * c;
          T pos = 0;
          for (int64_t j = 0; j < c; ++j) {
            if (j == l) continue;
            d[j] = g[n] * Sigmoid(row[j] - row[l]) / T(c - 1);
            pos -= d[j];
          }
          d[l] = pos;
        }
      });
}

FL_REGISTER_OP(label_smooth, op) {
  op.Doc("Out = (1 - epsilon) * X + epsilon * PriorDist, or epsilon / K (K = X's last dim) without PriorDist.")
      .Input("X", "one-hot labels [..., K]")
      .DispensableInput("PriorDist", "the prior distribution [1, K]")
      .Output("Out", "the smoothed labels, X's shape")
      .NonDifferentiable({"PriorDist"})
      .Attr<float>("epsilon", 0.0f, "the smoothing weight, in [0, 1]")
      .Range(0, 1)
      .SetInferShape([](InferShapeContext& ctx) {
        const DDim x = ctx.InputDim("X");
        FL_ENFORCE(x.size() >= 1, "label_smooth: ", ctx.Describe("X"), " must have rank >= 1");
        if (ctx.HasInput("PriorDist")) {
          const DDim p = ctx.InputDim("PriorDist");
          const int64_t k = x[x.size() - 1];
          FL_ENFORCE(p.size() >= 1 && p.size() <= 2 && (p.size() == 1 || p[0] < 0 || p[0] == 1) &&
                         (k < 0 || p[p.size() - 1] < 0 || p[p.size() - 1] == k),
                     "label_smooth: ", ctx.Describe("PriorDist"), " must be [1, K] with K = the last dim of ",
                     ctx.Describe("X"));
          ctx.EnforceSameDType("X", "PriorDist");
        }
        SameShapeAsInput(ctx);
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const Tensor& xt = ctx.Input("X");
        const T eps = ctx.Attr<float>("epsilon");
        const int64_t k = xt.dims()[xt.rank() - 1];
        const T* x = xt.data<T>();
        T* out = ctx.Alloc<T>("Out");
        const T* prior = ctx.HasInput("PriorDist") ? ctx.Input("PriorDist").data<T>() : nullptr;
        const T uniform = k ? eps / T(k) : T(0);
        for (int64_t i = 0; i < xt.numel(); ++i) out[i] = (T(1) - eps) * x[i] + (prior ? eps * prior[i % k] : uniform);
      })
      .Grad([](GradOpMaker& g) {
        // Linear in X: X@GRAD = (1 - epsilon) * Out@GRAD, a scale op.
        OpDesc& op = g.NewOp("scale", false);
        op.SetInput("X", g.OutputGrad("Out"));
        op.SetOutput("Out", g.InputGrad("X"));
        op.SetAttr("scale", 1.0f - g.Attr<float>("epsilon"));
        op.SetAttr("bias", 0.0f);
        op.SetAttr("bias_after_scale", true);
      });
}

}  // namespace fl
