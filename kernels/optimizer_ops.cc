// The optimizer ops, each updating Param (and its accumulators) in place from Grad and a one-element
// LearningRate, as Fluid's optimizers append them:
//   sgd:      ParamOut = Param - LearningRate * Grad.
//   momentum: v = mu * v + g;  p -= lr * v   (Nesterov: p -= lr * (g + mu * v)).
//   adam:     m1 = b1 m1 + (1-b1) g;  m2 = b2 m2 + (1-b2) g^2;  lr_t = lr sqrt(1-b2^t)/(1-b1^t);
//             p -= lr_t m1 / (sqrt(m2) + eps).  Beta1Pow/Beta2Pow hold b^t; Python scales them after the update.
//   adagrad:  m += g^2;  p -= lr g / (sqrt(m) + eps).
#include <cmath>

#include "op_context.h"

namespace fl {

namespace {

// Compile/run-time shape check: every listed input slot has Param's dims; outputs take Param's dims.
void InferOptimizerShapes(InferShapeContext& ctx, std::initializer_list<const char*> same_as_param,
                          std::initializer_list<std::pair<const char*, const char*>> out_from_in) {
  DDim p = ctx.InputDim("Param");
  for (const char* slot : same_as_param) {
    DDim d = ctx.InputDim(slot);
    bool ok = d.size() == p.size();
    for (int i = 0; ok && i < d.size(); ++i) ok = d[i] < 0 || p[i] < 0 || d[i] == p[i];
    FL_ENFORCE(ok, ctx.Type(), ": ", ctx.Describe(slot), " must have the shape of ", ctx.Describe("Param"));
  }
  DDim lr = ctx.InputDim("LearningRate");
  FL_ENFORCE(lr.numel() == 1 || lr.numel() < 0, ctx.Type(), ": ", ctx.Describe("LearningRate"),
             " must hold exactly one element");
  for (auto& io : out_from_in) {
    if (ctx.HasOutput(io.first)) ctx.SetOutput(io.first, ctx.InputDim(io.second), ctx.InputDType(io.second));
  }
}

template <typename T>
T ScalarInput(const ExecutionContext& ctx, const char* slot) {
  const Tensor& t = ctx.Input(slot);
  FL_ENFORCE(t.numel() == 1, ctx.Type(), ": ", slot, " '", ctx.InputName(slot), "' must hold one element, has dims ",
             t.dims());
  FL_ENFORCE(t.dtype() == DTypeOf<T>::value || t.dtype() == DType::FP32 || t.dtype() == DType::FP64, ctx.Type(), ": ",
             slot, " must be float32/float64, got ", DTypeName(t.dtype()));
  return t.dtype() == DType::FP64 ? static_cast<T>(*t.data<double>()) : static_cast<T>(*t.data<float>());
}

// Output `out` aliases input `in` (in-place update, Fluid's ParamOut = Param) or gets its own buffer.
template <typename T>
T* InPlaceOutput(const ExecutionContext& ctx, const char* out, const char* in) {
  Tensor* o = ctx.Output(out);
  o->Resize(ctx.Input(in).dims());
  return o->mutable_data<T>(ctx.place());
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
      .SetInferShape([](InferShapeContext& ctx) { InferOptimizerShapes(ctx, {"Grad"}, {{"ParamOut", "Param"}}); })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ScalarInput<T>(ctx, "LearningRate");
        const Tensor& p = ctx.Input("Param");
        const T* g = ctx.Input("Grad").data<T>();
        const T* pin = p.data<T>();
        T* pout = InPlaceOutput<T>(ctx, "ParamOut", "Param");
        const int64_t n = p.numel();
        for (int64_t i = 0; i < n; ++i) pout[i] = pin[i] - lr * g[i];
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
        InferOptimizerShapes(ctx, {"Grad", "Velocity"}, {{"ParamOut", "Param"}, {"VelocityOut", "Velocity"}});
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ScalarInput<T>(ctx, "LearningRate");
        const T mu = static_cast<T>(ctx.Attr<float>("mu"));
        const bool nesterov = ctx.Attr<bool>("use_nesterov");
        const T* g = ctx.Input("Grad").data<T>();
        const T* v = ctx.Input("Velocity").data<T>();
        const T* p = ctx.Input("Param").data<T>();
        T* pout = InPlaceOutput<T>(ctx, "ParamOut", "Param");
        T* vout = InPlaceOutput<T>(ctx, "VelocityOut", "Velocity");
        const int64_t n = ctx.Input("Param").numel();
        if (nesterov) {
          for (int64_t i = 0; i < n; ++i) {
            T vn = mu * v[i] + g[i];
            vout[i] = vn;
            pout[i] = p[i] - (g[i] + mu * vn) * lr;
          }
        } else {
          for (int64_t i = 0; i < n; ++i) {
            T vn = mu * v[i] + g[i];
            vout[i] = vn;
            pout[i] = p[i] - lr * vn;
          }
        }
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
      .Attr<bool>("lazy_mode", false, "only update rows present in a sparse gradient (dense here: no effect)")
      .KernelDTypeFrom("Param")
      .SetInferShape([](InferShapeContext& ctx) {
        InferOptimizerShapes(ctx, {"Grad", "Moment1", "Moment2"},
                             {{"ParamOut", "Param"}, {"Moment1Out", "Moment1"}, {"Moment2Out", "Moment2"}});
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ScalarInput<T>(ctx, "LearningRate");
        const T b1 = static_cast<T>(ctx.Attr<float>("beta1"));
        const T b2 = static_cast<T>(ctx.Attr<float>("beta2"));
        const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
        const T b1p = ScalarInput<T>(ctx, "Beta1Pow");
        const T b2p = ScalarInput<T>(ctx, "Beta2Pow");
        const T lr_t = lr * std::sqrt(T(1) - b2p) / (T(1) - b1p);
        const T* g = ctx.Input("Grad").data<T>();
        const T* m1 = ctx.Input("Moment1").data<T>();
        const T* m2 = ctx.Input("Moment2").data<T>();
        const T* p = ctx.Input("Param").data<T>();
        T* pout = InPlaceOutput<T>(ctx, "ParamOut", "Param");
        T* m1o = InPlaceOutput<T>(ctx, "Moment1Out", "Moment1");
        T* m2o = InPlaceOutput<T>(ctx, "Moment2Out", "Moment2");
        const int64_t n = ctx.Input("Param").numel();
        for (int64_t i = 0; i < n; ++i) {
          T a = b1 * m1[i] + (T(1) - b1) * g[i];
          T b = b2 * m2[i] + (T(1) - b2) * g[i] * g[i];
          m1o[i] = a;
          m2o[i] = b;
          pout[i] = p[i] - lr_t * a / (std::sqrt(b) + eps);
        }
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
        InferOptimizerShapes(ctx, {"Grad", "Moment"}, {{"ParamOut", "Param"}, {"MomentOut", "Moment"}});
      })
      .CPUKernel<float, double>([](const ExecutionContext& ctx, auto tag) {
        using T = typename decltype(tag)::type;
        const T lr = ScalarInput<T>(ctx, "LearningRate");
        const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
        const T* g = ctx.Input("Grad").data<T>();
        const T* m = ctx.Input("Moment").data<T>();
        const T* p = ctx.Input("Param").data<T>();
        T* pout = InPlaceOutput<T>(ctx, "ParamOut", "Param");
        T* mout = InPlaceOutput<T>(ctx, "MomentOut", "Moment");
        const int64_t n = ctx.Input("Param").numel();
        for (int64_t i = 0; i < n; ++i) {
          T mn = m[i] + g[i] * g[i];
          mout[i] = mn;
          pout[i] = p[i] - lr * g[i] / (std::sqrt(mn) + eps);
        }
      });
}

}  // namespace fl
