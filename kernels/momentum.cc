// momentum: v = mu * v + g;  p -= lr * v   (Nesterov: p -= lr * (g + mu * v)).
#include "helpers/optimizer_common.h"

namespace fl {

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

}  // namespace fl
