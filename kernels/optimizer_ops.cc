// The optimizer ops, each updating Param (and its accumulators) in place from Grad and a one-element
// LearningRate, as Fluid's optimizers append them:
//   sgd:      ParamOut = Param - LearningRate * Grad.
//   momentum: v = mu * v + g;  p -= lr * v   (Nesterov: p -= lr * (g + mu * v)).
//   adam:     m1 = b1 m1 + (1-b1) g;  m2 = b2 m2 + (1-b2) g^2;  lr_t = lr sqrt(1-b2^t)/(1-b1^t);
//             p -= lr_t m1 / (sqrt(m2) + eps).  Beta1Pow/Beta2Pow hold b^t; Python scales them after the update.
//   adagrad:  m += g^2;  p -= lr g / (sqrt(m) + eps).
// A SelectedRows Grad (sparse, from lookup_table is_sparse) is merged first (repeated rows summed); sgd and
// adagrad then touch only its rows, momentum and adam (lazy_mode off) every row as Fluid does (absent rows
// with a zero gradient), adam with lazy_mode only its rows.
#include <cmath>

#include "helpers/optimizer_update.h"
#include "helpers/selected_rows.h"
#include "op_context.h"
#include "thread_pool.h"

namespace fl {

namespace {

// How many rows ahead a sparse update prefetches the parameter and accumulator rows it will touch.
constexpr size_t kPrefetchRows = 8;

// Calls f(row, g) for every row of a [height, width] parameter, in order: g is the merged gradient row, or
// null where the sparse gradient has no such row (Fluid's sparse functors read it as zeros).
template <typename T, typename F>
void ForEveryRow(int64_t height, const MergedRows<T>& m, F&& f) {
  size_t k = 0;
  for (int64_t r = 0; r < height; ++r) {
    const T* g = nullptr;
    if (k < m.rows.size() && m.rows[k] == r) g = m.values.data() + (k++) * m.width;
    f(r, g);
  }
}

// The SelectedRows Grad of an optimizer op checked against Param and merged (Fluid's MergeAdd), or null when
// Grad is dense.
template <typename T>
const SelectedRows* SparseGrad(const ExecutionContext& ctx, MergedRows<T>* merged) {
  const SelectedRows* sr = ctx.InputRowsOrNull("Grad");
  if (!sr) return nullptr;
  CheckRowsFit(ctx, "Grad", *sr, ctx.Input("Param").dims(), Str("Param '", ctx.InputName("Param"), "'"));
  if (merged) MergeRows<T>(*sr, merged);
  return sr;
}

}  // namespace

FL_REGISTER_OP(sgd, op) {
  op.Doc("Stochastic gradient descent: ParamOut = Param - LearningRate * Grad (in place when ParamOut is Param).")
      .Input("Param", "parameter")
      .Input("LearningRate", "learning rate, one element")
      .Input("Grad", "gradient, Param's shape")
      .Output("ParamOut", "updated parameter (usually the Param variable itself)")
      .Inplace("ParamOut", "Param")
      .KernelDTypeFrom("Param")
      .SetInferShape([](InferShapeContext& ctx) { InferUpdateShapes(ctx, {"Grad"}, {{"ParamOut", "Param"}}); })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ReadFloatScalarInput<T>(ctx, "LearningRate");
        if (const SelectedRows* sr = SparseGrad<T>(ctx, nullptr)) {  // only the gradient's rows (repeats add up)
          AddRowsTo<T>(*sr, -lr, InPlaceOutput<T>(ctx, "ParamOut", "Param"));
          return;
        }
        const Tensor& p = ctx.Input("Param");
        const T* g = ctx.Input("Grad").data<T>();
        const T* pin = p.data<T>();
        T* pout = UpdateOutput<T>(ctx, "ParamOut", "Param");
        SgdRange<T>(pin, g, lr, pout, 0, p.numel());
      });
}

FL_REGISTER_OP(momentum, op) {
  op.Doc(
        "Momentum SGD: VelocityOut = mu * Velocity + Grad; ParamOut = Param - lr * VelocityOut, or with "
        "use_nesterov ParamOut = Param - lr * (Grad + mu * VelocityOut).")
      .Input("Param", "parameter")
      .Input("Grad", "gradient")
      .Input("Velocity", "velocity accumulator")
      .Input("LearningRate", "learning rate, one element")
      .Output("ParamOut", "updated parameter")
      .Output("VelocityOut", "updated velocity")
      .Inplace("ParamOut", "Param")
      .Inplace("VelocityOut", "Velocity")
      .Attr<float>("mu", 0.9f, "momentum")
      .Attr<bool>("use_nesterov", false, "Nesterov momentum")
      .KernelDTypeFrom("Param")
      .SetInferShape([](InferShapeContext& ctx) {
        InferUpdateShapes(ctx, {"Grad", "Velocity"}, {{"ParamOut", "Param"}, {"VelocityOut", "Velocity"}});
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ReadFloatScalarInput<T>(ctx, "LearningRate");
        const T mu = static_cast<T>(ctx.Attr<float>("mu"));
        const bool nesterov = ctx.Attr<bool>("use_nesterov");
        MergedRows<T> m;
        if (SparseGrad<T>(ctx, &m)) {  // Fluid: every row moves (its velocity decays), absent rows with g = 0
          T* p = InPlaceOutput<T>(ctx, "ParamOut", "Param");
          T* v = InPlaceOutput<T>(ctx, "VelocityOut", "Velocity");
          const int64_t w = m.width, h = ctx.Input("Param").dims()[0];
          ForEveryRow<T>(h, m, [&](int64_t r, const T* g) {
            T* pr = p + r * w;
            T* vr = v + r * w;
            for (int64_t j = 0; j < w; ++j) {
              const T gj = g ? g[j] : T(0);
              vr[j] = mu * vr[j] + gj;
              pr[j] -= nesterov ? (gj + mu * vr[j]) * lr : lr * vr[j];
            }
          });
          return;
        }
        const T* g = ctx.Input("Grad").data<T>();
        const T* v = ctx.Input("Velocity").data<T>();
        const T* p = ctx.Input("Param").data<T>();
        T* pout = UpdateOutput<T>(ctx, "ParamOut", "Param");
        T* vout = UpdateOutput<T>(ctx, "VelocityOut", "Velocity");
        MomentumRange<T>(p, g, v, mu, lr, nesterov, pout, vout, 0, ctx.Input("Param").numel());
      });
}

FL_REGISTER_OP(adam, op) {
  op.Doc("Adam (Kingma & Ba) with bias correction folded into the learning rate, as in Fluid.")
      .Input("Param", "parameter")
      .Input("Grad", "gradient")
      .Input("LearningRate", "learning rate, one element")
      .Input("Moment1", "first moment accumulator")
      .Input("Moment2", "second moment accumulator")
      .Input("Beta1Pow", "beta1^t, one element")
      .Input("Beta2Pow", "beta2^t, one element")
      .Output("ParamOut", "updated parameter")
      .Output("Moment1Out", "updated first moment")
      .Output("Moment2Out", "updated second moment")
      .Inplace("ParamOut", "Param")
      .Inplace("Moment1Out", "Moment1")
      .Inplace("Moment2Out", "Moment2")
      .Attr<float>("beta1", 0.9f, "exponential decay of the first moment")
      .Attr<float>("beta2", 0.999f, "exponential decay of the second moment")
      .Attr<float>("epsilon", 1e-8f, "numerical stability term")
      .Attr<bool>("lazy_mode", false,
                  "with a SelectedRows Grad, update only its rows (else every row's moments decay); no effect when "
                  "Grad is dense")
      .KernelDTypeFrom("Param")
      .SetInferShape([](InferShapeContext& ctx) {
        InferUpdateShapes(ctx, {"Grad", "Moment1", "Moment2"},
                          {{"ParamOut", "Param"}, {"Moment1Out", "Moment1"}, {"Moment2Out", "Moment2"}});
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ReadFloatScalarInput<T>(ctx, "LearningRate");
        const T b1 = static_cast<T>(ctx.Attr<float>("beta1"));
        const T b2 = static_cast<T>(ctx.Attr<float>("beta2"));
        const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
        const T b1p = ReadFloatScalarInput<T>(ctx, "Beta1Pow");
        const T b2p = ReadFloatScalarInput<T>(ctx, "Beta2Pow");
        const T lr_t = AdamStepSize<T>(lr, b1p, b2p);
        MergedRows<T> mg;
        if (SparseGrad<T>(ctx, &mg)) {
          T* p = InPlaceOutput<T>(ctx, "ParamOut", "Param");
          T* m1 = InPlaceOutput<T>(ctx, "Moment1Out", "Moment1");
          T* m2 = InPlaceOutput<T>(ctx, "Moment2Out", "Moment2");
          const int64_t w = mg.width, h = ctx.Input("Param").dims()[0];
          auto update = [&](int64_t r, const T* g) {
            for (int64_t j = 0, o = r * w; j < w; ++j, ++o) {
              const T gj = g ? g[j] : T(0);
              m1[o] = b1 * m1[o] + (T(1) - b1) * gj;
              m2[o] = b2 * m2[o] + (T(1) - b2) * gj * gj;
              p[o] -= lr_t * m1[o] / (std::sqrt(m2[o]) + eps);
            }
          };
          if (ctx.Attr<bool>("lazy_mode")) {  // only the rows in the gradient
            const size_t nr = mg.rows.size();
            for (size_t k = 0; k < nr; ++k) {
              if (k + kPrefetchRows < nr) {  // rows are scattered over the table: fetch ahead what they touch
                const int64_t o = mg.rows[k + kPrefetchRows] * w;
                __builtin_prefetch(p + o, 1);
                __builtin_prefetch(m1 + o, 1);
                __builtin_prefetch(m2 + o, 1);
              }
              update(mg.rows[k], mg.values.data() + k * w);
            }
          } else {  // Fluid: every row's moments decay and every row moves
            ForEveryRow<T>(h, mg, update);
          }
          return;
        }
        const T* g = ctx.Input("Grad").data<T>();
        const int64_t n = ctx.Input("Param").numel();
        T* p = InPlaceOutput<T>(ctx, "ParamOut", "Param");
        T* m1 = InPlaceOutput<T>(ctx, "Moment1Out", "Moment1");
        T* m2 = InPlaceOutput<T>(ctx, "Moment2Out", "Moment2");
        // Seven streams per element and little arithmetic: split over the pool, each part one vectorised loop.
        ParallelFor(n, kMinParallelElements,
                    [=](int64_t begin, int64_t end) { AdamRange<T>(g, b1, b2, eps, lr_t, p, m1, m2, begin, end); });
      });
}

FL_REGISTER_OP(adagrad, op) {
  op.Doc("Adagrad: MomentOut = Moment + Grad^2; ParamOut = Param - lr * Grad / (sqrt(MomentOut) + epsilon).")
      .Input("Param", "parameter")
      .Input("Grad", "gradient")
      .Input("Moment", "sum of squared gradients")
      .Input("LearningRate", "learning rate, one element")
      .Output("ParamOut", "updated parameter")
      .Output("MomentOut", "updated sum of squared gradients")
      .Inplace("ParamOut", "Param")
      .Inplace("MomentOut", "Moment")
      .Attr<float>("epsilon", 1e-6f, "numerical stability term")
      .KernelDTypeFrom("Param")
      .SetInferShape([](InferShapeContext& ctx) {
        InferUpdateShapes(ctx, {"Grad", "Moment"}, {{"ParamOut", "Param"}, {"MomentOut", "Moment"}});
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ReadFloatScalarInput<T>(ctx, "LearningRate");
        const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
        MergedRows<T> mg;
        if (SparseGrad<T>(ctx, &mg)) {  // only the gradient's (merged) rows: the dense update leaves the rest as is
          T* p = InPlaceOutput<T>(ctx, "ParamOut", "Param");
          T* m = InPlaceOutput<T>(ctx, "MomentOut", "Moment");
          const int64_t w = mg.width;
          for (size_t k = 0; k < mg.rows.size(); ++k) {
            if (k + kPrefetchRows < mg.rows.size()) {
              __builtin_prefetch(p + mg.rows[k + kPrefetchRows] * w, 1);
              __builtin_prefetch(m + mg.rows[k + kPrefetchRows] * w, 1);
            }
            const T* g = mg.values.data() + k * w;
            for (int64_t j = 0, o = mg.rows[k] * w; j < w; ++j, ++o) {
              m[o] += g[j] * g[j];
              p[o] -= lr * g[j] / (std::sqrt(m[o]) + eps);
            }
          }
          return;
        }
        const T* g = ctx.Input("Grad").data<T>();
        const T* m = ctx.Input("Moment").data<T>();
        const T* p = ctx.Input("Param").data<T>();
        T* pout = UpdateOutput<T>(ctx, "ParamOut", "Param");
        T* mout = UpdateOutput<T>(ctx, "MomentOut", "Moment");
        const int64_t n = ctx.Input("Param").numel();
        for (int64_t i = 0; i < n; ++i) {
          T mn = AdagradMoment(m[i], g[i]);
          mout[i] = mn;
          pout[i] = AdagradParam(p[i], g[i], mn, lr, eps);
        }
      });
}

}  // namespace fl

namespace fl {

namespace {

// Calls f(offset, g) for every element a dense Grad or the rows of a merged sparse one update: every element of
// Param when `all_rows` (absent sparse rows read g = 0), else only the gradient's rows.
template <typename T, typename F>
void ForEachUpdated(const ExecutionContext& ctx, bool all_rows, F&& f) {
  MergedRows<T> mg;
  if (SparseGrad<T>(ctx, &mg)) {
    const int64_t w = mg.width;
    if (all_rows) {
      ForEveryRow<T>(ctx.Input("Param").dims()[0], mg, [&](int64_t r, const T* g) {
        for (int64_t j = 0; j < w; ++j) f(r * w + j, g ? g[j] : T(0));
      });
    } else {
      for (size_t k = 0; k < mg.rows.size(); ++k)
        for (int64_t j = 0; j < w; ++j) f(mg.rows[k] * w + j, mg.values[k * w + j]);
    }
    return;
  }
  const T* g = ctx.Input("Grad").data<T>();
  const int64_t n = ctx.Input("Param").numel();
  for (int64_t i = 0; i < n; ++i) f(i, g[i]);
}

}  // namespace

FL_REGISTER_OP(rmsprop, op) {
  op.Doc(
        "RMSProp: MeanSquareOut = decay * MeanSquare + (1 - decay) * Grad^2; MomentOut = momentum * Moment + lr * "
        "Grad / sqrt(MeanSquareOut + epsilon); ParamOut = Param - MomentOut. centered: MeanGradOut = decay * "
        "MeanGrad + (1 - decay) * Grad and the denominator is sqrt(MeanSquareOut - MeanGradOut^2 + epsilon). A "
        "SelectedRows Grad is merged and every row updated (absent rows with a zero gradient), as Fluid does.")
      .Input("Param", "parameter")
      .Input("MeanSquare", "moving average of the squared gradient")
      .DispensableInput("MeanGrad", "moving average of the gradient (centered)")
      .Input("LearningRate", "learning rate, one element")
      .Input("Grad", "gradient (dense or SelectedRows)")
      .Input("Moment", "momentum accumulator")
      .Output("ParamOut", "updated parameter")
      .Output("MomentOut", "updated momentum accumulator")
      .Output("MeanSquareOut", "updated mean square")
      .DispensableOutput("MeanGradOut", "updated mean gradient (centered)")
      .Inplace("ParamOut", "Param")
      .Inplace("MomentOut", "Moment")
      .Inplace("MeanSquareOut", "MeanSquare")
      .Inplace("MeanGradOut", "MeanGrad")
      .Attr<float>("epsilon", 1e-10f, "numerical stability term")
      .Attr<float>("decay", 0.9f, "discount factor of the moving averages")
      .Min(0)
      .Attr<float>("momentum", 0.0f, "momentum")
      .Attr<bool>("centered", false, "normalise by the gradient's estimated variance instead of its mean square")
      .KernelDTypeFrom("Param")
      .SetInferShape([](InferShapeContext& ctx) {
        InferUpdateShapes(ctx, {"Grad", "Moment", "MeanSquare"},
                          {{"ParamOut", "Param"}, {"MomentOut", "Moment"}, {"MeanSquareOut", "MeanSquare"}});
        if (ctx.Attr<bool>("centered")) {
          FL_ENFORCE(ctx.HasInput("MeanGrad") && ctx.HasOutput("MeanGradOut"),
                     "rmsprop: centered=True needs MeanGrad and MeanGradOut (Param ", ctx.Describe("Param"), ")");
          InferUpdateShapes(ctx, {"MeanGrad"}, {{"MeanGradOut", "MeanGrad"}});
        }
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ReadFloatScalarInput<T>(ctx, "LearningRate");
        const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
        const T rho = static_cast<T>(ctx.Attr<float>("decay"));
        const T mom = static_cast<T>(ctx.Attr<float>("momentum"));
        const bool centered = ctx.Attr<bool>("centered");
        T* p = InPlaceOutput<T>(ctx, "ParamOut", "Param");
        T* mo = InPlaceOutput<T>(ctx, "MomentOut", "Moment");
        T* ms = InPlaceOutput<T>(ctx, "MeanSquareOut", "MeanSquare");
        T* mg = centered ? InPlaceOutput<T>(ctx, "MeanGradOut", "MeanGrad") : nullptr;
        ForEachUpdated<T>(ctx, true, [&](int64_t i, T g) {
          ms[i] = rho * ms[i] + (T(1) - rho) * g * g;
          T denom = ms[i] + eps;
          if (centered) {
            mg[i] = rho * mg[i] + (T(1) - rho) * g;
            denom -= mg[i] * mg[i];
          }
          mo[i] = mom * mo[i] + lr * g / std::sqrt(denom);
          p[i] -= mo[i];
        });
      });
}

FL_REGISTER_OP(ftrl, op) {
  op.Doc(
        "FTRL-Proximal: new_sq = SquaredAccumulator + Grad^2; LinearAccumOut = LinearAccumulator + Grad - "
        "(new_sq^-lr_power - SquaredAccumulator^-lr_power) / lr * Param; ParamOut = (l1 * sign(LinearAccumOut) - "
        "LinearAccumOut) / (new_sq^-lr_power / lr + 2 * l2) where |LinearAccumOut| > l1, else 0; SquaredAccumOut = "
        "new_sq. A SelectedRows Grad is merged and only its rows are updated.")
      .Input("Param", "parameter")
      .Input("SquaredAccumulator", "sum of squared gradients")
      .Input("LinearAccumulator", "linear accumulator")
      .Input("Grad", "gradient (dense or SelectedRows)")
      .Input("LearningRate", "learning rate, one element")
      .Output("ParamOut", "updated parameter")
      .Output("SquaredAccumOut", "updated squared accumulator")
      .Output("LinearAccumOut", "updated linear accumulator")
      .Inplace("ParamOut", "Param")
      .Inplace("SquaredAccumOut", "SquaredAccumulator")
      .Inplace("LinearAccumOut", "LinearAccumulator")
      .Attr<float>("l1", 0.0f, "L1 regularisation strength")
      .Min(0)
      .Attr<float>("l2", 0.0f, "L2 regularisation strength")
      .Min(0)
      .Attr<float>("lr_power", -0.5f, "learning-rate power (-0.5: the square root)")
      .KernelDTypeFrom("Param")
      .SetInferShape([](InferShapeContext& ctx) {
        InferUpdateShapes(ctx, {"Grad", "SquaredAccumulator", "LinearAccumulator"},
                          {{"ParamOut", "Param"},
                           {"SquaredAccumOut", "SquaredAccumulator"},
                           {"LinearAccumOut", "LinearAccumulator"}});
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ReadFloatScalarInput<T>(ctx, "LearningRate");
        const T l1 = static_cast<T>(ctx.Attr<float>("l1"));
        const T l2 = static_cast<T>(ctx.Attr<float>("l2"));
        const T power = static_cast<T>(ctx.Attr<float>("lr_power"));
        const bool half = power == T(-0.5);
        auto pw = [&](T x) { return half ? std::sqrt(x) : std::pow(x, -power); };
        T* p = InPlaceOutput<T>(ctx, "ParamOut", "Param");
        T* sq = InPlaceOutput<T>(ctx, "SquaredAccumOut", "SquaredAccumulator");
        T* lin = InPlaceOutput<T>(ctx, "LinearAccumOut", "LinearAccumulator");
        ForEachUpdated<T>(ctx, false, [&](int64_t i, T g) {
          const T new_sq = sq[i] + g * g;
          const T new_pow = pw(new_sq);
          const T l = lin[i] + g - (new_pow - pw(sq[i])) / lr * p[i];
          lin[i] = l;
          const T sign = l > T(0) ? T(1) : (l < T(0) ? T(-1) : T(0));
          p[i] = std::abs(l) > l1 ? (l1 * sign - l) / (new_pow / lr + T(2) * l2) : T(0);
          sq[i] = new_sq;
        });
      });
}

}  // namespace fl
