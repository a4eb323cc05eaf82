// adam: m1 = b1 m1 + (1-b1) g;  m2 = b2 m2 + (1-b2) g^2;  lr_t = lr sqrt(1-b2^t)/(1-b1^t);
//       p -= lr_t m1 / (sqrt(m2) + eps).  Beta1Pow/Beta2Pow hold b^t; Python scales them after the update.
#include <cmath>

#include "helpers/optimizer_common.h"

namespace fl {

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

}  // namespace fl
