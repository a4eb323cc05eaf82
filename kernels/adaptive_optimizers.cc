// The adaptive optimizer update ops of Fluid 1.8 (dense LoDTensor gradients, float32/float64), each updating
// Param and its accumulators in place, with Fluid's slot and attribute names:
//   decayed_adagrad: m = decay m + (1-decay) g^2;  p -= lr g / (sqrt(m) + eps).
//   adadelta:        Eg = rho Eg + (1-rho) g^2;  u = -sqrt((Eu + eps) / (Eg + eps)) g;  Eu = rho Eu + (1-rho) u^2;
//                    p += u   (no LearningRate input, as in Fluid).
//   adamax:          m = b1 m + (1-b1) g;  n = max(b2 n + eps, |g|);  p -= lr / (1 - Beta1Pow) * m / n
//                    (Beta1Pow holds b1^t; AdamaxOptimizer scales it after the update).
//   lamb:            m1, m2 as Adam;  r = m1 / (sqrt(m2) + eps) + weight_decay p;
//                    p -= lr * (|p| / |r|) * r, the ratio 1 when either norm is 0 (Fluid 1.8: no bias
//                    correction; Beta1Pow/Beta2Pow are read by nothing).
//   lars_momentum:   local_lr = lr * lars_coeff * |p| / (|g| + lars_weight_decay |p|) when both norms are > 0,
//                    else lr;  v = mu v + local_lr (g + lars_weight_decay p);  p -= v.
//   average_accumulates (ModelAverage): the sliding-window sums of the parameter, see its Doc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "helpers/optimizer_update.h"
#include "op_context.h"

namespace fl {

FL_REGISTER_OP(decayed_adagrad, op) {
  op.Doc(
        "Decayed Adagrad: MomentOut = decay * Moment + (1 - decay) * Grad^2; ParamOut = Param - LearningRate * "
        "Grad / (sqrt(MomentOut) + epsilon).")
      .Input("Param", "parameter")
      .Input("Grad", "gradient, Param's shape")
      .Input("Moment", "decayed sum of squared gradients")
      .Input("LearningRate", "learning rate, one element")
      .Output("ParamOut", "updated parameter")
      .Output("MomentOut", "updated moment")
      .Inplace("ParamOut", "Param")
      .Inplace("MomentOut", "Moment")
      .Attr<float>("decay", 0.95f, "decay rate of the moment")
      .Attr<float>("epsilon", 1.0e-6f, "numerical stability term")
      .KernelDTypeFrom("Param")
      .SetInferShape([](InferShapeContext& ctx) {
        InferUpdateShapes(ctx, {"Grad", "Moment"}, {{"ParamOut", "Param"}, {"MomentOut", "Moment"}});
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ReadFloatScalarInput<T>(ctx, "LearningRate");
        const T decay = static_cast<T>(ctx.Attr<float>("decay"));
        const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
        const T* g = ctx.Input("Grad").data<T>();
        const T* m = ctx.Input("Moment").data<T>();
        const T* p = ctx.Input("Param").data<T>();
        T* pout = UpdateOutput<T>(ctx, "ParamOut", "Param");
        T* mout = UpdateOutput<T>(ctx, "MomentOut", "Moment");
        const int64_t n = ctx.Input("Param").numel();
        for (int64_t i = 0; i < n; ++i) {
          const T mn = decay * m[i] + (T(1) - decay) * g[i] * g[i];
          mout[i] = mn;
          pout[i] = p[i] - lr * g[i] / (std::sqrt(mn) + eps);
        }
      });
}

FL_REGISTER_OP(adadelta, op) {
  op.Doc(
        "Adadelta (Zeiler 2012): AvgSquaredGradOut = rho * AvgSquaredGrad + (1 - rho) * Grad^2; update = "
        "-sqrt((AvgSquaredUpdate + epsilon) / (AvgSquaredGradOut + epsilon)) * Grad; AvgSquaredUpdateOut = rho * "
        "AvgSquaredUpdate + (1 - rho) * update^2; ParamOut = Param + update. No learning rate, as in Fluid.")
      .Input("Param", "parameter")
      .Input("Grad", "gradient, Param's shape")
      .Input("AvgSquaredGrad", "running average of squared gradients")
      .Input("AvgSquaredUpdate", "running average of squared updates")
      .Output("ParamOut", "updated parameter")
      .Output("AvgSquaredGradOut", "updated average of squared gradients")
      .Output("AvgSquaredUpdateOut", "updated average of squared updates")
      .Inplace("ParamOut", "Param")
      .Inplace("AvgSquaredGradOut", "AvgSquaredGrad")
      .Inplace("AvgSquaredUpdateOut", "AvgSquaredUpdate")
      .Attr<float>("rho", 0.95f, "decay rate of the running averages")
      .Attr<float>("epsilon", 1.0e-6f, "numerical stability term")
      .KernelDTypeFrom("Param")
      .SetInferShape([](InferShapeContext& ctx) {
        InferUpdateShapes(ctx, {"Grad", "AvgSquaredGrad", "AvgSquaredUpdate"},
                          {{"ParamOut", "Param"},
                           {"AvgSquaredGradOut", "AvgSquaredGrad"},
                           {"AvgSquaredUpdateOut", "AvgSquaredUpdate"}},
                          /*lr=*/false);
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T rho = static_cast<T>(ctx.Attr<float>("rho"));
        const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
        const T* g = ctx.Input("Grad").data<T>();
        const T* eg = ctx.Input("AvgSquaredGrad").data<T>();
        const T* eu = ctx.Input("AvgSquaredUpdate").data<T>();
        const T* p = ctx.Input("Param").data<T>();
        T* pout = UpdateOutput<T>(ctx, "ParamOut", "Param");
        T* egout = UpdateOutput<T>(ctx, "AvgSquaredGradOut", "AvgSquaredGrad");
        T* euout = UpdateOutput<T>(ctx, "AvgSquaredUpdateOut", "AvgSquaredUpdate");
        const int64_t n = ctx.Input("Param").numel();
        for (int64_t i = 0; i < n; ++i) {
          const T egn = rho * eg[i] + (T(1) - rho) * g[i] * g[i];
          const T u = -std::sqrt((eu[i] + eps) / (egn + eps)) * g[i];
          const T eun = rho * eu[i] + (T(1) - rho) * u * u;
          egout[i] = egn;
          euout[i] = eun;
          pout[i] = p[i] + u;
        }
      });
}

FL_REGISTER_OP(adamax, op) {
  op.Doc(
        "Adamax (Kingma & Ba, section 7): MomentOut = beta1 * Moment + (1 - beta1) * Grad; InfNormOut = "
        "max(beta2 * InfNorm + epsilon, |Grad|); ParamOut = Param - LearningRate / (1 - Beta1Pow) * MomentOut / "
        "InfNormOut. Beta1Pow holds beta1^t; the optimizer scales it by beta1 after the update, as in Fluid.")
      .Input("Param", "parameter")
      .Input("Grad", "gradient, Param's shape")
      .Input("LearningRate", "learning rate, one element")
      .Input("Moment", "first moment")
      .Input("InfNorm", "exponentially weighted infinity norm")
      .Input("Beta1Pow", "beta1^t, one element")
      .Output("ParamOut", "updated parameter")
      .Output("MomentOut", "updated first moment")
      .Output("InfNormOut", "updated infinity norm")
      .Inplace("ParamOut", "Param")
      .Inplace("MomentOut", "Moment")
      .Inplace("InfNormOut", "InfNorm")
      .Attr<float>("beta1", 0.9f, "exponential decay of the first moment")
      .Attr<float>("beta2", 0.999f, "exponential decay of the infinity norm")
      .Attr<float>("epsilon", 1.0e-8f, "numerical stability term")
      .KernelDTypeFrom("Param")
      .SetInferShape([](InferShapeContext& ctx) {
        InferUpdateShapes(ctx, {"Grad", "Moment", "InfNorm"},
                          {{"ParamOut", "Param"}, {"MomentOut", "Moment"}, {"InfNormOut", "InfNorm"}});
        const DDim b = ctx.InputDim("Beta1Pow");
        FL_ENFORCE(b.numel() == 1 || b.numel() < 0, ctx.Type(), ": ", ctx.Describe("Beta1Pow"),
                   " must hold exactly one element");
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T b1 = static_cast<T>(ctx.Attr<float>("beta1"));
        const T b2 = static_cast<T>(ctx.Attr<float>("beta2"));
        const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
        const T lr_t = ReadFloatScalarInput<T>(ctx, "LearningRate") / (T(1) - ReadFloatScalarInput<T>(ctx, "Beta1Pow"));
        const T* g = ctx.Input("Grad").data<T>();
        const T* m = ctx.Input("Moment").data<T>();
        const T* u = ctx.Input("InfNorm").data<T>();
        const T* p = ctx.Input("Param").data<T>();
        T* pout = UpdateOutput<T>(ctx, "ParamOut", "Param");
        T* mout = UpdateOutput<T>(ctx, "MomentOut", "Moment");
        T* uout = UpdateOutput<T>(ctx, "InfNormOut", "InfNorm");
        const int64_t n = ctx.Input("Param").numel();
        for (int64_t i = 0; i < n; ++i) {
          const T mn = b1 * m[i] + (T(1) - b1) * g[i];
          const T un = std::max(b2 * u[i] + eps, std::abs(g[i]));
          mout[i] = mn;
          uout[i] = un;
          pout[i] = p[i] - lr_t * mn / un;
        }
      });
}

FL_REGISTER_OP(lamb, op) {
  op.Doc(
        "LAMB (You et al. 2019), as Fluid 1.8 computes it: Moment1Out = beta1 * Moment1 + (1 - beta1) * Grad; "
        "Moment2Out = beta2 * Moment2 + (1 - beta2) * Grad^2; r = Moment1Out / (sqrt(Moment2Out) + epsilon) + "
        "weight_decay * Param; ParamOut = Param - LearningRate * (||Param|| / ||r||) * r, the trust ratio 1 when "
        "either norm is 0. No bias correction: Beta1Pow and Beta2Pow are inputs the update does not read.")
      .Input("Param", "parameter")
      .Input("Grad", "gradient, Param's shape")
      .Input("LearningRate", "learning rate, one element")
      .Input("Moment1", "first moment")
      .Input("Moment2", "second moment")
      .Input("Beta1Pow", "beta1^t (not read by the update, as in Fluid 1.8)")
      .Input("Beta2Pow", "beta2^t (not read by the update, as in Fluid 1.8)")
      .Output("ParamOut", "updated parameter")
      .Output("Moment1Out", "updated first moment")
      .Output("Moment2Out", "updated second moment")
      .Inplace("ParamOut", "Param")
      .Inplace("Moment1Out", "Moment1")
      .Inplace("Moment2Out", "Moment2")
      .Attr<float>("weight_decay", 0.01f, "decoupled weight decay rate")
      .Attr<float>("beta1", 0.9f, "exponential decay of the first moment")
      .Attr<float>("beta2", 0.999f, "exponential decay of the second moment")
      .Attr<float>("epsilon", 1.0e-6f, "numerical stability term")
      .KernelDTypeFrom("Param")
      .SetInferShape([](InferShapeContext& ctx) {
        InferUpdateShapes(ctx, {"Grad", "Moment1", "Moment2"},
                          {{"ParamOut", "Param"}, {"Moment1Out", "Moment1"}, {"Moment2Out", "Moment2"}});
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ReadFloatScalarInput<T>(ctx, "LearningRate");
        const T wd = static_cast<T>(ctx.Attr<float>("weight_decay"));
        const T b1 = static_cast<T>(ctx.Attr<float>("beta1"));
        const T b2 = static_cast<T>(ctx.Attr<float>("beta2"));
        const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
        const T* g = ctx.Input("Grad").data<T>();
        const T* m1 = ctx.Input("Moment1").data<T>();
        const T* m2 = ctx.Input("Moment2").data<T>();
        const T* p = ctx.Input("Param").data<T>();
        const int64_t n = ctx.Input("Param").numel();
        // The trust ratio needs ||Param|| before the update overwrites it (ParamOut is Param): the update
        // direction r goes to a scratch buffer first.
        std::vector<T> r(static_cast<size_t>(n));
        const double p_norm = L2Norm(p, n);
        T* m1o = UpdateOutput<T>(ctx, "Moment1Out", "Moment1");
        T* m2o = UpdateOutput<T>(ctx, "Moment2Out", "Moment2");
        for (int64_t i = 0; i < n; ++i) {
          const T a = b1 * m1[i] + (T(1) - b1) * g[i];
          const T b = b2 * m2[i] + (T(1) - b2) * g[i] * g[i];
          m1o[i] = a;
          m2o[i] = b;
          r[i] = a / (std::sqrt(b) + eps) + wd * p[i];
        }
        const double r_norm = L2Norm(r.data(), n);
        const T ratio = (p_norm > 0 && r_norm > 0) ? static_cast<T>(p_norm / r_norm) : T(1);
        const T step = lr * ratio;
        T* pout = UpdateOutput<T>(ctx, "ParamOut", "Param");
        for (int64_t i = 0; i < n; ++i) pout[i] = p[i] - step * r[i];
      });
}

FL_REGISTER_OP(lars_momentum, op) {
  op.Doc(
        "LARS momentum (You et al. 2017): local_lr = LearningRate * lars_coeff * ||Param|| / (||Grad|| + "
        "lars_weight_decay * ||Param||) when both norms are positive, else LearningRate; VelocityOut = mu * "
        "Velocity + local_lr * (Grad + lars_weight_decay * Param); ParamOut = Param - VelocityOut.")
      .Input("Param", "parameter")
      .Input("Grad", "gradient, Param's shape")
      .Input("Velocity", "velocity accumulator")
      .Input("LearningRate", "learning rate, one element")
      .Output("ParamOut", "updated parameter")
      .Output("VelocityOut", "updated velocity")
      .Inplace("ParamOut", "Param")
      .Inplace("VelocityOut", "Velocity")
      .RequiredAttr<float>("mu", 0.0f, "momentum")
      .Attr<float>("lars_coeff", 0.001f, "LARS coefficient (trust ratio scale)")
      .Attr<float>("lars_weight_decay", 0.0005f, "weight decay inside the LARS update")
      .KernelDTypeFrom("Param")
      .SetInferShape([](InferShapeContext& ctx) {
        InferUpdateShapes(ctx, {"Grad", "Velocity"}, {{"ParamOut", "Param"}, {"VelocityOut", "Velocity"}});
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ReadFloatScalarInput<T>(ctx, "LearningRate");
        const T mu = static_cast<T>(ctx.Attr<float>("mu"));
        const T coeff = static_cast<T>(ctx.Attr<float>("lars_coeff"));
        const T wd = static_cast<T>(ctx.Attr<float>("lars_weight_decay"));
        const T* g = ctx.Input("Grad").data<T>();
        const T* v = ctx.Input("Velocity").data<T>();
        const T* p = ctx.Input("Param").data<T>();
        const int64_t n = ctx.Input("Param").numel();
        const double p_norm = L2Norm(p, n), g_norm = L2Norm(g, n);
        T local_lr = lr;
        if (p_norm > 0 && g_norm > 0) {
          local_lr = static_cast<T>(lr * coeff * p_norm / (g_norm + wd * p_norm));
        }
        T* pout = UpdateOutput<T>(ctx, "ParamOut", "Param");
        T* vout = UpdateOutput<T>(ctx, "VelocityOut", "Velocity");
        for (int64_t i = 0; i < n; ++i) {
          const T vn = v[i] * mu + local_lr * (g[i] + wd * p[i]);
          vout[i] = vn;
          pout[i] = p[i] - vn;
        }
      });
}

namespace {

constexpr int64_t kMaxNumAccumulates = 16384;  // Fluid's: sum_1 moves into sum_2 every this many updates

void InferAverageAccumulates(InferShapeContext& ctx) {
  const DDim p = ctx.InputDim("param");
  const DType pt = ctx.InputDType("param");
  for (const char* slot : {"in_sum_1", "in_sum_2", "in_sum_3"}) {
    const DDim d = ctx.InputDim(slot);
    bool ok = d.size() == p.size();
    for (int i = 0; ok && i < d.size(); ++i) ok = d[i] < 0 || p[i] < 0 || d[i] == p[i];
    FL_ENFORCE(ok, ctx.Type(), ": ", ctx.Describe(slot), " must have the shape of ", ctx.Describe("param"));
    const DType t = ctx.InputDType(slot);
    FL_ENFORCE(t == pt || t == DType::UNDEFINED || pt == DType::UNDEFINED, ctx.Type(), ": ", ctx.Describe(slot),
               " must have param's dtype ", DTypeName(pt), ", got ", DTypeName(t));
  }
  for (const char* slot : {"in_num_accumulates", "in_old_num_accumulates", "in_num_updates"}) {
    const DDim d = ctx.InputDim(slot);
    FL_ENFORCE(d.numel() == 1 || d.numel() < 0, ctx.Type(), ": ", ctx.Describe(slot), " must hold one element");
    const DType t = ctx.InputDType(slot);
    FL_ENFORCE(t == DType::INT64 || t == DType::UNDEFINED, ctx.Type(), ": ", ctx.Describe(slot), " must be int64, got ",
               DTypeName(t));
  }
  for (const char* s : {"sum_1", "sum_2", "sum_3", "num_accumulates", "old_num_accumulates", "num_updates"}) {
    const std::string out = std::string("out_") + s, in = std::string("in_") + s;
    ctx.SetOutput(out.c_str(), ctx.InputDim(in.c_str()), ctx.InputDType(in.c_str()));
  }
}

void CheckAverageWindows(const OpCheckContext& ctx) {
  const int64_t lo = ctx.Attr<int64_t>("min_average_window"), hi = ctx.Attr<int64_t>("max_average_window");
  FL_ENFORCE(lo <= hi, ctx.Type(), ": min_average_window (", lo, ") must not be larger than max_average_window (", hi,
             ")");
}

int64_t ReadCounter(const ExecutionContext& ctx, const char* slot) {
  const Tensor& t = ctx.Input(slot);
  FL_ENFORCE(t.numel() == 1 && t.dtype() == DType::INT64, ctx.Type(), ": ", slot, " '", ctx.InputName(slot),
             "' must be a 1-element int64 tensor, got ", DTypeName(t.dtype()), " ", t.dims());
  return t.data<int64_t>()[0];
}

void WriteCounter(const ExecutionContext& ctx, const char* slot, int64_t value) {
  Tensor* t = ctx.Output(slot);
  t->Resize(DDim({1}));
  t->mutable_data<int64_t>(ctx.place())[0] = value;
}

}  // namespace

FL_REGISTER_OP(average_accumulates, op) {
  op.Doc(
        "ModelAverage's accumulation, as Fluid computes it with every out_X the in_X variable: num_updates and "
        "num_accumulates += 1; sum_1 += param; every 16384 updates sum_2 += sum_1 and sum_1 = 0; when "
        "num_accumulates >= min_average_window and >= min(max_average_window, num_updates * average_window), "
        "sum_3 = sum_1 + sum_2, sum_1 = sum_2 = 0, old_num_accumulates = num_accumulates and num_accumulates = 0. "
        "The average is (sum_1 + sum_2 + sum_3) / (num_accumulates + old_num_accumulates).")
      .Input("param", "the parameter")
      .Input("in_sum_1", "recent sum")
      .Input("in_sum_2", "sum of older blocks of 16384 updates")
      .Input("in_sum_3", "sum of the previous window")
      .Input("in_num_accumulates", "int64 [1]: updates in the current window")
      .Input("in_old_num_accumulates", "int64 [1]: updates in the previous window")
      .Input("in_num_updates", "int64 [1]: all updates")
      .Output("out_sum_1", "updated sum_1")
      .Output("out_sum_2", "updated sum_2")
      .Output("out_sum_3", "updated sum_3")
      .Output("out_num_accumulates", "updated num_accumulates")
      .Output("out_old_num_accumulates", "updated old_num_accumulates")
      .Output("out_num_updates", "updated num_updates")
      .Inplace("out_sum_1", "in_sum_1")
      .Inplace("out_sum_2", "in_sum_2")
      .Inplace("out_sum_3", "in_sum_3")
      .Inplace("out_num_accumulates", "in_num_accumulates")
      .Inplace("out_old_num_accumulates", "in_old_num_accumulates")
      .Inplace("out_num_updates", "in_num_updates")
      .Attr<float>("average_window", 0.0f, "the window's length relative to num_updates")
      .Min(0)
      .Attr<int64_t>("max_average_window", std::numeric_limits<int64_t>::max(), "longest window")
      .Min(1)
      .Attr<int64_t>("min_average_window", int64_t{10000}, "shortest window")
      .Min(1)
      .Check(CheckAverageWindows)
      .KernelDTypeFrom("param")
      .SetInferShape(InferAverageAccumulates)
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const float window = ctx.Attr<float>("average_window");
        const int64_t max_window = ctx.Attr<int64_t>("max_average_window");
        const int64_t min_window = ctx.Attr<int64_t>("min_average_window");
        int64_t num_updates = ReadCounter(ctx, "in_num_updates") + 1;
        int64_t num_acc = ReadCounter(ctx, "in_num_accumulates") + 1;
        int64_t old_num_acc = ReadCounter(ctx, "in_old_num_accumulates");
        const int64_t n = ctx.Input("param").numel();
        const T* p = ctx.Input("param").data<T>();
        const T* s1 = ctx.Input("in_sum_1").data<T>();
        const T* s2 = ctx.Input("in_sum_2").data<T>();
        const T* s3 = ctx.Input("in_sum_3").data<T>();
        T* o1 = UpdateOutput<T>(ctx, "out_sum_1", "in_sum_1");
        T* o2 = UpdateOutput<T>(ctx, "out_sum_2", "in_sum_2");
        T* o3 = UpdateOutput<T>(ctx, "out_sum_3", "in_sum_3");
        const bool spill = num_updates % kMaxNumAccumulates == 0;
        // Fluid: min<int64_t>(max_average_window, num_updates * average_window), the product in float and
        // truncated to int64 (clamped here before the conversion, which would overflow).
        const float prod = static_cast<float>(num_updates) * window;
        const int64_t scaled = prod >= 9.2e18f ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(prod);
        const bool restart = num_acc >= min_window && num_acc >= std::min(max_window, scaled);
        for (int64_t i = 0; i < n; ++i) {
          T a = s1[i] + p[i], b = s2[i], c = s3[i];
          if (spill) {
            b += a;
            a = T(0);
          }
          if (restart) {
            c = a + b;
            a = b = T(0);
          }
          o1[i] = a;
          o2[i] = b;
          o3[i] = c;
        }
        if (restart) {
          old_num_acc = num_acc;
          num_acc = 0;
        }
        WriteCounter(ctx, "out_num_updates", num_updates);
        WriteCounter(ctx, "out_num_accumulates", num_acc);
        WriteCounter(ctx, "out_old_num_accumulates", old_num_acc);
      });
}

}  // namespace fl
